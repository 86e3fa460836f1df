"""Label-bias variants on the scores `judge evaluate` saved (no model needed).

For each dataset run in results/NAME (scores_test.npy, scores_validation.npy,
classifier/calibration.safetensors), refit temperature after no bias,
contextual bias (the saved one) and batch bias on the validation scores, and
report test accuracy, ECE (equal-width and equal-mass) and NLL.

    python bench/calibration_variants.py --results results --data-dir ../shared/datasets --json bench/results/calibration_variants.json
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import numpy as np


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--results", default="results")
    p.add_argument("--data-dir", default=None)
    p.add_argument("--json", default=None)
    args = p.parse_args()
    from safetensors.numpy import load_file

    from judge import calibration as cal
    from judge import datasets as ds
    from judge.classifier import _softmax

    records = []
    print(f"{'dataset':<10} {'bias':<11} {'T':>7} {'acc':>6} {'ECE':>6} {'ECE(q)':>7} {'NLL':>6}")
    for run in sorted(Path(args.results).iterdir()):
        mfile = run / "metrics.json"
        if not (mfile.exists() and (run / "scores_validation.npy").exists()):
            continue
        m = json.loads(mfile.read_text())
        cal_cfg = json.loads((run / "classifier" / "classifier.json").read_text())
        test = ds.load(m["dataset"], split=m["split"], data_dir=args.data_dir, **m["options"])
        if m.get("sample"):
            test = test.sample(m["sample"]["limit"], seed=m["sample"]["seed"])
        val = ds.load(m["dataset"], split=m["calibration"]["split"], data_dir=args.data_dir, **m["options"])
        if m["calibration"]["n"] < len(val):
            val = val.sample(m["calibration"]["n"], seed=m["sample"]["seed"] if m.get("sample") else 0)
        pos = {lab: i for i, lab in enumerate(cal_cfg["labels"])}
        yt = np.array([pos[v] for v in test.labels])
        yv = np.array([pos[v] for v in val.labels])
        st = np.load(run / "scores_test.npy")
        sv = np.load(run / "scores_validation.npy")
        saved = load_file(str(run / "classifier" / "calibration.safetensors"))
        variants = {"none": np.zeros(st.shape[1]), "batch": cal.batch_bias(sv)}
        if "bias" in saved:
            variants["contextual"] = saved["bias"]
        for name, b in variants.items():
            T = cal.TemperatureScaler().fit(sv - b, yv).temperature_
            pt = _softmax((st - b) / T)
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
