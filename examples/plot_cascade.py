"""
A cascade: accuracy against cost
================================

``Cascade(first, fallback)`` answers with ``first`` where it is confident and sends the other
texts to ``fallback``, a second classifier over the same labels. How many texts to route is a
trade: each routed text costs the fallback's time, and gains only where the fallback is right
and ``first`` was wrong. ``Cascade.curve(texts, y)`` measures that trade on labelled texts:
both models run once on every text, and for each routed fraction (the least confident texts of
``first`` routed first) it reports accuracy and seconds::

    from judge import Cascade, Classifier

    small = Classifier(labels).calibrate(val_texts, val_labels, target_accuracy=0.7)
    large = Classifier(labels, model="gemma3-270m")       # the second packaged model
    for point in Cascade(small, large).curve(test_texts, test_labels):
        print(point["routed"], point["accuracy"], point["seconds"])

Running two models over a hundred texts per dataset takes minutes, so this example draws the
curves the benchmark measured that way (``bench/results/accuracy.json``, its ``cascade``
block; SmolLM2-135M and Gemma-3-270M on the same test texts, both orders) and the real
``Cascade`` run that checked them (``bench/results/accuracy_cascade_check.json``); the commands
are on :doc:`../benchmarks/accuracy`. It runs in a second, without a language model.
"""

import json
from pathlib import Path

import matplotlib.pyplot as plt

# the benchmarks' results files, run from the repository root or from examples/ (as the docs build does)
RESULTS = next(p for p in (Path("bench/results"), Path("../bench/results")) if p.is_dir())
cascade = json.loads((RESULTS / "accuracy.json").read_text())["cascade"]
check = json.loads((RESULTS / "accuracy_cascade_check.json").read_text())

# %%
# The two models alone
# --------------------
# Accuracy on the same test texts and seconds per text, each model timed on the same 16 texts on
# a quiet machine (one CPU thread).

for dataset, block in cascade.items():
    small, large = block["smollm2"], block["gemma3"]
    print(f"{dataset:>9} (n={block['n']}): SmolLM2 {small['accuracy']:.1%} at {small['seconds_per_text']:.2f} s, "
          f"Gemma {large['accuracy']:.1%} at {large['seconds_per_text']:.2f} s per text")

# %%
# Accuracy against seconds per text
# ---------------------------------
# Each curve runs from 0% routed (the first model alone, its left end) to 100% routed (the
# fallback alone on every text, after the first model: its right end). The star is the threshold
# ``calibrate(target_accuracy=0.7)`` fitted on validation, applied to the test texts.

orders = {"smollm2->gemma3": ("C0", "SmolLM2 first, Gemma fallback"),
          "gemma3->smollm2": ("C1", "Gemma first, SmolLM2 fallback")}
fig, axes = plt.subplots(1, len(cascade), figsize=(3.3 * len(cascade), 3.6), sharey=False)
for ax, (dataset, block) in zip(axes, cascade.items()):
    for order, (colour, label) in orders.items():
        curve = block[order]["curve"]
        ax.plot([p["seconds_per_text"] for p in curve], [p["accuracy"] for p in curve], "o-",
                color=colour, markersize=3, label=label)
        at = next(p for p in block[order]["threshold_points"] if p["target"] == 0.7)
        ax.plot(at["seconds_per_text"], at["accuracy"], "*", color=colour, markersize=13,
                markeredgecolor="black")
    ax.set_title(f"{dataset} (n={block['n']})")
    ax.set_xlabel("seconds per text")
    ax.grid(alpha=0.3)
axes[0].set_ylabel("test accuracy")
axes[0].legend(loc="lower right", fontsize=7)
fig.tight_layout()
plt.show()

# %%
# The real run
# ------------
# The curves are computed from each model's cached answers; one real ``Cascade.predict`` on 40
# MASSIVE test texts checked that they match.

stats = check["route_stats"]
print(f"Cascade on {check['n']} {check['dataset']} texts at threshold {check['threshold']:.3f}: "
      f"routed {stats['fallback_fraction']:.0%}, accuracy {check['accuracy']:.1%}, "
      f"answers equal to the cached computation on {check['agreement_with_cached']:.0%} of the texts, "
      f"{check['seconds']:.1f} s ({stats['seconds_first']:.1f} s first, {stats['seconds_fallback']:.1f} s fallback)")

# %%
# What it shows
# -------------
# A cascade pays only when the fallback is the better model where the first one is unsure. On
# MASSIVE, Gemma-3-270M is the stronger model (51.0% against 45.5%): routing SmolLM2's least
# confident 40% to it gives 54.0%, above either model alone, at 0.26 s per text against Gemma's
# 0.29; the threshold fitted on validation routed 59.5% (53.5%, 0.32 s per text). On Banking77, CLINC150 and TREC Gemma is the weaker model, and routing to it costs time
# and accuracy; the reverse order (Gemma first) does not help either, since Gemma is also the
# slower of the two. Each curve holds 100 to 200 texts, so differences of a few points are noise
# (about +-10 points at 95%).
