"""A label set per text in one call: each text answered over its own labels, one model pass for all.

``classify(texts, label_sets)`` answers text ``i`` over ``label_sets[i]`` exactly as a
:class:`judge.Classifier` built for that label set answers it on the texts that share the set (its
prompt, label-free prior and fusion; the answers equal that classifier's ``predict_proba`` to float
noise), while the language model runs once: every text's prompt and label trie, and each distinct
set's content-free inputs (its prior), go into one scoring call over the prompt forest
(:func:`judge.label_paths.prefetched`), instead of one call per text.

Unlike transformers' zero-shot pipeline, which keeps only the first list when given several
(transformers issues 29793 and 30368), each text's set is its own, and a malformed set is refused
with the text it belongs to named.

What it deliberately does not do: fit or calibrate (a fitted head or a calibration belongs to one
label set), or prefetch the paths that do not score every label in one pass (search, decode,
shortlist, think-then-answer, rotations): sets on those paths are scored by their own calls, with the
same answers.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from judge._checks import check_texts
from judge.labels import as_label_list

__all__ = ["SetAnswer", "classify"]


@dataclass(frozen=True)
class SetAnswer:
    """One text's answer over its own label set.

    Attributes
    ----------
    label : str
        The most probable label of the text's set.
    labels : tuple of str, length K_i
        The text's label set, in the order given.
    proba : ndarray of float64, shape (K_i,)
        Each label's probability (sums to 1), in ``labels`` order.

    Examples
    --------
    >>> a = SetAnswer("billing", ("billing", "tech"), np.array([0.8, 0.2]))
    >>> a.probabilities
    {'billing': 0.8, 'tech': 0.2}
    """

    label: str
    labels: tuple
    proba: np.ndarray

    @property
    def probabilities(self) -> dict:
        """``{label: probability}`` in the set's order."""
        return {k: float(p) for k, p in zip(self.labels, self.proba)}


def _key(labels):
    return tuple(labels.items()) if isinstance(labels, dict) else tuple(labels)


def _check_sets(texts, label_sets) -> list:
    if isinstance(label_sets, (str, bytes, dict)) or not hasattr(label_sets, "__len__"):
        raise TypeError(f"label_sets must be a list with one label set per text, got {type(label_sets).__name__}; "
                        f"for one set shared by every text use Classifier(labels).predict_proba(texts).")
    if len(label_sets) != len(texts):
        raise ValueError(f"label_sets has {len(label_sets)} sets for {len(texts)} texts; give one set per text "
                         f"(the same list object may repeat).")
    from judge.labels import check_label_count, validate_labels

    for i, s in enumerate(label_sets):
        try:
            if isinstance(s, (str, bytes)) or not hasattr(s, "__iter__"):
                raise TypeError(f"a label set must be a list of labels or a dict of label -> description, "
                                f"got {type(s).__name__} {s!r:.60}")
            validate_labels(as_label_list(s))
            check_label_count(s)
        except (TypeError, ValueError) as e:
            raise type(e)(f"label_sets[{i}] (for text {i}: {texts[i]!r:.60}): {e}") from None
    return list(label_sets)


def classify(texts, label_sets, *, classifier=None, **params) -> list[SetAnswer]:
    """Answer each text over its own label set, with one model pass for the whole call.

    Parameters
    ----------
    texts : sequence of str, length n
    label_sets : sequence of n label sets
        ``label_sets[i]``: the labels text ``i`` may get, a list of str or a dict of label ->
        description (as `judge.Classifier` takes them); sets may repeat, in any order of labels.
    classifier : judge.Classifier, optional
        Whose parameters (model, prompt, prior, embedder, ...) every set is answered with, its loaded
        model and scorer shared; its own labels are not used, and it must be neither calibrated nor
        fitted (those belong to its label set). None: ``Classifier(label_sets[0], **params)``.
    **params
        `judge.Classifier` parameters when ``classifier`` is None.

    Returns
    -------
    list of n SetAnswer
        Text ``i``'s label and probabilities over ``label_sets[i]``: what
        ``Classifier(label_sets[i], ...).predict_proba`` gives on the texts sharing that set.

    Raises
    ------
    ValueError, TypeError
        A set that is empty, has one label, repeats a label or is not a list of labels (the message
        names the text), a count of sets other than the count of texts, a calibrated or fitted classifier.

    Examples
    --------
    >>> from judge.testing import tiny_pair
    >>> model, tok = tiny_pair()
    >>> out = classify(["Where is my card?", "Is it raining?"],
    ...                [["card_arrival", "exchange_rate"], ["rain", "sun", "snow"]],
    ...                model=model, tokenizer=tok, embedder=None)
    >>> [a.labels for a in out], [round(float(a.proba.sum()), 6) for a in out]
    ([('card_arrival', 'exchange_rate'), ('rain', 'sun', 'snow')], [1.0, 1.0])
    """
    from judge import Classifier
    from judge.calibration.bias import CONTENT_FREE
    from judge.label_paths import prefetched, prompt_items

    texts = check_texts(texts)
    sets = _check_sets(texts, label_sets)
    if not texts:
        return []
    if classifier is None:
        classifier = Classifier(sets[0], **params)
    elif params:
        raise TypeError(f"classify() takes a classifier or Classifier parameters, not both; got classifier= and "
                        f"{sorted(params)}. Use classifier.set_params(...) first.")
    if classifier.calibration_ is not None or classifier.adaptation_ is not None:
        raise ValueError("classify() answers zero-shot over each text's own labels, but this classifier is "
                         "calibrated or fitted for its own label set; pass an unfitted one (sklearn.base.clone(clf)).")
    engine = classifier.setup().engine_
    groups: dict = {}
    for i, s in enumerate(sets):
        groups.setdefault(_key(s), []).append(i)
    subs, items = {}, []
    for key, rows in groups.items():
        # the same parameter objects (sklearn's clone would deep-copy a model object), the same scorer:
        # compile_labels keeps a scorer whose model settings are unchanged
        sub = subs[key] = type(classifier)(**{**classifier.get_params(), "labels": sets[rows[0]]})
        sub.engine_ = engine
        c = sub.compiled_  # every item the set's own steps will score, to be scored ahead and at once
        if c.method in ("exact", "first_token") and not c.think and not c.rotated and c.spec.shortlist is None:
            items += prompt_items(c, [texts[i] for i in rows])
            if sub.prior not in (None, "none"):
                items += prompt_items(c, list(CONTENT_FREE))
    out: list = [None] * len(texts)
    step = 1 if classifier.batch_invariant else classifier.batch_size
    show = classifier.progress if classifier.progress is not None else ("auto" if len(items) > 4 * step else False)
    with prefetched(engine, items, batch_size=step, pack=min(classifier.pack, step), progress=show):
        for key, rows in groups.items():
            sub = subs[key]
            proba = sub.predict_proba([texts[i] for i in rows])
            for i, p in zip(rows, proba):
                out[i] = SetAnswer(str(sub.classes_[int(np.argmax(p))]), tuple(sub.classes_), p)
    return out
