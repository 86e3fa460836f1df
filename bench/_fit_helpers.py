"""Pure helpers of bench/learning_curve.py (and bench/oos.py): draws, post-fit calibrations, "not run" reasons, the table.

* `draws`: distinct ``n``-per-class draws of a pool (`bench._fit_cache.per_class`, one per seed);
* `calibrated`: the zero-shot walk's calibration (batch prior + fitted bias + T) fitted on validation
  scores and applied to test scores; `library` the library's own ``calibrate(bias=...)`` on scores;
  `POST_FIT` the post-fit calibrations ``select`` compares, each 2-fold cross-fitted by `cross_fit`;
* `missing`: ``None`` when every feature a method needs is cached, else ``"not run: <reason>"``
  naming the ``python -m bench.learning_curve cache`` command that would supply it;
* `table`: the markdown table of a report's JSON.

What it deliberately does not do: read the feature cache (bench/_fit_cache.py and
bench/learning_curve.py's ``load`` do) or fit a head.
"""

from __future__ import annotations

__all__ = ["POST_FIT", "calibrated", "cross_fit", "draws", "library", "missing", "table"]


def draws(y_pool, n, seeds):
    """Distinct n-per-class draws (index arrays into the pool) for the given seeds."""
    import numpy as np

    from bench._fit_cache import per_class

    seen, out = set(), []
    for s in seeds:
        d = per_class(y_pool, n, seed=s)
        if tuple(d) not in seen:
            seen.add(tuple(d))
            out.append(np.asarray(d))
    return out


def calibrated(val_scores, y_val, test_scores):
    """The default walk's calibration (batch prior + fitted bias + T), L2 by out-of-fold NLL on validation."""
    from judge.calibration.state import fit_resolved, resolve_bias

    cal = fit_resolved(tuple(range(val_scores.shape[1])), val_scores, y_val, resolve_bias("batch+fit", "exact", "cv"))
    return cal.transform(test_scores), cal.report["bias_l2"]


def missing(dkey, parts, kinds, sels, model_key="smollm2"):
    """None when every part has every feature kind cached, else ``"not run: <reason>"`` naming the cache command."""
    gaps = [(name, kind) for name, part in parts.items() for kind in kinds if kind not in part]
    if not gaps:
        return None
    by_sel: dict = {}
    for name, kind in gaps:
        by_sel.setdefault(sels[name], []).append(kind)
    what = ", ".join(f"{'+'.join(k)} of {sel}" for sel, k in by_sel.items())
    model = "" if model_key == "smollm2" else f" --model MODEL --model-key {model_key}"
    cmds = "; ".join(f"python -m bench.learning_curve cache --what {','.join(k)} --dkeys {dkey} --sels {sel}{model}"
                     for sel, k in by_sel.items())
    return f"not run: no complete cached {what} (run: {cmds})"


def cross_fit(s, y, how, seed=0):
    """Calibrated probabilities of every row, 2-fold cross-fitted: ``how(s_fit, y_fit, s_apply)`` fitted on one
    seeded half of the rows and applied to the other, both ways."""
    import numpy as np

    idx = np.random.default_rng(seed).permutation(len(y))
    halves = idx[: len(y) // 2], idx[len(y) // 2:]
    out = np.empty_like(s)
    for fit_rows, apply_rows in (halves, halves[::-1]):
        out[apply_rows] = how(s[fit_rows], y[fit_rows], s[apply_rows])
    return out


def library(bias, **kw):
    """``(s_fit, y_fit, s_apply) -> probabilities``: ``calibrate(bias=...)`` on scores, as the library resolves it."""
    from judge.calibration.state import fit_resolved, resolve_bias

    resolved = resolve_bias(bias, "exact", 1.0, **kw)
    return lambda s_fit, y_fit, s_apply: fit_resolved(tuple(range(s_fit.shape[1])), s_fit, y_fit,
                                                      resolved).transform(s_apply)


#: The post-fit calibrations ``select`` compares (validation, cross-fitted).
POST_FIT = {"batch prior + fitted bias + T": lambda a, b, c: calibrated(a, b, c)[0],
            "temperature only": library(None),  # no bias: the argmax kept
            "either, by out-of-fold NLL (bias='cv')": library("cv")}


def table(out) -> str:
    lines = ["| dataset | n/class | method | accuracy % [95% CI] | ECE / floor | fit s | predict texts/s |",
             "|---|---|---|---|---|---:|---:|"]
    for dkey, r in out["datasets"].items():
        for n, pt in r["points"].items():
            for m, v in pt.items():
                if isinstance(v, str):  # "not run: <reason>"
                    lines.append(f"| {dkey} | {n} | {m} | {v} | | | |")
                    continue
                lo, hi = v["accuracy_ci"]
                tps = "-" if v["predict_texts_per_s"] is None else f"{v['predict_texts_per_s']:.2f}"
                lines.append(f"| {dkey} | {n} | {m} | {100 * v['accuracy']:.1f} [{100 * lo:.1f}, {100 * hi:.1f}] | "
                             f"{v['ece']:.3f} / {v['ece_floor']:.3f} = {v['ece_over_floor']:.2f} | "
                             f"{v['fit_seconds']:.1f} | {tps} |")
    return "\n".join(lines)
