"""The one table of `judge.Classifier`'s constructor parameters (as scikit-learn's ``_parameter_constraints``).

Every parameter is written here once, with its default, its check, what changing it does and how it is
saved. What reads the table:

* ``Classifier.__init__`` / ``__setattr__``: every value is checked by its row when it is set (the
  constructor, ``set_params``, a plain assignment), then the checks across parameters run;
* ``Classifier.get_params`` / ``set_params`` (scikit-learn's estimator API): the names;
* :class:`judge.compiled.LabelSpec` (``role="spec"``) and :class:`judge.compiled.ScoreOptions`
  (``role="options"``): which parameters the compiled label set and a scoring call are made of;
* :mod:`judge.persistence`: ``saved`` says how each parameter is written (a codec of that module) or
  why it is not; a test fails if a parameter is missing from any of them.

Roles: ``labels`` (the label set and what the model writes for it), ``spec`` (what the labels are
compiled with), ``options`` (how a call runs: never recompiles), ``prior`` (the label-free
correction), ``fusion`` (the sentence embedder beside the LM), ``answer`` (one label or several:
:mod:`judge.multilabel`).

What changing a parameter after first use does (``on_change``): ``"refit"`` recompiles on the next
call and drops a calibration or fit made for the old value (with a warning); ``"rebuild"`` recompiles
and keeps them (where the model runs, not what it answers); ``"none"``: read at each call.

What it deliberately does not do: hold values (the classifier does) or load anything.
"""

from __future__ import annotations

import numbers
import os
import threading
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

__all__ = ["Param", "PARAMS", "PARAM_NAMES", "REQUIRED", "METHODS", "PRIORS", "LENGTH_NORMS", "UNSAVED", "param",
           "check_value", "check_together", "names_with", "Change", "plan_change", "Parameters"]

#: The scoring paths of ``Classifier(method=...)``.
METHODS = ("auto", "first_token", "exact", "search", "decode")
#: The label-free corrections of ``Classifier(prior=...)``.
PRIORS = ("auto", "contextual", "batch", "none", None)
#: The length normalisations of ``Classifier(length_norm=...)``: a label's log-probability as is, per
#: token scored, or per byte of the label's text (`judge.compiled.length_divisors`).
LENGTH_NORMS = (None, "token", "byte")


class _Required:
    def __repr__(self):
        return "REQUIRED"


#: The default of a parameter that has none (``labels``).
REQUIRED = _Required()


@dataclass(frozen=True)
class Param:
    """One constructor parameter of `judge.Classifier`.

    Attributes
    ----------
    name : str
    default : object
        :data:`REQUIRED` for ``labels``.
    role : {"labels", "spec", "options", "prior", "fusion", "answer"}
    on_change : {"refit", "rebuild", "none"}
        What changing it after first use does (the module docstring).
    saved : str or None
        The :mod:`judge.persistence` codec that writes it (``"json"``: the value as is), or None: not
        saved, for the reason in :data:`UNSAVED`.
    check : callable or None
        ``check(value)`` raises a ValueError or TypeError saying what was given and what is allowed.
    fusion_input : bool
        The fusion a classifier starts with (`judge.fusion.initial_fusion`) depends on it.

    Examples
    --------
    >>> param("method").default, param("method").role
    ('auto', 'spec')
    """

    name: str
    default: Any
    role: str
    on_change: str
    saved: str | None = "json"
    check: Callable[[Any], None] | None = None
    fusion_input: bool = False


def _int_at_least(name, low, high=None, *, none=False, what=None, hint=""):
    def check(v):
        if v is None and none:
            return
        ok = isinstance(v, numbers.Integral) and not isinstance(v, bool) and v >= low and (high is None or v <= high)
        if not ok:
            span = what or ("a positive int" if low == 1 and high is None else
                            f"an int >= {low}" if high is None else f"an int in [{low}, {high}]")
            raise ValueError(f"{name} must be {span}, got {v!r}{hint}.")
    return check


def _one_of(name, allowed, what="values"):
    def check(v):
        if not any(v is a or (type(v) is type(a) and v == a) for a in allowed):
            raise ValueError(f"Unknown {name} {v!r}; valid {what} are {allowed}.")
    return check


def _bool(name):
    def check(v):
        if not isinstance(v, (bool, numbers.Integral)) or v not in (0, 1):
            raise ValueError(f"{name} must be True or False, got {v!r}.")
    return check


def _labels(v):
    from judge.labels import as_label_list, check_label_count, label_descriptions, validate_labels

    label_descriptions(v)  # None and malformed descriptions refused first
    lst = as_label_list(v)
    check_label_count(lst)
    validate_labels(lst)


def _model(v):
    from judge._checks import check_model_arg

    check_model_arg(v)


def _prompt(v):
    from judge.prompts import PromptTemplate

    if v is not None and not isinstance(v, (str, PromptTemplate)):
        raise TypeError(f"prompt must be a PromptTemplate or a str template, got {type(v).__name__}.")


def _backend(v):
    from judge.backends import check_backend

    check_backend(v)


def _tolerance(v):
    if isinstance(v, bool) or not (isinstance(v, numbers.Real) and 0.0 < v < 1.0):
        raise ValueError(f"search_tolerance must be a number in (0, 1), got {v!r}; e.g. 1e-3.")


def _encoder(name, many=False):
    def check(v):
        if v is None or (name == "embedder" and v == "auto"):
            return
        from judge._checks import check_encoder_spec

        check_encoder_spec(name, v, many=many)
    return check


def _describe(v):
    from judge.labels import DESCRIBE

    _one_of("describe", DESCRIBE)(v)


def _device(v):
    if v is not None and not isinstance(v, (str, int)) and type(v).__name__ != "device":
        raise TypeError(f"device must be None, a str such as 'cpu' or 'cuda:0', an int or a torch.device; "
                        f"got {type(v).__name__} {v!r:.40}.")


#: Every constructor parameter, in the constructor's order.
PARAMS: tuple[Param, ...] = (
    Param("labels", REQUIRED, "labels", "refit", "labels", _labels, fusion_input=True),
    Param("model", None, "spec", "refit", "model", _model, fusion_input=True),
    Param("tokenizer", None, "spec", "rebuild", None),
    Param("method", "auto", "spec", "refit", "json", _one_of("method", METHODS, "methods"), fusion_input=True),
    Param("prompt", None, "spec", "refit", "prompt", _prompt),
    Param("label_names", None, "labels", "refit", "label_names"),
    Param("batch_size", 8, "options", "none", "json", _int_at_least("batch_size", 1)),
    Param("device", None, "spec", "rebuild", None, _device),
    Param("think", False, "spec", "refit", "json", _bool("think")),
    Param("think_tokens", 128, "spec", "refit", "json", _int_at_least("think_tokens", 1)),
    Param("top_k", 5, "spec", "refit", "json", _int_at_least("top_k", 1)),
    Param("decode_above", 2000, "spec", "refit", "json", _int_at_least("decode_above", 1), fusion_input=True),
    Param("end_token", "auto", "spec", "refit", "json", _one_of("end_token", ("auto", True, False))),
    Param("progress", None, "options", "none", "json", _one_of("progress", (None, True, False, "auto"))),
    Param("batch_invariant", False, "options", "none", "json", _bool("batch_invariant")),
    Param("pack", 1, "options", "none", "json", _int_at_least("pack", 1)),
    Param("rotations", 1, "spec", "refit", "json",
          _int_at_least("rotations", 1, 8, hint="; 2 averages the list and its half-way rotation")),
    Param("search_budget", 20_000, "options", "none", "json",
          _int_at_least("search_budget", 1, none=True, what="a positive int (tokens fed per text) or None")),
    Param("search_tolerance", 1e-3, "options", "none", "json", _tolerance),
    Param("shortlist", None, "spec", "refit", "json",
          _int_at_least("shortlist", 1, none=True, what="None or a positive int (labels kept per text)"), fusion_input=True),
    Param("shortlist_encoder", None, "spec", "refit", "encoders", _encoder("shortlist_encoder", many=True)),
    Param("backend", "transformers", "spec", "rebuild", "json", _backend),
    Param("prior", "auto", "prior", "none", "json", _one_of("prior", PRIORS)),
    Param("describe", "auto", "labels", "refit", "json", _describe),
    Param("embedder", "auto", "fusion", "refit", "embedder", _encoder("embedder"), fusion_input=True),
    Param("length_norm", None, "spec", "refit", "json", _one_of("length_norm", LENGTH_NORMS)),
    Param("multi_label", False, "answer", "refit", "json", _bool("multi_label")),
)

#: The parameters' names, in order.
PARAM_NAMES: tuple[str, ...] = tuple(p.name for p in PARAMS)

#: Why a parameter with ``saved=None`` is not written by ``Classifier.save``.
UNSAVED = {
    "tokenizer": "it comes with the model: the saved model reference loads its own tokenizer "
                 "(load_classifier(..., tokenizer=) overrides it)",
    "device": "where the classifier runs belongs to the machine that loads it: load_classifier(..., device=)",
}

_BY_NAME = {p.name: p for p in PARAMS}


def param(name: str) -> Param:
    """The row of ``name``; a ValueError listing the valid names otherwise.

    Examples
    --------
    >>> param("prior").default
    'auto'
    >>> param("labelz")  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    ValueError: Classifier has no parameter 'labelz'; valid parameters are labels, model, tokenizer, ...
    """
    p = _BY_NAME.get(name)
    if p is None:
        raise ValueError(f"Classifier has no parameter {name!r}; valid parameters are {', '.join(PARAM_NAMES)}.")
    return p


def names_with(**what) -> tuple[str, ...]:
    """The names of the parameters whose attributes equal ``what`` (e.g. ``role="spec"``), in order.

    Examples
    --------
    >>> names_with(role="options")
    ('batch_size', 'progress', 'batch_invariant', 'pack', 'search_budget', 'search_tolerance')
    """
    return tuple(p.name for p in PARAMS if all(getattr(p, k) == v for k, v in what.items()))


def check_value(name: str, value) -> None:
    """Check one parameter's value by its row (a ValueError or TypeError saying what is wrong).

    Examples
    --------
    >>> check_value("batch_size", 16)
    >>> check_value("batch_size", 0)
    Traceback (most recent call last):
    ...
    ValueError: batch_size must be a positive int, got 0.
    """
    p = param(name)
    if p.check is not None:
        p.check(value)


def check_together(values: dict) -> None:
    """The checks across parameters (``values``: every parameter by name), after each one's own.

    * labels that would read alike to the model (`judge.labels.check_distinguishable`, under
      ``label_names`` and ``describe``);
    * ``backend="vllm"`` loads the model itself: a hub id, a folder or None, not a loaded model;
    * ``multi_label=True`` reads every label's exact score: not on the ``search`` or ``decode`` paths, nor
      with a ``shortlist``, ``think`` or the vLLM backend.

    Examples
    --------
    >>> v = {p.name: p.default for p in PARAMS} | {"labels": ["yes", "no"]}
    >>> check_together(v)
    >>> check_together(v | {"label_names": ["same", "same"]})
    Traceback (most recent call last):
    ...
    judge._errors.LabelError: Labels 'yes' and 'no' are both shown to the model as 'same', so they could not be told apart; pass label_names='raw', a dict with distinct names, or distinct descriptions.
    """
    from judge.labels import (
        as_label_list,
        check_distinguishable,
        label_descriptions,
        label_names_for,
    )

    labels = values["labels"]
    lst = as_label_list(labels)
    check_distinguishable(lst, label_names_for(lst, values["label_names"], label_descriptions(labels),
                                               values["describe"]))
    model = values["model"]
    if values["backend"] == "vllm" and not (model is None or isinstance(model, (str, os.PathLike))):
        raise TypeError(f"backend='vllm' loads the model itself: pass a hub id or a folder (or None for the "
                        f"packaged model), not a loaded {type(model).__name__}.")
    if values["multi_label"]:
        clash = [f"{k}={values[k]!r}" for k, bad in (("method", values["method"] in ("search", "decode")),
                                                     ("shortlist", values["shortlist"] is not None),
                                                     ("think", bool(values["think"])),
                                                     ("backend", values["backend"] != "transformers")) if bad]
        if clash:
            raise ValueError(f"multi_label=True judges every label of every text, which {', '.join(clash)} does "
                             f"not score; use method='auto' or 'exact', no shortlist, no think, the transformers "
                             f"backend.")


@dataclass(frozen=True)
class Change:
    """What setting some parameters does (:func:`plan_change`).

    Attributes
    ----------
    values : dict
        The parameters that change (name to the value as given); the others were set to what they were.
    recompile : bool
        The compiled label set must be rebuilt on next use.
    refit : tuple of str
        The changed parameters a calibration or fit made before must be dropped for.
    fusion : bool
        The fusion the classifier starts with must be chosen again.

    Examples
    --------
    >>> c = plan_change({"labels": ["a", "b"], "top_k": 5, "batch_size": 8}, {"top_k": 3, "batch_size": 8})
    >>> c.values, c.recompile, c.refit, c.fusion
    ({'top_k': 3}, True, ('top_k',), False)
    """

    values: dict
    recompile: bool = False
    refit: tuple = ()
    fusion: bool = False


def plan_change(given: dict, changes: dict) -> Change:
    """Check ``changes`` against ``given`` (each row's check, then :func:`check_together` on the result).

    Raises before anything is set, so a refused change leaves the classifier as it was. A value
    that is the very object already set (``is``) is no change (scikit-learn sets parameters again).

    Examples
    --------
    >>> plan_change({"labels": ["a", "b"]}, {"top_k": -1})
    Traceback (most recent call last):
    ...
    ValueError: top_k must be a positive int, got -1.
    """
    for name, value in changes.items():
        check_value(name, value)
    values = {n: v for n, v in changes.items() if n not in given or v is not given[n]}
    if len(given) == len(PARAMS) and values:
        check_together({**given, **values})
    rows = [param(n) for n in values]
    return Change(values, any(p.on_change != "none" for p in rows),
                  tuple(p.name for p in rows if p.on_change == "refit"), any(p.fusion_input for p in rows))


class Parameters:
    """The table's parameters on an object: checked when set, scikit-learn's ``get_params`` / ``set_params``.

    A subclass (`judge.Classifier`) calls ``Parameters.__init__(self, given, lock)`` with every
    parameter once in its constructor, and overrides the two hooks ``_store(name, value)`` (keep
    one value as an attribute; the default sets it) and ``_changed(change)`` (what a
    :class:`Change` does to what it compiled or fitted; the default does nothing), and may override
    ``_guard()``, the re-entrant lock held over every change (the default: this object's own; the
    Classifier returns the lock that guards its compiled and fitted state, so a change and a
    compile never interleave). Values are kept as given (``get_params`` returns the very objects,
    as ``sklearn.base.clone`` requires); a plain assignment of a parameter is a ``set_params`` of it.

    Examples
    --------
    >>> from judge import Classifier
    >>> isinstance(Classifier(["yes", "no"], embedder=None), Parameters)
    True
    """

    def __init__(self, given: dict) -> None:
        missing = [n for n in PARAM_NAMES if n not in given]
        if missing:  # pragma: no cover - a subclass that forgot a parameter of the table
            raise TypeError(f"{type(self).__name__} did not pass the parameters {missing} to Parameters.__init__.")
        object.__setattr__(self, "_params_lock", threading.RLock())
        object.__setattr__(self, "_given", {})
        change = plan_change({}, given)
        check_together(given)
        self._given.update(change.values)
        for name, value in change.values.items():
            self._store(name, value)

    def get_params(self, deep=True) -> dict:
        """The constructor's parameters as given (scikit-learn's API; ``deep``: none is an estimator): dict.

        ``labels`` comes back as given (a mapping with its descriptions); the attribute ``labels`` is the list.

        Examples
        --------
        >>> from judge import Classifier
        >>> from judge.testing import tiny_pair
        >>> model, tok = tiny_pair()
        >>> p = Classifier({"yes": "agrees", "no": None}, model, tokenizer=tok, describe="both", top_k=3).get_params()
        >>> p["labels"], p["top_k"], len(p)
        ({'yes': 'agrees', 'no': None}, 3, 27)
        """
        return dict(self._given)

    def set_params(self, **params):
        """Set parameters (scikit-learn's estimator API), checked together before any is set; returns self.

        A bad value or name raises and changes nothing. A change of what is answered drops a calibration
        or fit made for the old value, with a warning (:data:`PARAMS`' ``on_change``).

        Examples
        --------
        >>> from judge import Classifier
        >>> from judge.testing import tiny_pair
        >>> model, tok = tiny_pair()
        >>> clf = Classifier(["yes", "no"], model, tokenizer=tok).set_params(labels=["a", "b", "c"], top_k=2)
        >>> list(clf.classes_), clf.top_k
        (['a', 'b', 'c'], 2)
        >>> clf.set_params(top_k=0)
        Traceback (most recent call last):
        ...
        ValueError: top_k must be a positive int, got 0.
        """
        self._apply(params)
        return self

    def _store(self, name, value) -> None:
        """Hook: keep one parameter's value (a subclass may convert it, e.g. ``labels``' mapping)."""
        object.__setattr__(self, name, value)

    def _changed(self, change) -> None:
        """Hook: after a :class:`Change` was applied (a subclass drops what it compiled or fitted)."""

    def _guard(self):
        """Hook: the re-entrant lock every change holds (the default: this object's own)."""
        return self._params_lock

    def __getstate__(self):  # a lock cannot be pickled: a new one on the other side
        return {k: v for k, v in super().__getstate__().items() if k != "_params_lock"}

    def __setstate__(self, state):
        super().__setstate__(state)
        object.__setattr__(self, "_params_lock", threading.RLock())

    def _apply(self, changes: dict) -> None:
        with self._guard():
            change = plan_change(self._given, changes)
            if not change.values:
                return
            self._given.update(change.values)
            for name, value in change.values.items():
                self._store(name, value)
            self._changed(change)

    def __setattr__(self, name, value):
        if name in PARAM_NAMES:  # checked and applied as set_params does
            self._apply({name: value})
        else:
            object.__setattr__(self, name, value)

    def __sklearn_tags__(self):
        """scikit-learn's tags: an estimator of texts (a list of str), usable before ``fit`` (zero-shot)."""
        tags = super().__sklearn_tags__()
        tags.input_tags.two_d_array, tags.input_tags.string, tags.requires_fit = False, True, False
        return tags

    def __sklearn_is_fitted__(self) -> bool:
        """Always True: a zero-shot classifier answers before ``fit`` (scikit-learn's ``check_is_fitted``)."""
        return True
