"""Out of scope (CLINC150): how well does each confidence score separate texts that fit no label?

In-scope rows are CLINC150's 150 intents; out-of-scope rows are its ``oos`` texts
(``include_oos=True``): ``oos_validation`` (100) for choosing, a seeded sample of ``oos_test`` for
reporting. Scores (higher = more in-scope), all from the feature cache (bench/_fit_cache.py):

* zero-shot, calibrated on in-scope validation (the default walk: batch prior + fitted bias + T,
  L2 by out-of-fold NLL): max probability, margin (top-1 minus top-2), negative entropy;
* a "none of these" option scored exactly like any label (its exact log-probability after the
  same prompt, through the engine), then calibrated with the labels on validation, in-scope rows
  and the *fitting half* of ``oos_validation`` (labelled as the extra option) together: 1 - P(none);
* the fitted head (``Classifier.fit``, answer-slot states, the full training split), calibrated on
  in-scope validation: max probability, margin, negative entropy.

``oos_validation`` is split into two seeded halves (seed 0): the none option's calibration is
fitted on the first, and every score is *chosen* on the second (validation AUROC: in-scope
validation vs that half), so the option is not selected on out-of-scope rows its fit saw. The
in-scope validation rows are used by every score's calibration and by the selection alike.

Reported on test: AUROC (in-scope vs out-of-scope) and the out-of-scope rate kept when 95% of
in-scope texts are kept, for the score chosen on validation (highest validation AUROC) and for all.
A score whose features are not cached is recorded as "not run: <reason>", never left out; the
zero-shot scores and states of the four selections and the training split's states are required
(the report stops first, naming the commands to run).

    python -m bench.learning_curve cache --what scores,states --dkeys clinc150 \
        --sels validation200,oos_validation,test200,oos_test200
    python -m bench.learning_curve cache --what states --dkeys clinc150 --sels train
    python -m bench.oos none --surfaces " none of these"," other"," out of scope"   # cache the option's scores
    python -m bench.oos report --json bench/results/fit_oos.json

What it deliberately does not do: train on out-of-scope texts (the head sees in-scope labels only).
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent

from bench._fit_cache import classifier, path, rows  # noqa: E402
from bench.learning_curve import DATA, calibrated, load  # noqa: E402

SELS = ("validation200", "oos_validation", "test200", "oos_test200")


class _NoneOption:
    """``score_with_checkpoint`` adapter: the exact log-probability of one extra option after the prompt."""

    def __init__(self, clf, surface):
        self.clf, self.surface, self.labels = clf, surface, [surface]

    def fingerprint(self):
        return f"none-option:{self.surface!r}:{self.clf.fingerprint()}"

    def decision_function(self, texts):
        from judge.engine import Item
        from judge.label_paths import prompt_items

        c = self.clf.compiled_
        seqs = c.engine.option_ids(c.tail, list(c.surfaces) + [self.surface], what="Option")
        mine = seqs[-1]
        clash = [c.surfaces[i] for i, s in enumerate(seqs[:-1]) if s[: len(mine)] == mine or mine[: len(s)] == s]
        if clash:
            raise ValueError(f"the option {self.surface!r} is a token prefix of labels {clash[:3]} (or they of it)")
        items = [Item(it.ids, [mine]) for it in prompt_items(c, texts)]
        return np.stack(c.engine.score_items(items, root=c.root_ids, batch_size=8))


def none_scores(args) -> None:
    import torch

    from judge.evaluation import score_with_checkpoint

    torch.set_num_threads(1)
    clf = None
    for sel in SELS:
        texts, _, labels, _ = rows("clinc150", sel, args.data_dir)
        clf = clf or classifier("clinc150", labels)
        for surface in args.surfaces.split(","):
            t0 = time.perf_counter()
            tag = surface.strip().replace(" ", "_")
            s = score_with_checkpoint(_NoneOption(clf, surface), texts, path("smollm2", "clinc150", sel, f"none-{tag}"))
            print(f"{sel:<15} {surface!r:<18} {s.shape} {time.perf_counter() - t0:.1f} s", flush=True)


def _auroc(inside, outside):
    from sklearn.metrics import roc_auc_score

    return float(roc_auc_score(np.r_[np.ones(len(inside)), np.zeros(len(outside))], np.r_[inside, outside]))


def _kept_at(inside, outside, coverage=0.95):
    """Fraction of out-of-scope rows kept by the threshold that keeps ``coverage`` of in-scope rows."""
    th = np.quantile(inside, 1.0 - coverage)
    return float(np.mean(outside >= th)), float(th)


def _confidences(p):
    s = np.sort(p, axis=1)
    ent = -(p * np.log(np.clip(p, 1e-300, None))).sum(1)
    return {"max probability": s[:, -1], "margin": s[:, -1] - s[:, -2], "negative entropy": -ent}


def _oos_halves(n, seed=0):
    """Seeded halves of the ``oos_validation`` rows: (fit the none option's calibration, choose the score)."""
    order = np.random.default_rng(seed).permutation(n)
    return np.sort(order[: n // 2]), np.sort(order[n // 2:])


def _require(f, tr) -> None:
    """Stop with the commands to run when a feature the report needs is not (fully) cached."""
    gaps = [(sel, kind) for sel in SELS for kind in ("scores", "states") if kind not in f[sel]]
    gaps += [("train", "states")] if "states" not in tr else []
    if gaps:
        cmds = "\n".join(f"  python -m bench.learning_curve cache --what {kind} --dkeys clinc150 --sels {sel}"
                         for sel, kind in gaps)
        raise SystemExit("bench/oos.py report needs cached CLINC150 features it does not find (or finds still "
                         "being computed): " + ", ".join(f"{k} of {s}" for s, k in gaps)
                         + f"; run first:\n{cmds}")


def report(args) -> None:
    from judge.adaptation import fit_head
    from judge.calibration.state import Calibration, choose_bias_l2, prior_bias
    from judge.evaluation import read_checkpoint

    f = {sel: load("clinc150", sel, ("scores", "states")) for sel in SELS}
    tr = load("clinc150", "train", ("states",))
    _require(f, tr)
    K = len(f["test200"]["labels"])
    y_va = f["validation200"]["y"]
    fit_half, pick_half = _oos_halves(len(f["oos_validation"]["texts"]))
    scores = {}  # name -> {sel: in-scope-ness}
    not_run = {}  # name -> "not run: <reason>"
    # zero-shot, calibrated on in-scope validation
    for sel in SELS:
        p, l2 = calibrated(f["validation200"]["scores"], y_va, f[sel]["scores"])
        for name, v in _confidences(p).items():
            scores.setdefault(f"zero-shot: {name}", {})[sel] = v
    # "none of these": calibrated with the labels on validation (in-scope + the fitting half of oos_validation
    # as class K); chosen, like every score, on the other half
    for surface in args.surfaces.split(","):
        tag = surface.strip().replace(" ", "_")
        name = f"none-of-these option {surface.strip()!r}: 1 - P(none)"
        cols = {}
        for sel in SELS:
            g = path("smollm2", "clinc150", sel, f"none-{tag}")
            ck = read_checkpoint(g) if g.exists() else None
            if ck is None or len(ck.scores) != len(f[sel]["texts"]) or np.isnan(ck.scores).any():
                continue
            cols[sel] = np.c_[f[sel]["scores"], ck.scores]
        missing = [sel for sel in SELS if sel not in cols]
        if missing:
            not_run[name] = (f"not run: the option's exact scores are not (fully) cached for {missing} (run: python "
                             f"bench/oos.py none --surfaces {surface!r})")
            print(f"{name}: {not_run[name]}", flush=True)
            continue
        S = np.r_[cols["validation200"], cols["oos_validation"][fit_half]]
        yy = np.r_[y_va, np.full(len(fit_half), K)]
        l2 = choose_bias_l2(S, yy, "batch")["l2"]
        cal = Calibration.fit(tuple(range(K + 1)), S, yy, bias=prior_bias("batch", S), fit_bias=l2)
        for sel in SELS:
            scores.setdefault(name, {})[sel] = 1.0 - cal.transform(cols[sel])[:, K]
    # the fitted head on the full training split (states only), calibrated on in-scope validation
    t0 = time.perf_counter()
    head = fit_head(tr["states"], tr["y"], K, cv=3)
    fit_s = time.perf_counter() - t0
    s_va = head.log_proba(None, f["validation200"]["states"])
    for sel in SELS:
        p, _ = calibrated(s_va, y_va, head.log_proba(None, f[sel]["states"]))
        for name, v in _confidences(p).items():
            scores.setdefault(f"fitted head (full train): {name}", {})[sel] = v
        if sel == "test200":
            head_acc = float((p.argmax(1) == f[sel]["y"]).mean())
    rows_out = {}
    for name, by in scores.items():
        inside, pick = by["validation200"], by["oos_validation"][pick_half]
        val_auc = _auroc(inside, pick)
        _, th = _kept_at(inside, pick)
        test_auc = _auroc(by["test200"], by["oos_test200"])
        kept_test, _ = _kept_at(by["test200"], by["oos_test200"])
        rows_out[name] = {"validation_auroc": val_auc, "test_auroc": test_auc, "test_oos_kept_at_95": kept_test,
                          "threshold_from_validation": th,
                          "test_in_scope_kept_at_val_threshold": float(np.mean(by["test200"] >= th)),
                          "test_oos_kept_at_val_threshold": float(np.mean(by["oos_test200"] >= th))}
    rows_out.update(not_run)
    chosen = {}
    for group in ("zero-shot", "fitted head"):
        cands = {k: v for k, v in rows_out.items() if isinstance(v, dict) and
                 (k.startswith(group) or (group == "zero-shot" and k.startswith("none")))}
        chosen[group] = max(cands, key=lambda k: cands[k]["validation_auroc"])
    out = {"n": {sel: len(f[sel]["texts"]) for sel in SELS}, "n_train": len(tr["y"]), "head_fit_seconds": fit_s,
           "oos_validation_halves": {"seed": 0, "fit_none_option": len(fit_half), "choose": len(pick_half)},
           "selection_note": "validation AUROC: in-scope validation200 (used by every score's calibration) vs the "
                             "half of oos_validation no calibration saw",
           "head_test_accuracy_in_scope": head_acc, "scores": rows_out, "chosen_on_validation": chosen,
           "targets": {"zero-shot calibrated AUROC >= 0.80": rows_out[chosen["zero-shot"]]["test_auroc"],
                       "after fit on the full training split AUROC >= 0.90": rows_out[chosen["fitted head"]]["test_auroc"]}}
    Path(args.json).write_text(json.dumps(out, indent=1))
    print("| score | validation AUROC | test AUROC | OOS kept at 95% in-scope (test) | threshold from validation: in-scope kept, OOS kept (test) |")
    print("|---|---:|---:|---:|---|")
    for name, r in rows_out.items():
        if isinstance(r, str):
            print(f"| {name} | {r} | | | |")
            continue
        mark = " **(chosen)**" if name in chosen.values() else ""
        print(f"| {name}{mark} | {r['validation_auroc']:.3f} | {r['test_auroc']:.3f} | {100 * r['test_oos_kept_at_95']:.1f}% | "
              f"{100 * r['test_in_scope_kept_at_val_threshold']:.1f}%, {100 * r['test_oos_kept_at_val_threshold']:.1f}% |")
    for k, v in out["targets"].items():
        print(f"target {k}: {v:.3f} -> {'met' if v >= float(k.split('>=')[1]) else 'NOT met'}")


def main(argv=None) -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--data-dir", default=DATA)
    p.add_argument("--surfaces", default=" none of these, other, out of scope")
    sub = p.add_subparsers(dest="command", required=True)
    sub.add_parser("none", help="cache the none-of-these option's exact scores").set_defaults(func=none_scores)
    r = sub.add_parser("report", help="AUROC and OOS kept at 95%% in-scope coverage")
    r.add_argument("--json", default=str(HERE / "results" / "fit_oos.json"))
    r.set_defaults(func=report)
    args = p.parse_args(argv)
    args.func(args)


if __name__ == "__main__":
    main()
