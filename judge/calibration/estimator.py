"""The calibrated half of `judge.Classifier`: ``calibrate``, the fitted values, conformal sets.

A mixin, as scikit-learn's ``ClassifierMixin``: it needs from its class only
public members (``labels``, ``compiled_.method``, ``decision_function``,
``content_free_scores`` and the ``calibration_`` slot) and keeps everything it
fits in one frozen :class:`judge.calibration.state.Calibration`, swapped in one
assignment (readers see the old or the new calibration, never a mix).

What it deliberately does not do: score (the class does) or fit the numbers
itself (:mod:`judge.calibration.state` does).
"""

from __future__ import annotations

import numpy as np

from judge._checks import check_texts, label_indices
from judge._errors import NotCalibratedError
from judge.calibration.state import check_calibrate_args, fit_resolved, resolve_bias

__all__ = ["CalibratedMixin", "check_content_free"]


class CalibratedMixin:
    """``calibrate``, ``predict_set`` and the calibrated attributes of `judge.Classifier`.

    Examples
    --------
    >>> from judge import Classifier
    >>> issubclass(Classifier, CalibratedMixin)
    True
    """

    def calibrate(self, texts, y, *, bias="auto", temperature=True, target_accuracy=None,
                  coverage=None, confidence=0.95, content_free=("N/A", "", "[MASK]"), scores=None,
                  bias_l2=1.0):
        """Fit label-bias correction, temperature and (optionally) an abstention threshold.

        Everything is validated before any text is scored; on any error the
        fitted state is unchanged.

        Parameters
        ----------
        texts : sequence of str, length n
            Held-out texts (a validation split, never the test set).
        y : sequence of labels, length n
        bias : {"auto", "contextual", "batch", "contextual+fit", "batch+fit", "fit", "cv", None}
            ``contextual``: divide out the label distribution the model gives
            content-free inputs (through the same prompt, reasoning included);
            ``batch``: the mean distribution over ``texts``; ``+fit``: then a
            residual bias fitted with the labels jointly with the temperature
            (L2 strength ``bias_l2``; ``fit`` alone starts from no prior);
            ``cv``: ``batch+fit`` at the L2 of lowest out-of-fold NLL on these
            texts, or no bias at all (temperature alone) where that is lower;
            ``auto``: :data:`judge.calibration.state.AUTO_BIAS` (chosen on the validation splits, see
            the README), after :meth:`fit` :data:`judge.calibration.state.AUTO_BIAS_AFTER_FIT` where
            it names the fitted kind; none on the ``decode`` path.
        temperature : bool
        target_accuracy, coverage : float in (0, 1), optional
            Fit ``threshold_`` (Clopper-Pearson lower bound at ``confidence``),
            or keep about this fraction of rows.
        content_free : sequence of str
        scores : ndarray of shape (n, K), optional
            ``decision_function(texts)`` computed already (it is not recomputed).
        bias_l2 : float or "cv"
            Shrinkage of a fitted residual bias towards the prior (``+fit`` only);
            ``"cv"``: chosen by out-of-fold NLL on these texts
            (:func:`judge.calibration.state.choose_bias_l2`).

        Returns
        -------
        self

        Examples
        --------
        >>> from judge import Classifier
        >>> from judge.testing import tiny_pair
        >>> model, tok = tiny_pair()
        >>> clf = Classifier(["yes", "no"], model, tokenizer=tok)
        >>> texts, y = ["sure", "nope", "yes!", "no way", "ok", "never"], ["yes", "no"] * 3
        >>> clf.calibrate(texts, y, coverage=0.5).is_calibrated
        True
        >>> clf.temperature_ > 0, 0 <= clf.threshold_ <= 1
        (True, True)
        """
        texts = check_texts(texts)
        yi = label_indices(self.labels, y)
        scores = check_calibrate_args(len(texts), yi, len(self.labels), bias=bias, bias_l2=bias_l2,
                                      temperature=temperature, target_accuracy=target_accuracy,
                                      coverage=coverage, confidence=confidence, scores=scores)
        content_free = check_content_free(content_free, "calibrate")  # checked whether or not this bias uses it
        fitted = getattr(getattr(self, "adaptation_", None), "kind", None)
        resolved = resolve_bias(bias, self.compiled_.method, bias_l2, fitted)
        if scores is None:
            scores = self.decision_function(texts)
        content = self.content_free_scores(content_free) if resolved[0] == "contextual" else None
        cal = fit_resolved(tuple(self.labels), scores, yi, resolved, content_free_scores=content,
                           temperature=temperature, target_accuracy=target_accuracy, coverage=coverage,
                           confidence=confidence)
        object.__setattr__(self, "calibration_", cal)
        return self


    @property
    def is_calibrated(self) -> bool:
        """True once :meth:`calibrate` has run."""
        return self.calibration_ is not None

    @property
    def bias_(self):
        return None if self.calibration_ is None else self.calibration_.bias

    @property
    def temperature_(self):
        return None if self.calibration_ is None else self.calibration_.temperature

    @property
    def threshold_(self):
        return None if self.calibration_ is None else self.calibration_.threshold

    @property
    def calibration_report_(self):
        if self.calibration_ is None:
            raise NotCalibratedError("This Classifier is not calibrated: call calibrate(texts, y) first.")
        return self.calibration_.report

    def predict_set(self, texts, *, alpha=0.1, method="lac") -> list[list]:
        """Conformal prediction sets: per text, the labels that cover the truth with probability >= 1 - alpha.

        Returns
        -------
        list of n lists of labels

        Examples
        --------
        >>> from judge import Classifier
        >>> from judge.testing import tiny_pair
        >>> model, tok = tiny_pair()
        >>> clf = Classifier(["yes", "no"], model, tokenizer=tok)
        >>> clf = clf.calibrate(["sure", "nope", "yes!", "no way"], ["yes", "no", "yes", "no"])
        >>> [set(s) <= {"yes", "no"} and len(s) >= 1 for s in clf.predict_set(["ok?"], alpha=0.2)]
        [True]
        """
        from judge.calibration import ConformalPredictor

        cal = self.calibration_
        if cal is None:
            raise NotCalibratedError("This Classifier is not calibrated: call calibrate(texts, y) before predict_set().")
        texts = check_texts(texts)
        if not texts:
            return []
        cp = ConformalPredictor(method=method, alpha=alpha, non_empty=True).fit(cal.y, cal.proba)
        member = cp.predict_set(cal.transform(self.decision_function(texts)))
        return [[self.labels[k] for k in np.flatnonzero(row)] for row in member]


def check_content_free(inputs, where: str) -> list[str]:
    """``content_free`` as a list of strings, or a ValueError naming the bad entry.

    Examples
    --------
    >>> check_content_free(("N/A", ""), "calibrate")
    ['N/A', '']
    """
    from collections.abc import Sequence

    example = "e.g. ('N/A', '', '[MASK]')"
    if isinstance(inputs, (str, bytes)) or not isinstance(inputs, Sequence):
        raise ValueError(f"{where}: content_free must be a list or tuple of strings, {example}; got "
                         f"{type(inputs).__name__} {inputs!r:.60}.")
    if len(inputs) == 0:
        raise ValueError(f"{where} needs at least one content-free input, {example}; got none.")
    for i, x in enumerate(inputs):
        if not isinstance(x, str):
            raise ValueError(f"{where}: content_free[{i}] is {type(x).__name__} {x!r:.40}, not a string; pass "
                             f"strings only, {example}.")
    return list(inputs)
