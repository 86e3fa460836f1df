"""Reliability diagrams and risk-coverage curves as scikit-learn-style displays.

Each display is built with ``from_predictions(y_true, proba, ...)``, which does
all the computing (with the functions of :mod:`judge.calibration.metrics`) and
stores the arrays as attributes; ``plot(ax=None)`` only draws. matplotlib is
imported inside ``plot`` (install the ``plot`` extra), so importing this module
stays cheap. ``plot`` never calls ``plt.show()``; save with
``display.figure_.savefig(path)``, which works with the non-interactive Agg
backend.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from numpy.typing import ArrayLike

from .metrics import area_under_curve, ece_of_bins, risk_coverage_curve, top_label_bins

__all__ = ["ReliabilityDiagram", "RiskCoverageDisplay"]


def _axes(ax: Any) -> tuple[Any, Any]:
    """Return ``(ax, figure)``, creating a new figure when ``ax`` is None."""
    import matplotlib.pyplot as plt

    if ax is None:
        fig, ax = plt.subplots()
    return ax, ax.figure


class ReliabilityDiagram:
    """Top-label reliability diagram: accuracy against confidence per bin.

    Build it with :meth:`from_predictions`; the constructor only stores
    precomputed arrays.

    Parameters
    ----------
    bin_edges : ndarray of shape (n_bins + 1,)
        Confidence bin edges.
    bin_accuracy : ndarray of shape (n_bins,)
        Accuracy of the argmax in each bin (NaN for empty bins).
    bin_confidence : ndarray of shape (n_bins,)
        Mean top-label confidence in each bin (NaN for empty bins).
    bin_count : ndarray of shape (n_bins,)
        Number of rows in each bin.
    ece : float
        Expected calibration error over these bins.

    Attributes
    ----------
    ax_ : matplotlib.axes.Axes
        Axes drawn on, set by :meth:`plot`.
    figure_ : matplotlib.figure.Figure
        Figure holding ``ax_``, set by :meth:`plot`.

    Examples
    --------
    >>> import numpy as np
    >>> from judge.calibration import ReliabilityDiagram
    >>> y = [0, 1, 0, 1]
    >>> p = [[0.9, 0.1], [0.8, 0.2], [0.3, 0.7], [0.4, 0.6]]
    >>> diagram = ReliabilityDiagram.from_predictions(y, p, n_bins=4)
    >>> diagram.bin_count
    array([0, 0, 2, 2])
    >>> diagram.bin_accuracy
    array([nan, nan, 0.5, 0.5])
    >>> round(diagram.ece, 6)
    0.25
    >>> diagram = diagram.plot()  # draws on a new figure; save with diagram.figure_.savefig(...)
    >>> import matplotlib.pyplot as plt
    >>> plt.close(diagram.figure_)
    """

    def __init__(
        self,
        bin_edges: np.ndarray,
        bin_accuracy: np.ndarray,
        bin_confidence: np.ndarray,
        bin_count: np.ndarray,
        *,
        ece: float,
    ) -> None:
        self.bin_edges = bin_edges
        self.bin_accuracy = bin_accuracy
        self.bin_confidence = bin_confidence
        self.bin_count = bin_count
        self.ece = ece

    @classmethod
    def from_predictions(
        cls,
        y_true: ArrayLike,
        proba: ArrayLike,
        n_bins: int = 15,
        strategy: str = "uniform",
    ) -> ReliabilityDiagram:
        """Compute the per-bin statistics from labels and probabilities.

        Parameters
        ----------
        y_true : array-like of shape (n_samples,)
            True class indices in ``[0, n_classes)``.
        proba : array-like of shape (n_samples, n_classes)
            Predicted probabilities; rows sum to one.
        n_bins : int, default=15
            Number of bins, >= 1.
        strategy : {"uniform", "quantile"}, default="uniform"
            Equal-width or equal-mass bins, as in
            :func:`~judge.calibration.expected_calibration_error`.

        Returns
        -------
        display : ReliabilityDiagram
            Not yet drawn; call :meth:`plot`.
        """
        bins = top_label_bins(y_true, proba, n_bins, strategy)
        return cls(bins.edges, bins.accuracy, bins.confidence, bins.count, ece=ece_of_bins(bins))

    def plot(self, ax: Any = None, *, name: str | None = None) -> ReliabilityDiagram:
        """Draw per-bin accuracy against per-bin mean confidence, with the diagonal.

        Each non-empty bin is one marker at (mean confidence, accuracy); points
        under the dashed diagonal are over-confident. Drawing several diagrams
        on the same ``ax`` overlays their curves (the diagonal is drawn once),
        e.g. before and after calibration.

        Parameters
        ----------
        ax : matplotlib.axes.Axes, optional
            Axes to draw on; a new figure is created when None.
        name : str, optional
            Legend label for the curve (the ECE is appended).

        Returns
        -------
        self : ReliabilityDiagram
            With ``ax_`` and ``figure_`` set.
        """
        ax, fig = _axes(ax)
        reference = "perfectly calibrated"
        if reference not in [line.get_label() for line in ax.get_lines()]:
            ax.plot([0, 1], [0, 1], linestyle="--", color="gray", label=reference)
        full = self.bin_count > 0
        label = f"{name + ', ' if name else ''}ECE = {self.ece:.3f}"
        ax.plot(self.bin_confidence[full], self.bin_accuracy[full], "s-", label=label)
        ax.set(xlim=(0, 1), ylim=(0, 1), xlabel="Confidence (top label)", ylabel="Accuracy")
        ax.legend(loc="upper left")
        self.ax_, self.figure_ = ax, fig
        return self


class RiskCoverageDisplay:
    """Selective risk against coverage when abstaining on low confidence.

    Build it with :meth:`from_predictions`; the constructor only stores
    precomputed arrays.

    Parameters
    ----------
    coverage : ndarray of shape (n_thresholds,)
        Fraction of rows kept, increasing.
    risk : ndarray of shape (n_thresholds,)
        Error rate on the kept rows.
    thresholds : ndarray of shape (n_thresholds,)
        Confidence thresholds, decreasing.
    aurc : float
        Area under the curve.

    Attributes
    ----------
    ax_ : matplotlib.axes.Axes
        Axes drawn on, set by :meth:`plot`.
    figure_ : matplotlib.figure.Figure
        Figure holding ``ax_``, set by :meth:`plot`.

    Examples
    --------
    >>> from judge.calibration import RiskCoverageDisplay
    >>> y = [0, 1, 0, 1]
    >>> p = [[0.9, 0.1], [0.8, 0.2], [0.3, 0.7], [0.4, 0.6]]
    >>> display = RiskCoverageDisplay.from_predictions(y, p)
    >>> display.coverage
    array([0.25, 0.5 , 0.75, 1.  ])
    >>> round(display.aurc, 4)
    0.4167
    >>> display = display.plot()
    >>> import matplotlib.pyplot as plt
    >>> plt.close(display.figure_)
    """

    def __init__(
        self,
        coverage: np.ndarray,
        risk: np.ndarray,
        thresholds: np.ndarray,
        *,
        aurc: float,
    ) -> None:
        self.coverage = coverage
        self.risk = risk
        self.thresholds = thresholds
        self.aurc = aurc

    @classmethod
    def from_predictions(cls, y_true: ArrayLike, proba: ArrayLike) -> RiskCoverageDisplay:
        """Compute the risk-coverage curve from labels and probabilities.

        Parameters
        ----------
        y_true : array-like of shape (n_samples,)
            True class indices in ``[0, n_classes)``.
        proba : array-like of shape (n_samples, n_classes)
            Predicted probabilities; rows sum to one.

        Returns
        -------
        display : RiskCoverageDisplay
            Not yet drawn; call :meth:`plot`.
        """
        coverage, risk, thresholds = risk_coverage_curve(y_true, proba)
        return cls(coverage, risk, thresholds, aurc=area_under_curve(coverage, risk))

    def plot(self, ax: Any = None, *, name: str | None = None) -> RiskCoverageDisplay:
        """Draw the risk-coverage step curve.

        Parameters
        ----------
        ax : matplotlib.axes.Axes, optional
            Axes to draw on; a new figure is created when None.
        name : str, optional
            Legend label for the curve (the AURC is appended).

        Returns
        -------
        self : RiskCoverageDisplay
            With ``ax_`` and ``figure_`` set.
        """
        ax, fig = _axes(ax)
        label = f"{name + ', ' if name else ''}AURC = {self.aurc:.3f}"
        ax.step(self.coverage, self.risk, where="post", label=label)
        ax.set(xlim=(0, 1), ylim=(0, None), xlabel="Coverage", ylabel="Selective risk (error rate)")
        ax.legend(loc="upper left")
        self.ax_, self.figure_ = ax, fig
        return self
