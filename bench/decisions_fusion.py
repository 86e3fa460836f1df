"""Decisions with the zero-shot fusion: the Decider's option scores beside the embedder's state-option similarity.

Validation only (sys1bench seed 7001, the items of ``decisions_quality.py run --split validation``,
canonical framing and option order). For every question of every item:

* ``lm``: what the package-default `judge.decisions.Decider` computes before it answers, uncalibrated
  (`judge.decisions.Decider.log_probs`: each option's exact log-probability, its content-free prior
  divided out; the served answer is its argmax), read from the cache that run filled
  (``bench._decisions_data.CachedScorer``, offline: nothing is scored here);
* ``similarity``: the packaged all-MiniLM-L6-v2's cosine similarity (`judge.encoders.SentenceEncoder`)
  between the state's text and each option's text. The state's text (``--texts``): ``question+state``
  (the question's instructions, a newline, `judge.decisions.state_text`: what the model reads, less the
  prompt's template) or ``state`` alone. An option's text: a choice option's ``name: description``
  (`judge.fusion.label_texts`), a score level's description, a yes/no option's ``Yes. <instructions>``
  / ``No. <instructions>`` (the wire form gives yes/no no option text: these measure whether the
  embedder has anything to say there);
* fused: `judge.fusion.Fusion` ``(weight, temperature).combine(lm, similarity)``, weight 0 being the LM
  alone (today's answers), 1 the embedder alone; the answer is the argmax.

Per question (generator.key, 15 of them): accuracy, the majority baseline (gold's top share) and the
answer's top share; per question type and overall, the median and mean of accuracy minus majority (the
issue's figure; today's on test is -14.8 points).

Choosing the weight honestly: **leave one generator out**. For each of the five generators, per
question type, the weight (temperature 0.02, ``question+state`` texts) with the highest mean accuracy
minus majority over the *other four* generators' questions of that type (ties: the smaller weight) answers
that generator's question; the median over the 15 held-out questions is the fused figure. Fixed
weights over all generators (each one's figure read with hindsight) are printed beside it, as is a
leave-one-out choice of one weight for every type and one over the whole grid (texts x temperature x
weight).

    P="/work/main/.venv/bin/python -m bench"     # OMP_NUM_THREADS=1, sys1bench importable
    $P.decisions_quality run --split validation --n 24 --variant default   # fills bench/cache/decisions
    $P.decisions_fusion --n 24 --json bench/results/decisions_fusion_validation.json

What it deliberately does not do: read test (it has no option for it), score anything with the
LM (a query not in the cache is an error), calibrate, or change how the Decider answers.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections import Counter, defaultdict
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
DEFAULT_CACHE = HERE / "cache" / "decisions"
TEXTS = ("question+state", "state")
TEMPERATURES = (0.02, 0.05, 0.1)
PRIMARY = ("question+state", 0.02)     # the texts and temperature the leave-one-out weight is chosen at
TYPES = ("choice", "noul", "score")


def _text(value) -> str:
    from judge.decisions import state_text

    return "" if value is None else state_text(value)


def state_side(state, q, texts: str) -> str:
    """The text the embedder reads for the state (see the module docstring)."""
    s = _text(state)
    return s if texts == "state" else f"{_text(q.instructions)}\n{s}".strip()


def option_side(q) -> list[str]:
    """The text the embedder reads for each option, in the question's option order."""
    from judge.fusion import label_texts

    if q.type == "choice":
        names = list(q.names)
        return label_texts(names, descriptions={n: _text(d) or None for n, d in q.options.items()})
    if q.type == "score":
        return [_text(d) for d in q.levels]
    instr = _text(q.instructions)
    yes = _text(q.true) if q.true is not None else f"Yes. {instr}"
    no = _text(q.false) if q.false is not None else f"No. {instr}"
    return [yes, no]


def collect(args) -> list[dict]:
    """One row per (item, question): lm scores, similarities per texts variant, gold, names."""
    import torch

    torch.set_num_threads(args.threads)
    from bench._common import load_bench_model
    from bench._decisions_data import (
        GENERATORS,
        VALIDATION_SEED,
        CachedScorer,
        judge_questions,
        task_items,
        truth_index,
    )
    from judge.decisions import Decider
    from judge.encoders import SentenceEncoder
    from judge.engine import Engine

    t0 = time.time()
    items = task_items(GENERATORS, args.n, VALIDATION_SEED)
    model, tok = load_bench_model(None, device="cpu")
    scorer = CachedScorer(Engine(model, tok), Path(args.cache) / "scores.sqlite", "smollm2", offline=True)
    decider = Decider(scorer=scorer)          # the package default: its styles, bias "contextual", no profile
    rows = []
    for i, it in enumerate(items):
        qs = judge_questions(it)
        lp = decider.log_probs([(it.state, qs)])[0]
        for k, q in qs.items():
            sq = it.questions[k]
            rows.append({"generator": it.metadata["generator"], "domain": sq_domain(it), "key": k, "type": q.type,
                         "task_id": it.task_id, "lm": np.asarray(lp[k], np.float64), "gold": truth_index(sq),
                         "keys": option_keys(q),
                         "state": {t: state_side(it.state, q, t) for t in TEXTS}, "options": option_side(q)})
        if i % 20 == 0:
            print(f"  lm scores: {i + 1}/{len(items)} items ({time.time() - t0:.0f} s)", file=sys.stderr, flush=True)
    enc = SentenceEncoder()
    texts = sorted({t for r in rows for t in (*r["state"].values(), *r["options"])})
    vec = dict(zip(texts, np.asarray(enc(texts), np.float64)))
    for r in rows:
        opts = np.stack([vec[t] for t in r["options"]])
        r["sim"] = {t: opts @ vec[r["state"][t]] for t in TEXTS}
    print(f"  embedded {len(texts)} texts ({time.time() - t0:.0f} s)", file=sys.stderr, flush=True)
    return rows


def option_keys(q) -> list[str]:
    """Each option's key, in the question's order: a choice's name, ``true``/``false``, a level's index."""
    if q.type == "choice":
        return list(q.names)
    return ["true", "false"] if q.type == "noul" else [str(i) for i in range(q.n_levels)]


def sq_domain(it) -> str:
    return getattr(it, "domain", None) or it.metadata["generator"]


def settings() -> list[tuple]:
    """(texts, temperature, weight): every point of the grid (weight 0 is the LM alone at any of them)."""
    from judge.fusion import FUSION_WEIGHTS

    return [(t, tau, float(w)) for t in TEXTS for tau in TEMPERATURES for w in FUSION_WEIGHTS]


def evaluate(rows, setting) -> dict:
    """{question: {accuracy, majority, top_share, type, generator, n}} under one (texts, tau, weight)."""
    from judge.fusion import Fusion

    texts, tau, w = setting
    by_q = defaultdict(list)
    for r in rows:
        by_q[f"{r['domain']}.{r['key']}"].append(r)
    out = {}
    for name, rs in sorted(by_q.items()):
        # one row at a time: an item's options may differ in number and order (policy_compliance's clauses)
        pred = [r["keys"][int(Fusion(w, tau).combine(r["lm"][None], r["sim"][texts][None])[0].argmax())] for r in rs]
        gold = [r["keys"][r["gold"]] for r in rs]
        out[name] = {"type": rs[0]["type"], "generator": rs[0]["generator"], "n": len(rs),
                     "accuracy": float(np.mean([a == b for a, b in zip(pred, gold)])),
                     "majority": Counter(gold).most_common(1)[0][1] / len(rs),
                     "top_share": Counter(pred).most_common(1)[0][1] / len(rs),
                     "correct": [a == b for a, b in zip(pred, gold)]}
    return out


def gains(per: dict, keys=None) -> np.ndarray:
    return np.array([per[k]["accuracy"] - per[k]["majority"] for k in (keys if keys is not None else per)])


def summary(per: dict) -> dict:
    """Median and mean accuracy minus majority, mean accuracy: per type and overall."""
    out = {}
    for t in (*TYPES, "all"):
        keys = [k for k, v in per.items() if t == "all" or v["type"] == t]
        g = gains(per, keys)
        out[t] = {"median_acc_minus_majority": float(np.median(g)), "mean_acc_minus_majority": float(np.mean(g)),
                  "mean_accuracy": float(np.mean([per[k]["accuracy"] for k in keys])), "n_questions": len(keys)}
    return out


def leave_one_out(table: dict, candidates: list, *, per_type: bool = True) -> tuple[dict, dict]:
    """Per held-out generator (and type), the candidate with the best mean accuracy - majority on the others.

    ``table``: {setting: evaluate(...)}; ``candidates``: settings in order of preference (ties: the first).
    Returns the held-out questions' figures under their chosen settings, and the choices.
    """
    any_per = next(iter(table.values()))
    gens = sorted({v["generator"] for v in any_per.values()})
    held, chosen = {}, {}
    for g in gens:
        for t in (TYPES if per_type else ("all",)):
            def of_type(k, t=t):
                return t == "all" or any_per[k]["type"] == t
            train = [k for k in any_per if any_per[k]["generator"] != g and of_type(k)]
            test = [k for k in any_per if any_per[k]["generator"] == g and of_type(k)]
            if not test:
                continue
            score = [round(float(np.mean(gains(table[c], train))), 10) for c in candidates]
            best = candidates[int(np.argmax(score))]
            chosen[f"{g}/{t}"] = {"texts": best[0], "temperature": best[1], "weight": best[2],
                                  "train_mean_acc_minus_majority": max(score)}
            for k in test:
                held[k] = {**table[best][k], "setting": list(best)}
    return held, chosen


def flips(base: dict, other: dict) -> dict:
    """Per type and overall, items answered right by ``other`` and wrong by ``base`` ("gained"), and the reverse."""
    out = {}
    for t in (*TYPES, "all"):
        pairs = [(a, b) for k, v in base.items() if t == "all" or v["type"] == t
                 for a, b in zip(v["correct"], other[k]["correct"])]
        out[t] = {"gained": sum(b and not a for a, b in pairs), "lost": sum(a and not b for a, b in pairs),
                  "items": len(pairs)}
    return out


def _strip(per: dict) -> dict:
    return {k: {f: x for f, x in v.items() if f != "correct"} for k, v in per.items()}


def server_check(rows, cache) -> dict:
    """Whether weight 0 answers as the server did in the run (its sys1bench prediction rows), item by item."""
    path = Path(cache) / "preds" / "after__default__validation.jsonl"
    if not path.exists():
        return {"checked": False, "why": f"no {path}"}
    from sys1bench.runners.benchmark_runner import load_predictions

    served = {(r.task_id, r.question_key): bool(r.correct) for r in load_predictions(path)
              if r.framing_id == "f0" and r.permutation_id == "p0"}
    ours = {(r["task_id"], r["key"]): bool(np.argmax(r["lm"]) == r["gold"]) for r in rows}
    common = set(served) & set(ours)
    return {"checked": True, "rows_compared": len(common), "rows_ours": len(ours),
            "same_correctness": sum(served[k] == ours[k] for k in common)}


def _fmt(x) -> str:
    return f"{x * 100:+6.1f}"


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--n", type=int, default=24, help="items per generator (as scored by decisions_quality run)")
    p.add_argument("--cache", default=str(DEFAULT_CACHE))
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--json", default=str(HERE / "results" / "decisions_fusion_validation.json"))
    args = p.parse_args(argv)

    from judge.fusion import DEFAULT_FUSION, FUSION_WEIGHTS

    rows = collect(args)
    grid = settings()
    table = {s: evaluate(rows, s) for s in grid}
    lm_alone = table[(PRIMARY[0], PRIMARY[1], 0.0)]
    default = table[(PRIMARY[0], DEFAULT_FUSION.temperature, DEFAULT_FUSION.weight)]
    primary = [s for s in grid if s[:2] == PRIMARY]       # weights ascending: ties go to the LM's side
    loo, loo_choice = leave_one_out(table, primary)
    loo_global, loo_global_choice = leave_one_out(table, primary, per_type=False)
    full = sorted(grid, key=lambda s: (s[2], TEXTS.index(s[0]), s[1]))
    loo_full, loo_full_choice = leave_one_out(table, full)
    fixed = {f"{t}|tau={tau}|w={w}": summary(table[(t, tau, w)]) for t, tau, w in grid}

    arms = {"LM alone (today)": lm_alone, f"default fusion w={DEFAULT_FUSION.weight} tau={DEFAULT_FUSION.temperature}":
            default, "embedder alone (w=1, tau 0.02)": table[(PRIMARY[0], PRIMARY[1], 1.0)],
            "leave-one-generator-out, per type": loo, "leave-one-generator-out, one weight": loo_global,
            "leave-one-generator-out, whole grid": loo_full}
    print(f"\nvalidation seed 7001, {args.n} items per generator, {len(lm_alone)} questions; accuracy minus majority, "
          f"points (median / mean over questions), mean accuracy %")
    print(f"{'arm':44s} " + " ".join(f"{t:>22s}" for t in (*TYPES, "all")))
    for name, per in arms.items():
        s = summary(per)
        print(f"{name:44s} " + " ".join(
            f"{_fmt(s[t]['median_acc_minus_majority'])}/{_fmt(s[t]['mean_acc_minus_majority'])} "
            f"{s[t]['mean_accuracy'] * 100:4.0f}%" for t in (*TYPES, "all")))
    print("\nfixed weights, question+state texts, tau 0.02 (hindsight: chosen on the same items):")
    for w in FUSION_WEIGHTS:
        s = summary(table[(PRIMARY[0], PRIMARY[1], float(w))])
        print(f"  w={w:.1f} " + " ".join(f"{t}: {_fmt(s[t]['median_acc_minus_majority'])}/"
                                         f"{_fmt(s[t]['mean_acc_minus_majority'])}" for t in (*TYPES, "all")))
    print(f"\n{'question':36s} {'type':6s} {'maj%':>5s} {'LM acc%':>8s} {'LOO acc%':>9s} {'LOO w':>6s} "
          f"{'LM top%':>8s} {'LOO top%':>9s}")
    for k, v in lm_alone.items():
        h = loo[k]
        print(f"{k:36s} {v['type']:6s} {v['majority'] * 100:5.0f} {v['accuracy'] * 100:8.0f} "
              f"{h['accuracy'] * 100:9.0f} {h['setting'][2]:6.1f} {v['top_share'] * 100:8.0f} {h['top_share'] * 100:9.0f}")
    moved = {name: flips(lm_alone, per) for name, per in arms.items() if per is not lm_alone}
    print("\nitems moved against the LM alone (gained right / lost), leave-one-generator-out per type: " +
          "  ".join(f"{t} +{m['gained']}/-{m['lost']} of {m['items']}"
                    for t, m in moved["leave-one-generator-out, per type"].items()))
    check = server_check(rows, args.cache)
    print("\nweight 0 vs the server's answers in the run:", json.dumps(check))
    out = {"what": __doc__.split("\n")[0], "split": "validation", "seed": 7001, "n_per_generator": args.n,
           "lm": "Decider() package default, log_probs (content-free prior divided out), uncalibrated",
           "embedder": "all-MiniLM-L6-v2 (judge.encoders.SentenceEncoder())",
           "loo_rule": "per held-out generator and question type: the weight (question+state texts, tau 0.02) with the "
                       "highest mean accuracy - majority over the other four generators' questions of that type; "
                       "ties to the smaller weight",
           "today_test_median_acc_minus_majority": -0.148,
           "summary": {name: summary(per) for name, per in arms.items()},
           "per_question": {name: _strip(per) for name, per in arms.items()}, "items_moved_vs_lm_alone": moved,
           "loo_choices": {"per type": loo_choice, "one weight": loo_global_choice, "whole grid": loo_full_choice},
           "fixed_settings": fixed, "server_check": check}
    Path(args.json).parent.mkdir(parents=True, exist_ok=True)
    Path(args.json).write_text(json.dumps(out, indent=1))
    print(f"wrote {args.json}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
