"""
Your own labels: zero-shot, calibrated, abstaining
==================================================

All it takes is a CSV of your own texts and labels. ``docs/tickets.csv`` holds 30 support
tickets, 10 each of ``billing``, ``technical`` and ``sales``. This example

1. classifies them zero-shot with the packaged model (no labelled example used),
2. calibrates on half of them: a label bias, a temperature, and an abstention threshold that
   keeps about 80% of the answers (``coverage=0.8``),
3. answers the other half, abstaining where the classifier is not confident enough,

and then swaps the halves. Every ticket so gets a calibrated probability from a calibration that
never saw it (2-fold cross-fitting), and the reliability diagram and the risk-coverage curve
below compare zero-shot and calibrated on all 30.

Run time: about a minute on 2 CPU cores. Most of it is loading the packaged model
(SmolLM2-135M-Instruct beside the MiniLM sentence embedder) and scoring the tickets four times.
The guide :doc:`Your own labels <../your_own_labels>` walks through the same steps with each
parameter explained.
"""

import csv
import warnings
from pathlib import Path

import matplotlib.pyplot as plt
import numpy as np

from judge import Classifier
from judge.calibration import ReliabilityDiagram, RiskCoverageDisplay

# the tickets, run from the repository root or from examples/ (as the docs build does)
TICKETS = next(p for p in (Path("docs/tickets.csv"), Path("../docs/tickets.csv")) if p.is_file())
with TICKETS.open(newline="") as f:
    rows = list(csv.DictReader(f))  # columns: text, label
texts = [row["text"] for row in rows]
y = np.array([row["label"] for row in rows], dtype=object)
labels = list(dict.fromkeys(y))  # in the file's order: billing, technical, sales
print(f"{len(texts)} tickets; {', '.join(f'{(y == lab).sum()} {lab}' for lab in labels)}")

# %%
# Zero-shot
# ---------
# ``Classifier(labels)`` needs no example: the model scores each label's name as the answer to
# each ticket. ``predict_proba`` gives one row per ticket, its columns in ``clf.classes_`` order.

clf = Classifier(labels)  # the packaged model, offline; loaded on first use
zero_shot = clf.predict_proba(texts)
print(f"zero-shot accuracy: {np.mean(clf.classes_[zero_shot.argmax(axis=1)] == y):.1%}")

# %%
# Calibrate on one half, answer the other
# ---------------------------------------
# ``calibrate`` fits what zero-shot cannot know: how much the model prefers some labels whatever
# the ticket (a bias per label), how far to trust its scores (a temperature), and the weight of
# the sentence embedder beside the language model. ``coverage=0.8`` also sets ``threshold_``,
# the confidence under which ``predict(abstain=True)`` answers None, so that about 80% of the
# calibration texts are answered.
#
# ``predict_records`` gives one record per text: the answer (None when abstained), its
# confidence and the probability of every label.
#
# Fifteen calibration texts are few, and ``calibrate`` says so in a warning (at least 20, or 2
# per label, it asks); the first sentence of it is printed below.

halves = [np.arange(len(texts)) % 2 == 0, np.arange(len(texts)) % 2 == 1]
calibrated = np.zeros_like(zero_shot)
answered = np.zeros(len(texts), dtype=bool)
for fold, fit_rows in enumerate(halves, start=1):
    held = np.flatnonzero(~fit_rows)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        clf.calibrate([t for t, keep in zip(texts, fit_rows) if keep], y[fit_rows], coverage=0.8)
    records = clf.predict_records([texts[i] for i in held], abstain=True)
    calibrated[held] = [[r["probabilities"][lab] for lab in clf.classes_] for r in records]
    answered[held] = [not r["abstained"] for r in records]
    print(f"fold {fold}: temperature {clf.temperature_:.2f}, threshold {clf.threshold_:.2f}, "
          f"embedder weight {clf.fusion_.weight:.1f}")
    if fold == 1:
        print("  warning:", str(caught[0].message).split(". ")[0] + ".")
        for i, r in zip(held[5:10], records[5:10]):  # the technical tickets of this half
            print(f"  {texts[i][:38]:<38} -> {str(r['label']):<9} "
                  f"confidence {r['confidence']:.2f} (truth: {y[i]})")

# %%
# Accuracy before and after
# -------------------------
# Each ticket's calibrated probability comes from the fold that did not calibrate on it.

right = clf.classes_[calibrated.argmax(axis=1)] == y
print(f"calibrated accuracy (cross-fitted): {right.mean():.1%}")
print(f"abstain=True answered {answered.mean():.0%} of the tickets, "
      f"{right[answered].mean():.1%} of those correctly")

# %%
# Reliability and risk against coverage
# -------------------------------------
# Left: per bin of confidence, how often the top label was right; a calibrated classifier sits
# on the diagonal. Right: the error rate of the answers kept when abstaining on the least
# confident tickets first; the star is where ``predict(abstain=True)`` stood.

y_index = np.array([list(clf.classes_).index(label) for label in y])
fig, (rel_ax, risk_ax) = plt.subplots(1, 2, figsize=(10, 4))
ReliabilityDiagram.from_predictions(y_index, zero_shot, n_bins=5).plot(ax=rel_ax, name="zero-shot")
ReliabilityDiagram.from_predictions(y_index, calibrated, n_bins=5).plot(ax=rel_ax, name="calibrated")
rel_ax.set_title("reliability, 30 tickets (5 bins)")
RiskCoverageDisplay.from_predictions(y_index, zero_shot).plot(ax=risk_ax, name="zero-shot")
RiskCoverageDisplay.from_predictions(y_index, calibrated).plot(ax=risk_ax, name="calibrated")
risk_ax.plot(answered.mean(), 1 - right[answered].mean(), "k*", markersize=12,
             label="abstain=True")
risk_ax.legend(loc="upper left")
risk_ax.set_title("risk against coverage")
fig.tight_layout()
plt.show()

# %%
# What it shows
# -------------
# Zero-shot, the small model gets 57% of the tickets right: it reads most ``sales`` and several
# ``technical`` tickets as ``billing``, with confidences near 1. Fifteen labelled tickets are
# enough to fit the three label biases, the temperature and the embedder's weight: on the
# tickets each calibration never saw, accuracy rises to 83%, the calibration error (ECE) falls
# from 0.25 to 0.14 and the area under the risk-coverage curve halves (0.26 to 0.12).
#
# The threshold is the weak part at this size. Fitted to keep 80% of 15 texts, it answered 73%
# of the held-out tickets at 82%, no better than answering all of them; the curve shows that
# keeping the most confident half would have cut the error rate to about 7%. More calibration
# texts (``calibrate`` asks for at least 20) make the threshold land where it was aimed. With 30
# tickets each bin of the reliability diagram holds a handful of them: read its shape, not its
# decimals. Label descriptions help more than any of this here (93% zero-shot on these tickets,
# :doc:`../your_own_labels`).
