"""What the vLLM backend needs without vLLM: the engine's tokenization on a weightless model, the checks.

A private module of `judge.backends` (`judge.backends.vllm` is its public face): importing it
imports no vLLM, so the main environment can check a Classifier and say clearly what is missing.
"""

from __future__ import annotations

import functools
import warnings

__all__ = ["model_path", "refuse_forward", "front", "import_vllm", "check_classifier"]


def model_path(model) -> str:
    from judge.models import packaged_model_dir

    try:  # None or a packaged model's name: its converted folder
        return str(packaged_model_dir(*(() if model is None else (str(model),))))
    except ValueError:  # a hub id or a folder
        return str(model)


def refuse_forward(path, module, args):
    """Forward pre-hook of the weightless copy: running it is a mistake; say which and what to do."""
    raise RuntimeError(
        f"Something tried to run {type(module).__name__} of the weightless (meta-device) copy of {path} that "
        f"backend='vllm' keeps only for tokenization: vLLM holds the weights in its own engine, so nothing "
        f"that needs the transformers model itself (Classifier.fit(), a fitted classifier's scores, the "
        f"shortlist's model encoder, think, decode, judge.testing's reference) can run on this backend; "
        f"use backend='transformers' for it.")


@functools.lru_cache(maxsize=8)
def front(path: str, tokenizer_path: str):
    """An Engine over a weightless (meta-device) copy of the model: the engine's own tokenization.

    Its ``encode``, ``option_ids``, ``vocab_`` and ``end_id_`` are those of ``Engine(path)``; it
    never runs the model (no weights are loaded): every module's forward raises a RuntimeError
    that says so (:func:`refuse_forward`) rather than failing obscurely on meta tensors.
    """
    import torch
    from transformers import AutoConfig, AutoModelForCausalLM, AutoTokenizer, GenerationConfig

    from judge.engine.engine import Engine, EngineCheckWarning

    tok = AutoTokenizer.from_pretrained(tokenizer_path)
    cfg = AutoConfig.from_pretrained(path)
    with torch.device("meta"):
        model = AutoModelForCausalLM.from_config(cfg)
    for module in model.modules():  # whatever tries to run it (fit, a fitted head...) is told why it cannot
        module.register_forward_pre_hook(functools.partial(refuse_forward, path))
    try:
        model.generation_config = GenerationConfig.from_pretrained(path)
    except (OSError, ValueError):  # no generation_config.json: the config's own (as from_pretrained does)
        pass
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", EngineCheckWarning)  # the mask plan is irrelevant: it never runs
        return Engine(model, tok, check=False).setup()


def import_vllm():
    """``import vllm``, or an ImportError saying where vLLM lives and how to build that environment."""
    import sys

    try:
        import vllm
    except ImportError as err:
        raise ImportError(
            f"backend='vllm' needs vLLM, which does not import in this Python ({sys.executable}): {err}. "
            f"vLLM lives in its own environment (it pins versions the main one cannot share): build it "
            f"with `bash scripts/setup_vllm.sh` (add --cuda on a GPU machine; it creates .venv-vllm), "
            f"then run with `.venv-vllm/bin/python`; or use backend='transformers' here.",
            name="vllm") from err
    return vllm


def check_classifier(clf, *, fit=None) -> None:
    """Refuse what a Classifier cannot do on the vLLM backend (they need the transformers model).

    vLLM keeps the weights in its own engine; this process holds only a weightless copy of the
    model for tokenization, on which nothing can run.

    Parameters
    ----------
    clf : judge.Classifier or judge.compiled.LabelSpec (what it asks for: think, method, shortlist)
    fit : str, optional
        The ``method`` of a ``fit()`` about to run: refused (fitting runs the model's states or
        weights).

    Raises
    ------
    ValueError
        ``think=True``, ``method="decode"``, a shortlist embedded by the model itself, a fitted
        ``adaptation_`` (from ``fit()`` or a loaded folder), or ``fit``.

    Examples
    --------
    >>> from types import SimpleNamespace as C
    >>> check_classifier(C(think=False, method="exact", shortlist=None, shortlist_encoder=None))
    >>> check_classifier(C(think=True, method="exact", shortlist=None, shortlist_encoder=None))
    Traceback (most recent call last):
    ...
    ValueError: backend='vllm' scores labels through vLLM prompt log-probabilities; think=True needs the transformers model itself; use backend='transformers' for it.
    >>> check_classifier(C(think=False, method="exact", shortlist=None, shortlist_encoder=None,
    ...                    adaptation_=C(kind="head")))
    Traceback (most recent call last):
    ...
    ValueError: backend='vllm' scores labels through vLLM prompt log-probabilities; this Classifier carries a fitted head (adaptation_, from fit() or a loaded folder), whose scores need the transformers model itself (vLLM keeps the weights in its own engine); use backend='transformers' for it, or a Classifier that was not fitted for zero-shot scores on vLLM.
    """
    lead = "backend='vllm' scores labels through vLLM prompt log-probabilities"
    if fit is not None:
        raise ValueError(f"{lead}; fit(method={fit!r}) needs the transformers model itself (its hidden states or "
                         f"weights), which vLLM keeps in its own engine; fit, and score the fitted classifier, "
                         f"with backend='transformers'.")
    what = ("think=True" if clf.think else "method='decode'" if clf.method == "decode" else
            "shortlist_encoder='model'" if clf.shortlist is not None and clf.shortlist_encoder == "model"
            else None)
    if what:
        alt = " (or shortlist_encoder='tfidf')" if what.startswith("shortlist") else ""
        raise ValueError(f"{lead}; {what} needs the transformers model itself; use backend='transformers'{alt} "
                         f"for it.")
    ad = getattr(clf, "adaptation_", None)
    if ad is not None:
        raise ValueError(f"{lead}; this Classifier carries a fitted {getattr(ad, 'kind', type(ad).__name__)} "
                         f"(adaptation_, from fit() or a loaded folder), whose scores need the transformers model "
                         f"itself (vLLM keeps the weights in its own engine); use backend='transformers' for it, "
                         f"or a Classifier that was not fitted for zero-shot scores on vLLM.")
