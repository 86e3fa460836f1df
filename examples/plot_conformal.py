"""
Conformal sets: set size against alpha
======================================

``predict`` gives one label; ``predict_set(texts, alpha=...)`` gives, per text, a set of labels
that holds the true one with probability at least ``1 - alpha``. The guarantee is split
conformal: it needs labelled calibration texts exchangeable with the ones asked about, and it
holds on average over draws of both, whatever the model. The price of a smaller ``alpha`` is
larger sets.

This example checks it on the 30 support tickets of ``docs/tickets.csv`` (3 labels): 40 random
halves, each calibrating on 15 tickets (5 per label) and asking about the other 15, for
``alpha`` from 0.05 to 0.5. It scores the tickets once and passes the scores to ``calibrate``
(``scores=``), so the 40 calibrations take seconds. Run time: about 40 s on 2 CPU cores, most
of it loading the packaged model.
"""

import csv
import warnings
from pathlib import Path

import matplotlib.pyplot as plt
import numpy as np

from judge import Classifier
from judge.calibration import ConformalPredictor

# the tickets, run from the repository root or from examples/ (as the docs build does)
TICKETS = next(p for p in (Path("docs/tickets.csv"), Path("../docs/tickets.csv")) if p.is_file())
with TICKETS.open(newline="") as f:
    rows = list(csv.DictReader(f))  # columns: text, label
texts = np.array([row["text"] for row in rows], dtype=object)
y = np.array([row["label"] for row in rows], dtype=object)
labels = list(dict.fromkeys(y))

# %%
# Score once, calibrate, ask for sets
# -----------------------------------
# ``decision_function`` gives the raw scores ``calibrate`` starts from. Given them
# (``scores=``), ``calibrate`` fits the label bias and temperature without scoring again; it
# keeps the default weight of the sentence embedder rather than refitting it (which needs the
# model). ``predict_set`` needs a calibration: its sets are built from the calibration texts'
# calibrated probabilities.

clf = Classifier(labels)
scores = clf.decision_function(list(texts))  # (30, 3), raw: no prior, no calibration
rng = np.random.default_rng(0)
y_index = np.array([labels.index(label) for label in y])


def random_half():
    """5 tickets of each label to calibrate on; the other 15 are asked about."""
    fit = np.zeros(len(texts), dtype=bool)
    for k in range(len(labels)):
        fit[rng.choice(np.flatnonzero(y_index == k), 5, replace=False)] = True
    return fit


fit = random_half()
with warnings.catch_warnings():
    warnings.simplefilter("ignore")  # "too few calibration texts": 15, where it asks for 20
    clf.calibrate(list(texts[fit]), y[fit], scores=scores[fit])
show = [i for k in range(len(labels)) for i in np.flatnonzero(~fit & (y_index == k))[:2]]  # 2 per label
asked = clf.predict_set(list(texts[show]), alpha=0.2)
for i, labels_in_set in zip(show, asked):
    print(f"{texts[i][:42]:<42} ({y[i]}) alpha=0.2: {labels_in_set}")

# %%
# The same sets from the calibrated probabilities
# -----------------------------------------------
# ``predict_set`` is :class:`~judge.calibration.ConformalPredictor` fitted on the calibration
# texts (``clf.calibration_.y``, ``clf.calibration_.proba``) and applied to the texts'
# calibrated probabilities, here computed from the scores already at hand
# (``scores_to_proba``), so that every ``alpha`` costs no model call.


def sets(alpha, proba):
    cal = clf.calibration_
    return ConformalPredictor(alpha=alpha, non_empty=True).fit(cal.y, cal.proba).predict_set(proba)


member = sets(0.2, clf.scores_to_proba(scores[show]))
assert [[labels[k] for k in np.flatnonzero(row)] for row in member] == asked

alphas = np.round(np.arange(0.05, 0.51, 0.05), 2)
size, coverage = np.zeros((40, len(alphas))), np.zeros((40, len(alphas)))
with warnings.catch_warnings():
    warnings.simplefilter("ignore")
    for draw in range(40):
        fit = random_half()
        clf.calibrate(list(texts[fit]), y[fit], scores=scores[fit])
        proba = clf.scores_to_proba(scores[~fit])
        for j, alpha in enumerate(alphas):
            member = sets(alpha, proba)
            size[draw, j] = member.sum(axis=1).mean()
            coverage[draw, j] = member[np.arange(len(proba)), y_index[~fit]].mean()
accuracy = np.mean(clf.classes_[proba.argmax(axis=1)] == y[~fit])
print("alpha     " + " ".join(f"{a:5.2f}" for a in alphas))
print("set size  " + " ".join(f"{s:5.2f}" for s in size.mean(axis=0)))
print("coverage  " + " ".join(f"{c:5.2f}" for c in coverage.mean(axis=0)))

# %%
# Set size and coverage against alpha
# -----------------------------------

fig, (size_ax, cov_ax) = plt.subplots(1, 2, figsize=(10, 3.8))
size_ax.plot(alphas, size.mean(axis=0), "o-")
size_ax.fill_between(alphas, *np.percentile(size, [10, 90], axis=0), alpha=0.2)
size_ax.set(xlabel="alpha", ylabel="labels per set (of 3)", title="mean set size", ylim=(0.9, 3.1))
cov_ax.plot(alphas, coverage.mean(axis=0), "o-", label="empirical coverage (mean of 40 halves)")
cov_ax.fill_between(alphas, *np.percentile(coverage, [10, 90], axis=0), alpha=0.2,
                    label="10th-90th percentile of the halves")
cov_ax.plot(alphas, 1 - alphas, "--", color="gray", label="1 - alpha (the guarantee)")
cov_ax.set(xlabel="alpha", ylabel="share of sets holding the truth", title="coverage", ylim=(0.4, 1.02))
cov_ax.legend(loc="lower left", fontsize=8)
for ax in (size_ax, cov_ax):
    ax.grid(alpha=0.3)
fig.tight_layout()
plt.show()

# %%
# What it shows
# -------------
# The mean coverage stays on or above the ``1 - alpha`` line, as the guarantee says; a single
# half can fall below it (the shaded band), because the guarantee is an average over draws.
# With 15 calibration texts, ``alpha = 0.05`` asks for a quantile beyond the largest of them
# (the ``(n + 1)(1 - alpha)``-th of 15), so every set holds all 3 labels. From ``alpha`` about
# 0.25 the sets are single labels and coverage levels off at the classifier's accuracy: sets
# always keep the top label (``non_empty``), so they cannot cover less than it gets right.
