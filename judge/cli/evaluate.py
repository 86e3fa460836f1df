"""``judge evaluate``: a dataset end to end, and a summary table of what `judge.evaluation.evaluate` measured.

The work (scoring with a checkpoint, calibration, metrics, ``metrics.json``,
``predictions.csv``, plots) is `judge.evaluation.evaluate`; this module maps
the options onto it and prints the summary.

What it deliberately does not do: compute anything itself.
"""

from __future__ import annotations

import argparse

from judge.calibration.state import BIASES
from judge.cli._common import print_table

__all__ = ["add_parser", "run"]

BIAS_CHOICES = [b for b in BIASES if b is not None]  # calibrate()'s values, "none" for None


def add_parser(subparsers) -> argparse.ArgumentParser:
    """Add ``evaluate`` to the ``judge`` command's subparsers (sets ``func=run``).

    Examples
    --------
    >>> p = argparse.ArgumentParser(prog="judge")
    >>> _ = add_parser(p.add_subparsers(dest="command"))
    >>> a = p.parse_args(["evaluate", "trec", "--limit", "12", "--out", "ev"])
    >>> a.dataset, a.limit, a.split, a.bias
    ('trec', 12, 'test', 'auto')
    """
    ev = subparsers.add_parser("evaluate", help="evaluate on a dataset; writes metrics.json, predictions.csv, plots")
    ev.add_argument("dataset", help="banking77, clinc150, trec or massive")
    ev.add_argument("--model", default=None, help="hub id, local folder or packaged alias (default: smollm2-135m-instruct)")
    ev.add_argument("--data-dir", default=None, help="folder with the datasets (default $JUDGE_DATA_DIR, else the hub)")
    ev.add_argument("--split", default="test", help="split to evaluate on (default test)")
    ev.add_argument("--limit", type=int, default=None, help="seeded stratified sample of N texts")
    ev.add_argument("--seed", type=int, default=0, help="seed of the --limit samples and the fit draw (default 0)")
    ev.add_argument("--calibrate-on", default=None, help="split to calibrate on, e.g. validation")
    ev.add_argument("--calibration-limit", type=int, default=None, help="seeded stratified sample of the calibration split")
    ev.add_argument("--bias", default="auto", choices=BIAS_CHOICES,
                    help="label-bias correction fitted on the calibration split (auto: chosen on validation; "
                         "cv: batch+fit or none, by out-of-fold NLL)")
    ev.add_argument("--bias-l2", type=lambda v: v if v == "cv" else float(v), default=1.0,
                    help="shrinkage of a fitted ('+fit') bias, or cv: chosen by out-of-fold NLL")
    ev.add_argument("--rotations", type=int, default=1,
                    help="average over this many rotations of the label list (R times the cost)")
    ev.add_argument("--target-accuracy", type=float, default=None,
                    help="with --calibrate-on: an abstention threshold certifying this accuracy")
    ev.add_argument("--baseline", choices=["generate"], default=None,
                    help="also run free generation (greedy, then matched to a label) as a baseline")
    ev.add_argument("--method", default="auto", choices=["auto", "first_token", "exact", "search", "decode"],
                    help="how labels are scored (default auto; search: the certified best-first search)")
    ev.add_argument("--label-names", default="dataset", choices=["dataset", "natural", "raw"],
                    help="what the model writes: the dataset's readable names (TREC), natural (a_b -> a b) or raw")
    ev.add_argument("--batch-size", type=int, default=8, help="texts per forward pass (default 8)")
    ev.add_argument("--include-oos", action="store_true", help="CLINC150: add the out-of-scope class")
    ev.add_argument("--granularity", choices=["coarse", "fine"], default=None, help="TREC label granularity")
    ev.add_argument("--fit-on", default=None, help="split to fit on first (Classifier.fit), e.g. train")
    ev.add_argument("--per-class", type=int, default=None, help="fit on a seeded draw of N texts per class")
    ev.add_argument("--fit-method", default="head", choices=["head", "lora", "demos"],
                    help="with --fit-on: what to fit (default head)")
    ev.add_argument("--out", required=True, help="output directory")
    ev.set_defaults(func=run)
    return ev


def run(args) -> int:
    """Run ``judge evaluate`` (see `add_parser`): evaluate, then print the summary; returns 0.

    Examples
    --------
    Four TREC test texts on the packaged model (run from the repository root, beside the
    project's shared folder):

    >>> import tempfile
    >>> from judge.cli import main
    >>> main(["evaluate", "trec", "--data-dir", "../shared/datasets", "--limit", "4",
    ...       "--out", tempfile.mkdtemp()])  # doctest: +ELLIPSIS
    <BLANKLINE>
    judge evaluate
    ...
    0
    """
    from judge.evaluation import evaluate

    metrics = evaluate(
        args.dataset, args.out, model=args.model, split=args.split, data_dir=args.data_dir, limit=args.limit,
        seed=args.seed, calibrate_on=args.calibrate_on, calibration_limit=args.calibration_limit,
        bias=None if args.bias == "none" else args.bias, bias_l2=args.bias_l2, rotations=args.rotations,
        target_accuracy=args.target_accuracy, baseline=args.baseline, method=args.method,
        label_names=args.label_names, batch_size=args.batch_size, include_oos=args.include_oos,
        granularity=args.granularity, fit_on=args.fit_on, per_class=args.per_class, fit_method=args.fit_method)
    print_summary(metrics)
    return 0


def print_summary(m: dict) -> None:
    """Print the ``judge evaluate`` table of a metrics dict of `judge.evaluation.evaluate`.

    Examples
    --------
    >>> block = {"accuracy_ci": (0.5, 0.9), "majority": {"accuracy": 0.25}, "uniform": 0.2, "ece": 0.1}
    >>> print_summary({"dataset": "trec", "split": "test", "n": 12, "n_labels": 6, "method": "exact",
    ...                "texts_per_s": 3.0, "validity": 1.0, "accuracy": 0.75, "macro_f1": 0.7,
    ...                "uncalibrated": block})   # doctest: +NORMALIZE_WHITESPACE
    <BLANKLINE>
    judge evaluate
    -------------------------------------------------
    dataset                        trec / test (n=12, K=6)
    method                         exact
    texts/s                        3.00
    validity (constrained)         100.0%
    accuracy                       75.0% (95% CI 50.0%-90.0%)
    macro-F1                       0.700
    baselines: majority / uniform  25.0% / 20.0%
    ECE uncalibrated               0.100
    """
    best = m.get("calibrated", m["uncalibrated"])
    lo, hi = best["accuracy_ci"]
    rows = [("dataset", f"{m['dataset']} / {m['split']} (n={m['n']}, K={m['n_labels']})"),
            ("method", m["method"]), ("texts/s", f"{m['texts_per_s']:.2f}"),
            *([("fit", f"{m['fit']['method']} on {m['fit']['split']}: {m['fit']['n']} texts "
                       f"({m['fit']['per_class'] or 'all'} per class), {m['fit']['seconds']:.1f} s")]
              if m.get("fit") else []),
            ("validity (constrained)", f"{m['validity']:.1%}"),
            ("accuracy", f"{m['accuracy']:.1%} (95% CI {lo:.1%}-{hi:.1%})"), ("macro-F1", f"{m['macro_f1']:.3f}"),
            ("baselines: majority / uniform", f"{best['majority']['accuracy']:.1%} / {best['uniform']:.1%}"),
            ("ECE uncalibrated", f"{m['uncalibrated']['ece']:.3f}")]
    if "calibrated" in m:
        c = m["calibrated"]
        rows += [("ECE calibrated", f"{c['ece']:.3f} (CI {c['ece_ci'][0]:.3f}-{c['ece_ci'][1]:.3f}; noise floor "
                                    f"{c['ece_floor']:.3f}, ratio {c['ece_over_floor']:.2f})"),
                 ("sel. acc @50% cov.", f"{c['selective_accuracy_at_50']:.1%}")]
        for t, cov in c["coverage_at_accuracy"].items():
            rows.append((f"coverage at accuracy >= {t} (measured)", f"{cov:.1%}"))
    if "abstention" in m:
        a = m["abstention"]
        sa = "n/a" if a["selective_accuracy"] is None else f"{a['selective_accuracy']:.1%}"
        rows += [(f"threshold from {m['calibration']['split']} for {a['target_accuracy']}",
                  f"{a['threshold']:.3f}: answers {a['coverage']:.1%} (accuracy on them {sa}), abstains on the rest")]
    if "baseline_generate" in m:
        b = m["baseline_generate"]
        rows += [("generate: validity", f"{b['validity']:.1%} (lenient {b['lenient_validity']:.1%})"),
                 ("generate: accuracy", f"{b['accuracy']:.1%} (lenient {b['lenient_accuracy']:.1%})")]
    print_table(rows, "judge evaluate")
