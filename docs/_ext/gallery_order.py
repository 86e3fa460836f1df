"""The order of the examples gallery: a story from one's own labels to the benchmarks' figures.

sphinx-gallery sorts the examples of a folder with a key class (``within_subsection_order`` in
docs/conf.py names this one); an example not listed here comes after the listed ones, by name.
"""

from __future__ import annotations

from pathlib import Path

ORDER = (
    "plot_your_own_labels.py",  # zero-shot -> calibrated -> abstaining, on docs/tickets.csv
    "plot_conformal.py",  # conformal sets against alpha, the same tickets
    "plot_multilabel.py",  # a list of labels per ticket, zero-shot and after fit, the same tickets
    "plot_zero_shot.py",  # what each zero-shot ingredient adds (results file)
    "plot_learning_curve.py",  # fit beside MiniLM + LR and TF-IDF + LR (results files)
    "plot_cascade.py",  # a cascade's accuracy against cost (results files)
    "plot_guard.py",  # decisions with the guard on a planted claim
    "plot_huge_k.py",  # the certified search at huge K (results files)
    "plot_mask_speed.py",  # the automaton against K beside xgrammar and llguidance (results file)
)


class GalleryOrder:
    """Sort key: the position in `ORDER`, then the file name."""

    def __init__(self, src_dir):
        self.src_dir = src_dir

    def __repr__(self):  # sphinx-gallery and Sphinx's config check compare this, not the object
        return f"<{type(self).__name__}>"

    def __call__(self, filename):
        name = Path(filename).name
        return (ORDER.index(name) if name in ORDER else len(ORDER), name)
