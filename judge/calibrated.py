"""The calibrated half of `judge.Classifier` (outside the calibration package, which stays arrays in, arrays out): the label-free prior, ``calibrate``, the fitted values, conformal sets.

A mixin, as scikit-learn's ``ClassifierMixin``: it reads only public members of its class
(``labels``, ``prior``, ``shortlist``, ``compiled_``, ``fusion_``, ``decision_function``,
``content_free_scores``, ``zero_shot_prior``, the ``calibration_`` and ``adaptation_`` slots). What the
class's own calls need from this half are plain functions of the classifier's public state
(:func:`call_calibration`, :func:`offset_scores`, :func:`warn_if_collapsed`, :func:`note_threshold`),
not private methods either side reaches across. It keeps everything it fits in one frozen
:class:`judge.calibration.state.Calibration`, swapped in one assignment (readers see the old
or the new calibration, never a mix).

**The label-free prior** (``Classifier(prior=...)``): before any ``calibrate()`` or ``fit()``,
a small model prefers some labels whatever the text (shorter, more frequent, earlier). The
default divides out, with no labels, an estimate of that preference: the mean distribution
the model gives content-free inputs (:data:`judge.calibration.CONTENT_FREE`, scored once per
label set and cached: ``contextual``, what the decisions server does per question), at the
strength :data:`AUTO_PRIOR_STRENGTH` chosen on validation (``auto``; ``contextual`` divides it
out whole). It does not depend on the other texts of a call. ``batch`` (opt-in) divides out
the mean distribution over the call's own texts instead: strong on a call whose texts spread
over the labels, but a call concentrated on a few labels has its true answers divided out
(measured: bench/priors.py). :meth:`scores_to_proba` applies exactly what ``predict_proba`` applies.

What it deliberately does not do: score (the class does) or fit the numbers
itself (:mod:`judge.calibration.state` does).
"""

from __future__ import annotations

import warnings

import numpy as np

from judge._checks import check_texts
from judge._errors import NotCalibratedError
from judge._math import softmax
from judge.calibration.bias import AUTO_PRIOR_STRENGTH, CONTENT_FREE, batch_bias, contextual_bias
from judge.calibration.state import Calibration, check_calibrate_args, fit_resolved, resolve_bias
from judge.fusion import is_fused
from judge.labels import label_indices

__all__ = ["CalibratedMixin", "check_content_free", "offset_scores", "AUTO_PRIOR_STRENGTH", "COLLAPSE_SHARE",
           "COLLAPSE_MIN_TEXTS"]

#: A call whose answers give one label to more than this share of at least ``COLLAPSE_MIN_TEXTS``
#: texts warns that the answers have collapsed (and says what to do).
COLLAPSE_SHARE = 0.9
COLLAPSE_MIN_TEXTS = 20


class CalibratedMixin:
    """``calibrate``, ``predict_set`` and the calibrated attributes of `judge.Classifier`.

    Examples
    --------
    >>> from judge import Classifier
    >>> issubclass(Classifier, CalibratedMixin)
    True
    """

    # ------------------------------------------------------------------ the label-free prior
    def prior_for(self, n_texts: int) -> str | None:
        """Which label-free prior a call of ``n_texts`` texts gets now: ``"contextual"``, ``"batch"`` or None.

        The same on every path that scores every label (exact, first token, and the certified
        search over a huge label set, whose bound carries the prior's per-label bias: its answer is
        the argmax of full exact scoring *after* the prior). None once :meth:`calibrate` or ``fit``
        has run (they replace it), with ``prior=None`` / ``"none"``, for a single label, with an
        embedder (the fusion divides the LM's prior out itself), and with the default ``"auto"`` on
        the paths that score only some labels (``decode``, a shortlist), where no prior over all K
        labels is computed; an explicit ``"contextual"`` or ``"batch"`` there is refused
        (ValueError) rather than ignored. ``batch`` needs at least two texts and
        ``batch_invariant=False`` (else ``contextual``).

        Examples
        --------
        >>> from judge import Classifier
        >>> from judge.testing import tiny_pair
        >>> model, tok = tiny_pair()
        >>> clf = Classifier(["yes", "no"], model, tokenizer=tok)
        >>> clf.prior_for(1), clf.prior_for(100)
        ('contextual', 'contextual')
        >>> Classifier(["yes", "no"], model, tokenizer=tok, prior="batch").prior_for(100)
        'batch'
        >>> Classifier(["yes", "no"], model, tokenizer=tok, method="search").prior_for(3)
        'contextual'
        """
        if self.calibration_ is not None or self.adaptation_ is not None or len(self.labels) < 2 \
                or is_fused(self.fusion_):  # fusion divides the LM's prior out itself
            return None
        p = "contextual" if self.prior == "auto" else self.prior
        if p in (None, "none") or not prior_applies(self):
            return None
        if p == "batch" and (n_texts < 2 or self.batch_invariant):
            p = "contextual"  # one text's answer must not depend on the others in its call
        return p

    def zero_shot_prior(self) -> np.ndarray:
        """The model's label prior on content-free inputs: (K,) log-distribution, scored once per label set.

        The mean of the zero-shot label distributions of :data:`judge.calibration.CONTENT_FREE` (raw
        language-model scores: no fit, no calibration, no embedder), cached with the compiled labels.
        Every label is scored exactly, on the ``search`` path too (once per label set: for a huge
        label set this is the cost of fully scoring three short inputs).

        Examples
        --------
        >>> from judge import Classifier
        >>> from judge.testing import tiny_pair
        >>> model, tok = tiny_pair()
        >>> p = Classifier(["yes", "no"], model, tokenizer=tok).zero_shot_prior()
        >>> p.shape, round(float(np.exp(p).sum()), 6)
        ((2,), 1.0)
        """
        from judge.experts import zero_shot_scores

        return self.compiled_.derived("label_prior", lambda: contextual_bias(
            zero_shot_scores(self, list(CONTENT_FREE), full=True)))

    def scores_to_proba(self, scores) -> np.ndarray:
        """The probabilities :meth:`predict_proba` gives for raw scores of one call: (n, K) -> (n, K).

        ``scores`` are :meth:`decision_function`'s for the texts of one call; the calibration
        (after :meth:`calibrate`) or the label-free prior (before it, :meth:`prior_for` of ``n``)
        is applied as ``predict_proba`` would.

        Examples
        --------
        >>> from judge import Classifier
        >>> from judge.testing import tiny_pair
        >>> model, tok = tiny_pair()
        >>> clf = Classifier(["yes", "no"], model, tokenizer=tok)
        >>> s = clf.decision_function(["Is water wet?"])
        >>> bool(np.allclose(clf.scores_to_proba(s), clf.predict_proba(["Is water wet?"])))
        True
        """
        s = np.asarray(scores, np.float64)
        if s.ndim != 2 or s.shape[1] != len(self.labels):
            raise ValueError(f"scores must have shape (n, {len(self.labels)}) (decision_function's), got {s.shape}.")
        cal = call_calibration(self, self.prior_for(len(s)), s)
        return cal.transform(s) if cal is not None else softmax(s)

    def calibrate(self, texts, y, *, bias="auto", temperature=True, target_accuracy=None,
                  coverage=None, confidence=0.95, content_free=CONTENT_FREE, scores=None,
                  bias_l2=1.0, target_precision=None):
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
            ``auto``: :data:`judge.calibration.state.AUTO_BIAS` (chosen on the validation splits,
            :doc:`/benchmarks/accuracy`), after :meth:`fit` :data:`judge.calibration.state.AUTO_BIAS_AFTER_FIT` where
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
        target_precision : float in (0, 1), optional
            ``multi_label=True`` only, where ``y`` is a list of labels per text or an (n, K) 0/1 matrix and
            ``calibrate`` fits a Platt scaling per label (shrunk toward the pooled one) and a threshold per
            label: best F1, or the lowest whose precision reaches ``target_precision``
            (:func:`judge.multilabel.calibrate`); the options above are then for one label per text and
            refused.

        Returns
        -------
        self
            ``calibration_report_`` says where each figure was measured: ``accuracy``, ``nll``, ``ece``,
            ``coverage`` on these texts (in-sample), ``cross_fitted`` on texts each fold's fit never saw,
            and ``warnings``.

        Raises
        ------
        ValueError
            Among others: ``target_accuracy`` that no threshold could certify on this many texts
            (:func:`judge.calibration.review.min_texts_for_target`: 29 for 0.9 at 95%).

        Warns
        -----
        UserWarning
            Fewer than ``max(20, 2 per label)`` texts, a temperature outside ``[0.1, 100]``, or a
            threshold that abstains on every text (:mod:`judge.calibration.review`), each with what to do.

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
        if getattr(self, "multi_label", False):
            from judge import multilabel

            given = [name for name, value, default in [
                ("bias", bias, "auto"), ("temperature", temperature, True), ("target_accuracy", target_accuracy, None),
                ("coverage", coverage, None), ("confidence", confidence, 0.95), ("scores", scores, None),
                ("bias_l2", bias_l2, 1.0), ("content_free", content_free, CONTENT_FREE)]
                if value is not default and not (isinstance(value, (str, bool, int, float)) and value == default)]
            if given:
                raise TypeError(f"calibrate() with multi_label=True takes target_precision alone; the options "
                                f"{given} are for one label per text.")
            object.__setattr__(self, "multilabel_",
                               multilabel.calibrate(self, texts, y, target_precision=target_precision))
            return self
        if target_precision is not None:
            raise TypeError(f"calibrate(target_precision={target_precision!r}) is for multi_label=True; with one "
                            f"label per text use target_accuracy= (an abstention threshold).")
        yi = label_indices(self.labels, y)
        scores = check_calibrate_args(len(texts), yi, len(self.labels), bias=bias, bias_l2=bias_l2,
                                      temperature=temperature, target_accuracy=target_accuracy,
                                      coverage=coverage, confidence=confidence, scores=scores)
        content_free = check_content_free(content_free, "calibrate")  # checked whether or not this bias uses it
        fitted = getattr(getattr(self, "adaptation_", None), "kind", None)
        resolved = resolve_bias(bias, self.compiled_.method, bias_l2, fitted)
        fusion = getattr(self, "fusion_", None)
        if scores is None and fusion is not None and fitted is None and len(texts) >= 4:
            # zero-shot fusion: its weight is refitted with this bias and temperature (out-of-fold NLL)
            from judge.experts import experts
            from judge.fusion import fit_fusion

            lm, sim = experts(self, texts)
            fusion = fit_fusion(lm, sim, yi, temperature=fusion.temperature)
            # weight 0: the LM alone, scored as predict will score it (its raw scores, without the prior)
            if fusion.weight > 0:
                scores = fusion.combine(lm, sim)
            else:
                from judge.experts import zero_shot_scores

                scores = zero_shot_scores(self, texts)
        if scores is None:
            scores = self.decision_function(texts)
        content = None
        if resolved[0] == "contextual":
            if fusion is not None and fusion.weight > 0 and fitted is None:
                from judge.experts import experts

                content = fusion.combine(*experts(self, content_free))
            else:
                content = self.content_free_scores(content_free)
        cal = fit_resolved(tuple(self.labels), scores, yi, resolved, content_free_scores=content,
                           temperature=temperature, target_accuracy=target_accuracy, coverage=coverage,
                           confidence=confidence)
        _review(cal, lambda s, y_: fit_resolved(tuple(self.labels), s, y_, resolved, content_free_scores=content,
                                                temperature=temperature), scores, yi)
        if fusion is not None:
            object.__setattr__(self, "fusion_", fusion)
        object.__setattr__(self, "calibration_", cal)
        return self


    def predict_records(self, texts, *, abstain: bool = False, top_k: int | None = None) -> list[dict]:
        """Each text's answer as a record that says why it was abstained on (what ``judge predict`` writes).

        Parameters
        ----------
        texts : sequence of str, length n
        abstain : bool
            Abstain below the calibrated threshold (needs ``calibrate(..., target_accuracy=...)`` or
            ``coverage=...``); each abstention carries its reason.
        top_k : int, optional
            The most probable labels per record (None: all K, most probable first).

        Returns
        -------
        list of n dicts
            ``label`` (None when abstained), ``confidence`` (top probability), ``probabilities``
            ({label: p}, most probable first), ``abstained``, ``abstain_reason`` (None when answered):
            :func:`judge.calibration.review.prediction_records`. With ``multi_label=True``: ``labels`` (a list,
            possibly empty) and ``probabilities`` (:func:`judge.multilabel.records`).

        Examples
        --------
        >>> from judge import Classifier
        >>> from judge.testing import tiny_pair
        >>> model, tok = tiny_pair()
        >>> clf = Classifier(["yes", "no"], model, tokenizer=tok)
        >>> rec = clf.predict_records(["Is water wet?"])[0]
        >>> sorted(rec), rec["abstain_reason"] is None
        (['abstain_reason', 'abstained', 'confidence', 'label', 'probabilities'], True)
        """
        from judge.calibration.review import prediction_records

        if getattr(self, "multi_label", False):  # {"labels": [...], "probabilities": {...}}: judge.multilabel.records
            if abstain:
                raise ValueError("predict_records(abstain=True) is for one label per text; with multi_label=True a "
                                 "text with no label above its threshold already gets an empty list.")
            from judge import multilabel

            return multilabel.records(self.labels, self.predict_proba(texts), multilabel.thresholds(self), top_k=top_k)
        cal = self.calibration_
        if abstain and (cal is None or cal.threshold is None):
            raise NotCalibratedError(
                "This Classifier has no abstention threshold: call calibrate(texts, y, target_accuracy=...) "
                "or calibrate(texts, y, coverage=...) before predict_records(abstain=True).")
        if abstain:
            note_threshold(self.calibration_)
        proba = self.predict_proba(texts)
        return prediction_records(self.labels, proba, threshold=cal.threshold if abstain else None,
                                  report=cal.report if abstain else None, top_k=top_k)

    @property
    def is_calibrated(self) -> bool:
        """True once :meth:`calibrate` has run."""
        return self.calibration_ is not None

    @property
    def bias_(self):
        """The fitted per-label bias, (K,) float64 in ``classes_`` order, or None before :meth:`calibrate`."""
        return None if self.calibration_ is None else self.calibration_.bias

    @property
    def temperature_(self):
        """The fitted temperature (float), or None before :meth:`calibrate`."""
        return None if self.calibration_ is None else self.calibration_.temperature

    @property
    def threshold_(self):
        """The abstention threshold on the top probability (float), or None (no ``target_accuracy`` or ``coverage``)."""
        return None if self.calibration_ is None else self.calibration_.threshold

    @property
    def calibration_report_(self):
        """What :meth:`calibrate` measured: a dict (ECE with its noise floor, accuracy, warnings); NotCalibratedError before."""
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


def prior_applies(clf) -> bool:
    """Whether ``clf``'s path scores every label (exact, first token, search), so a label-free prior can apply.

    Raises ValueError where ``prior`` asks for one explicitly on a path that cannot apply it."""
    partial = "a shortlist" if clf.shortlist is not None else \
        "the decode path" if clf.compiled_.method == "decode" else None
    if partial is None:
        return True
    if clf.prior not in ("auto", None, "none"):
        raise ValueError(
            f"prior={clf.prior!r} cannot be applied on {partial}: it scores only some of the "
            f"{len(clf.labels)} labels per text, and the prior is a correction over all of them. Use "
            f"prior='auto' (no prior on this path) or None, or method='search' without a shortlist "
            f"(the certified argmax with the prior applied).")
    return False


def call_calibration(clf, kind, scores=None):
    """What maps a call's raw scores to probabilities: ``clf.calibration_``, a prior-only Calibration, or None.

    ``kind``: :meth:`CalibratedMixin.prior_for`'s answer for the call; ``scores``: the call's raw scores
    (the ``batch`` prior reads them).

    Examples
    --------
    >>> from judge import Classifier
    >>> from judge.testing import tiny_pair
    >>> model, tok = tiny_pair()
    >>> call_calibration(Classifier(["yes", "no"], model, tokenizer=tok), "contextual").bias.shape
    (2,)
    """
    if clf.calibration_ is not None or kind is None:
        return clf.calibration_
    if kind == "batch":
        return None if scores is None or not len(scores) else Calibration.prior_only(
            tuple(clf.labels), batch_bias(scores), "prior: batch")
    strength = AUTO_PRIOR_STRENGTH if clf.prior == "auto" else 1.0
    return Calibration.prior_only(tuple(clf.labels), strength * clf.zero_shot_prior(),
                                  f"prior: contextual x {strength:g}")


def offset_scores(clf, texts, *, states: bool = False):
    """The zero-shot log-scores a fitted head starts from: the LM's after the contextual prior, as one text gets them.

    The language model's also beside an embedder: the head reads the embedder itself (its
    ``similarity`` offset and ``embed`` block), as on the validation splits its defaults were chosen on.
    ``states``: ``(scores, answer-slot states or None)``, the states read from the scoring pass where one
    pass gives both (:func:`judge.experts.zero_shot_scores`). Returns (n, K) float log-scores.

    Examples
    --------
    >>> from judge import Classifier
    >>> from judge.testing import tiny_pair
    >>> model, tok = tiny_pair()
    >>> s, H = offset_scores(Classifier(["yes", "no"], model, tokenizer=tok), ["Is it?"], states=True)
    >>> s.shape, H.shape
    ((1, 2), (1, 64))
    """
    from judge.experts import zero_shot_scores

    s, H = zero_shot_scores(clf, texts, states=True) if states else (zero_shot_scores(clf, texts), None)
    if not (clf.prior in (None, "none") or len(clf.labels) < 2 or not prior_applies(clf)):
        strength = AUTO_PRIOR_STRENGTH if clf.prior == "auto" else 1.0
        s = Calibration.prior_only(tuple(clf.labels), strength * clf.zero_shot_prior()).transform_log(s)
    return (s, H) if states else s


def warn_if_collapsed(clf, top) -> None:
    """Warn when one label answers more than COLLAPSE_SHARE of a call of >= COLLAPSE_MIN_TEXTS texts."""
    top = np.asarray(top)
    if len(top) < COLLAPSE_MIN_TEXTS or len(clf.labels) < 2:
        return
    counts = np.bincount(top, minlength=len(clf.labels))
    k = int(counts.argmax())
    if counts[k] > COLLAPSE_SHARE * len(top):
        state = ("calibrated" if clf.calibration_ is not None else
                 f"fitted ({clf.adaptation_.kind})" if clf.adaptation_ is not None else
                 f"prior {clf.prior_for(len(top))!r}")
        warnings.warn(
            f"{counts[k]} of the {len(top)} texts were answered {clf.labels[k]!r} ({state}): the answers have "
            f"collapsed onto one label. If that is not what the texts say: calibrate(texts, y) on a few "
            f"labelled texts per label, fit(texts, y), describe the labels (Classifier({{label: description}})),"
            f" or check the label names. (If one label really is that frequent, ignore this warning.)",
            UserWarning, stacklevel=3)


def note_threshold(cal) -> None:
    """Warn when the calibrated threshold abstains on every text (it certified nothing), saying why."""
    if cal is not None and cal.threshold is not None and cal.threshold > 1.0:
        from judge.calibration.review import threshold_words

        warnings.warn(f"Every text is abstained on: {threshold_words(cal.report)} (see calibration_report_"
                      f"['warnings']). Calibrate on more texts, lower target_accuracy, or use coverage=...",
                      UserWarning, stacklevel=3)


def _review(cal, refit, scores, y) -> None:
    """Add the cross-fitted figures and the warnings to ``cal.report`` (:mod:`judge.calibration.review`); warn each."""
    from judge.calibration.review import cross_fitted, review_calibration

    cal.report["cross_fitted"] = cross_fitted(refit, scores, y)
    cal.report["warnings"] = review_calibration(cal.report, y, len(cal.labels))
    for w in cal.report["warnings"]:
        warnings.warn(f"calibrate(): {w}", UserWarning, stacklevel=3)


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
