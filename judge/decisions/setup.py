"""A `judge.decisions.Decider`'s parts resolved from its arguments: its scorer, its styles, its model's name.

`build_scorer` takes what a caller passed (a built scorer, its former name ``engine=``, a
scorer passed as the model, or nothing) and returns the one `judge.engine.Scorer` every
question is scored through; `resolve_styles` gives each question type its prompt style;
`model_name_of` names the model for ``/v1/models``.

What it deliberately does not do: load a model (the scorer does, lazily) or score.
"""

from __future__ import annotations

import dataclasses
import os
import warnings
from collections.abc import Mapping

from judge.backends import make_scorer
from judge.decisions.prompts import DEFAULT_STYLES, PromptStyle
from judge.decisions.questions import DecisionError

__all__ = ["FixedAfterInit", "build_scorer", "model_name_of", "resolve_styles"]


def build_scorer(scorer, engine, model, tokenizer, backend: str, device):
    """The scorer a Decider uses: the one given (``scorer`` or its old name ``engine``), else one built by the backend.

    Parameters
    ----------
    scorer, engine : judge.engine.Scorer, "auto" or None
    model, tokenizer, device
        As for `judge.backends.make_scorer` (``model`` may itself be a built scorer, as older calls passed it).
    backend : {"transformers", "vllm"}

    Returns
    -------
    judge.engine.Scorer

    Raises
    ------
    DecisionError
        Both ``scorer`` and ``engine``; an ``engine`` string other than "auto"; something that is not a scorer.

    Examples
    --------
    >>> from judge.testing import Reference, tiny_pair
    >>> ref = Reference(*tiny_pair())
    >>> build_scorer(ref, None, None, None, "transformers", None) is ref
    True
    >>> build_scorer(ref, ref, None, None, "transformers", None)
    Traceback (most recent call last):
    ...
    judge.decisions.questions.DecisionError: Decider got both scorer= and engine=; pass only scorer= (engine= is its old name).
    """
    from judge.engine import Scorer

    given = scorer
    if isinstance(engine, str):
        if engine != "auto":
            raise DecisionError(f"Decider(engine={engine!r}) is no longer a mode: scoring always goes through "
                                f"one Scorer. Pass scorer=judge.testing.Reference(model, tokenizer) for the "
                                f"reference, or leave it out for judge.engine.Engine.")
        engine = None
    if given is not None and engine is not None:
        raise DecisionError("Decider got both scorer= and engine=; pass only scorer= (engine= is its old name).")
    if engine is not None:
        warnings.warn("Decider(engine=...) is the former name of scorer=...; engine= will be removed in 0.2.0.",
                      DeprecationWarning, stacklevel=4)
    given = given if given is not None else engine
    if given is None and model is not None and isinstance(model, Scorer):
        warnings.warn("A scorer passed as Decider's model is an older call; pass it as scorer=... (the model "
                      "argument takes a scorer no more from 0.2.0).", DeprecationWarning, stacklevel=4)
        given = model  # an already built scorer passed as the model (older calls)
    if given is None:
        return make_scorer(backend, model, tokenizer, device=device)
    if not isinstance(given, Scorer):
        missing = [m for m in ("setup", "encode", "option_ids", "score", "score_items", "last_usage_")
                   if not hasattr(given, m)]
        raise DecisionError(f"scorer must answer judge.engine.Scorer; {type(given).__name__} lacks {missing}. "
                            f"Pass a judge.engine.Engine or a judge.testing.Reference.")
    return given


def _name_of(model) -> str | None:
    if model is None:
        return None
    if isinstance(model, (str, os.PathLike)):
        return str(model)
    cfg = getattr(model, "config", None)
    return getattr(cfg, "_name_or_path", None) or type(model).__name__


def model_name_of(model, given=None) -> str:
    """The model's hub id, folder or class name; the packaged model's name when there is none.

    Parameters
    ----------
    model : str, os.PathLike, PreTrainedModel or None
    given : judge.engine.Scorer or None
        A scorer passed instead (an Engine keeps what it was built from in ``.model``, the reference in ``.model_``).

    Examples
    --------
    >>> model_name_of("HuggingFaceTB/SmolLM2-135M-Instruct"), model_name_of(None)
    ('HuggingFaceTB/SmolLM2-135M-Instruct', 'smollm2-135m-instruct')
    """
    name = _name_of(model)
    if name is None and given is not None and not isinstance(given, str):
        name = _name_of(given.model if hasattr(given, "model") else getattr(given, "model_", None))
    return name or "smollm2-135m-instruct"


def resolve_styles(style, chat: bool | None, has_template: bool) -> dict:
    """The prompt style of each question type, ``chat`` resolved against the tokenizer.

    Parameters
    ----------
    style : PromptStyle, dict of str to PromptStyle, or None
        One style for every type, or per type; missing types use `DEFAULT_STYLES`.
    chat : bool or None
        Force the chat template on or off for every type; None: as each style says.
    has_template : bool
        Whether the tokenizer has a chat template.

    Returns
    -------
    dict of str to PromptStyle

    Raises
    ------
    DecisionError
        The chat template asked for explicitly but missing; a style that is not a PromptStyle.

    Examples
    --------
    >>> resolve_styles(None, None, has_template=False)["score"].chat   # the default asks, the tokenizer cannot
    False
    >>> resolve_styles(None, True, has_template=False)
    Traceback (most recent call last):
    ...
    judge.decisions.questions.DecisionError: Decider asks for the chat template but the tokenizer has none; use chat=False or a PromptStyle with chat=False.
    """
    given = style
    if isinstance(given, PromptStyle):
        given = {t: given for t in DEFAULT_STYLES}
    elif given is None:
        given = {}
    elif not isinstance(given, Mapping) or set(given) - set(DEFAULT_STYLES) or \
            not all(isinstance(s, PromptStyle) for s in given.values()):
        raise DecisionError(f"style must be a PromptStyle or a dict {{type: PromptStyle}} with types among "
                            f"{sorted(DEFAULT_STYLES)}, got {given!r:.80}.")
    out = {}
    for t, default in DEFAULT_STYLES.items():
        s = given.get(t, default)
        want = s.chat if chat is None else bool(chat)
        explicit = chat is not None or t in given
        if want and not has_template:
            if explicit:
                raise DecisionError("Decider asks for the chat template but the tokenizer has none; use "
                                    "chat=False or a PromptStyle with chat=False.")
            want = False
        out[t] = dataclasses.replace(s, chat=want)
    return out


class FixedAfterInit:
    """Parameters fixed once an object is built: assigning one of ``FIXED`` after ``__init__`` raises.

    What the object sets up lazily from them (a scorer, a loaded profile, priors) then always follows
    them; to change one, build a new object. ``__init__`` ends with ``object.__setattr__(self, "_built", True)``.

    Examples
    --------
    >>> from judge.decisions import Decider
    >>> d = Decider(bias=None)
    >>> d.bias = "running"
    Traceback (most recent call last):
    ...
    AttributeError: Decider.bias is fixed once built (what it sets up follows it); build a new Decider(..., bias=...).
    """

    FIXED: tuple = ()

    def __setattr__(self, name, value):
        if name in self.FIXED and self.__dict__.get("_built"):
            cls = type(self).__name__
            raise AttributeError(f"{cls}.{name} is fixed once built (what it sets up follows it); build a new "
                                 f"{cls}(..., {name}=...).")
        object.__setattr__(self, name, value)
