"""Label-bias variants on the scores `judge evaluate` saved (no model needed).

For each dataset run in results/NAME (written by ``judge evaluate --calibrate-on
validation --out results/NAME``: the score checkpoints scores_test.npz and
scores_validation.npz, read with `judge.evaluation.read_checkpoint`, and the
saved classifier in classifier/, read with `judge.Classifier.load`), refit
temperature after no bias, contextual bias (the saved one) and batch bias on
the validation scores, and report test accuracy, ECE (equal-width and
equal-mass) and NLL.

    python -m bench.calibration_variants --results results --data-dir ../shared/datasets --json bench/results/calibration_variants.json

What it deliberately does not do: score anything (no model is loaded), or
choose a variant (``judge.calibration.AUTO_BIAS`` records the choice).
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import numpy as np


def main(argv=None) -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--results", default="results", help="folder of `judge evaluate --out` folders")
    p.add_argument("--data-dir", default=None)
    p.add_argument("--json", default=None)
    args = p.parse_args(argv)

    from judge import Classifier
    from judge import calibration as cal
    from judge import datasets as ds
    from judge.calibration import softmax
    from judge.evaluation import read_checkpoint

    records = []
    print(f"{'dataset':<10} {'bias':<11} {'T':>7} {'acc':>6} {'ECE':>6} {'ECE(q)':>7} {'NLL':>6}")
    for run in sorted(Path(args.results).iterdir()):
        mfile = run / "metrics.json"
        m = json.loads(mfile.read_text()) if mfile.exists() else {}
        if "calibration" not in m or not (run / f"scores_{m['calibration']['split']}.npz").exists():
            continue  # not a calibrated `judge evaluate` run
        saved = Classifier.load(run / "classifier")  # labels and the fitted bias; no model is loaded
        test = ds.load(m["dataset"], split=m["split"], data_dir=args.data_dir, **m["options"])
        if m.get("sample"):
            test = test.sample(m["sample"]["limit"], seed=m["sample"]["seed"])
        val = ds.load(m["dataset"], split=m["calibration"]["split"], data_dir=args.data_dir, **m["options"])
        if m["calibration"]["n"] < len(val):
            val = val.sample(m["calibration"]["n"], seed=m["sample"]["seed"] if m.get("sample") else 0)
        pos = {lab: i for i, lab in enumerate(saved.labels)}
        yt = np.array([pos[v] for v in test.labels])
        yv = np.array([pos[v] for v in val.labels])
        st = read_checkpoint(run / f"scores_{m['split']}.npz").scores
        sv = read_checkpoint(run / f"scores_{m['calibration']['split']}.npz").scores
        variants = {"none": np.zeros(st.shape[1]), "batch": cal.batch_bias(sv)}
        if saved.bias_ is not None:
            variants["contextual"] = saved.bias_
        for name, b in variants.items():
            T = cal.TemperatureScaler().fit(sv - b, yv).temperature_
            pt = softmax((st - b) / T)
            rec = {"dataset": m["dataset"], "bias": name, "temperature": float(T),
                   "accuracy": float((pt.argmax(1) == yt).mean()),
                   "ece": cal.expected_calibration_error(yt, pt),
                   "ece_quantile": cal.expected_calibration_error(yt, pt, strategy="quantile"),
                   "nll": cal.negative_log_likelihood(yt, pt)}
            records.append(rec)
            print(f"{rec['dataset']:<10} {name:<11} {T:7.2f} {rec['accuracy']:6.3f} {rec['ece']:6.3f} "
                  f"{rec['ece_quantile']:7.3f} {rec['nll']:6.3f}")
    if args.json:
        Path(args.json).write_text(json.dumps(records, indent=2))


if __name__ == "__main__":
    main()
