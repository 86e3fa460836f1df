"""The bias variants bench/decisions_quality.py's ``select`` compares, and how it scores a question under each.

`accuracies` takes one question's validation rows (raw log-probabilities, the content-free prior, gold,
the question's shape, the `NEUTRAL` prior) to accuracy and top share under every bias of `BIASES`
(``running@W``: a server's running prior, warm-up ``W``); `neutral_prior` scores a question's
`NEUTRAL` states once per shape (`bench._decisions_data.truth_index`: a question's gold option), `wire_of` its
wire form (`bench._decisions_data.wire`). `DEFAULT_BIAS` is the server's default, the one ``select``
chooses a style under.

What it deliberately does not do: choose (bench/decisions_quality.py ``select`` applies its rule) or
score anything but the `NEUTRAL` states.
"""

from __future__ import annotations

from collections import defaultdict

import numpy as np

__all__ = ["BIASES", "CONTENT_FREE_N", "DEFAULT_BIAS", "NEUTRAL", "WARM_UP", "accuracies", "neutral_prior",
           "wire_of"]

BIASES = ("none", "contextual", "neutral", "contextual+neutral", "batch", "running@4", "running@8")
WARM_UP = 8
DEFAULT_BIAS = "contextual"
CONTENT_FREE_N = ("N/A", "", "[MASK]")  # judge.decisions.CONTENT_FREE (imported lazily: --help stays fast)
#: Ordinary states that answer none of the questions: a candidate for a richer content-free set (bias "neutral").
NEUTRAL = ("Hello.", "Thanks, talk soon.", "See the attached file.", "The meeting is at 3 pm on Tuesday.",
           "Lorem ipsum dolor sit amet, consectetur adipiscing elit.", '{"id": 1042, "status": "ok"}',
           "It rained all day yesterday.", "Please find the details below.")


def neutral_prior(decider, q, memo: dict) -> np.ndarray:
    """log mean answer distribution of ``q`` over the NEUTRAL states (question order), scored once per shape."""
    from judge.calibration import contextual_bias
    from judge.engine import Query

    key = decider.plan("", q).shape
    if key not in memo:
        plans = [decider.plan(s, q) for s in NEUTRAL]
        scorer = decider.scorer_
        scorer.offline = False  # a few queries per question shape
        try:
            got = scorer.score([Query(p.pieces, p.surfaces) for p in plans])
        finally:
            scorer.offline = True
        memo[key] = contextual_bias(np.stack([p.per_option(s) for p, s in zip(plans, got)]))
    return memo[key]


def accuracies(rows) -> dict:
    """rows: [(raw log-probs (K,), content-free log prior (K,), gold, shape, neutral log prior (K,))] of one
    question -> accuracy and top share per bias.

    ``batch`` divides out the mean answer distribution over the rows of the same shape (the same
    option set; no labels; shapes seen fewer than WARM_UP times are left alone): what a running batch
    prior over this question's traffic converges to. ``running@W`` is that prior as a server would
    keep it (``Decider(bias="running", warm_up=W)``), in the rows' order: the mean over the earlier rows
    of the shape once there are W of them, the content-free prior before.
    """
    from judge.calibration import batch_bias

    groups = defaultdict(list)
    for r in rows:
        groups[r[3]].append(r[0])
    prior = {s: batch_bias(np.stack(zs)) for s, zs in groups.items() if len(zs) >= WARM_UP}

    y = np.array([r[2] for r in rows])
    out = {"n": len(rows), "majority": float(np.bincount(y).max() / len(y)),
           "gold": {str(k): int(v) for k, v in zip(*np.unique(y, return_counts=True))}}
    for b in BIASES:
        preds, seen = [], defaultdict(list)
        for z, cf, _, shape, neutral in rows:
            z = z - np.logaddexp.reduce(z)
            if b == "contextual":
                z = z - cf
            elif b == "neutral":
                z = z - neutral
            elif b == "contextual+neutral":
                k = len(CONTENT_FREE_N)
                z = z - np.logaddexp(cf + np.log(k), neutral + np.log(len(NEUTRAL))) + np.log(k + len(NEUTRAL))
            elif b == "batch" and shape in prior:
                z = z - prior[shape]
            elif b.startswith("running@"):
                earlier, w = seen[shape], int(b.split("@")[1])
                z0, z = z, z - (batch_bias(np.stack(earlier)) if len(earlier) >= w else cf)
                earlier.append(z0)
            preds.append(int(np.argmax(z)))
        preds = np.array(preds)
        out[b] = {"accuracy": float(np.mean(preds == y)), "top_share": float(np.bincount(preds).max() / len(preds))}
    return out


def wire_of(q) -> dict:
    from bench._decisions_data import wire

    return wire(q)


