"""Saving and loading classifiers: JSON plus safetensors, validated, never pickle.

A saved classifier is a folder with ``classifier.json`` (labels, prompt,
options, the model *reference*, calibration scalars and report) and, when
calibrated, ``calibration.safetensors`` (bias, calibration probabilities and
labels). The fitted arrays are bound to the labels they were fitted for: the label
list is stored in the safetensors metadata, so a ``classifier.json`` whose labels
were edited consistently (reordered or renamed everywhere) is refused, naming both
lists. Loading validates every field and names the one that is wrong: a
reordered label list, a NaN or non-positive temperature, a threshold outside
[0, 1], arrays of the wrong shape, missing keys. A model that exists only in
memory cannot be referenced: saving refuses unless ``model_ref=`` is given,
and relative model folders are stored relative to the save folder.

What it deliberately does not do: save model weights.
"""

from __future__ import annotations

import json
import math
import os
from dataclasses import asdict
from pathlib import Path

import numpy as np

from judge.calibration.state import Calibration
from judge.fusion import is_fused
from judge.parameters import PARAMS
from judge.prompts import PromptTemplate

__all__ = ["save_classifier", "load_classifier", "FORMAT_VERSION", "LEGACY_DEFAULTS", "CODECS"]

FORMAT_VERSION = 2
_KEYS = ("format", "version", "labels", "model", "method", "prompt", "label_names", "batch_size",
         "batch_invariant", "think", "think_tokens", "top_k", "decode_above", "end_token", "calibration")


def _model_reference(clf, directory: Path, model_ref):
    ref = clf.model if model_ref is None else model_ref
    if ref is not None and not isinstance(ref, (str, os.PathLike)):
        raise ValueError(
            f"This classifier holds a model object ({type(ref).__name__}), which cannot be saved by "
            f"reference; pass model_ref='<hub id or folder>' to save(), and model=... to load() if needed.")
    if ref is None:
        return {"kind": "packaged", "value": None}
    p = Path(ref).expanduser()
    if p.exists():
        p = p.resolve()
        try:
            return {"kind": "path", "value": os.path.relpath(p, directory.resolve())}
        except ValueError:  # another drive
            return {"kind": "path", "value": str(p)}
    return {"kind": "name", "value": str(ref)}


def _shortlist_reference(spec):
    """The shortlist's encoders as JSON (names, a list or a mapping of names to weights); objects cannot be saved."""
    names = list(spec) if isinstance(spec, (list, tuple, dict)) else [spec]
    if spec is None or all(isinstance(n, str) for n in names):
        return {str(k): float(v) for k, v in spec.items()} if isinstance(spec, dict) else \
            (list(spec) if isinstance(spec, (list, tuple)) else spec)
    raise ValueError(f"This classifier's shortlist_encoder ({spec!r:.60}) cannot be saved by reference; build it with "
                     f"encoder names ('tfidf', 'minilm', 'model', a sentence-transformers folder), a list of them or "
                     f"a mapping of them to weights before save().")


def _embedder_reference(embedder):
    """The embedder as JSON (a name, or an encoder's spec); an unnamed callable cannot be saved."""
    if embedder is None or isinstance(embedder, str):
        return embedder
    spec = getattr(embedder, "spec", None)
    if isinstance(spec, dict) and spec.get("kind") == "sentence":
        return spec
    raise ValueError(f"This classifier's embedder ({type(embedder).__name__}) cannot be saved by reference; build it "
                     f"with embedder='minilm', a sentence-transformers folder, or a SentenceEncoder before save().")


def _encode_labels(clf, name, d, model_ref):
    return {"labels": list(clf.labels), "descriptions": clf.descriptions}


def _encode_model(clf, name, d, model_ref):
    return {"model": _model_reference(clf, d, model_ref)}


def _encode_prompt(clf, name, d, model_ref):
    prompt = clf.prompt
    return {"prompt": {"template": asdict(prompt)} if isinstance(prompt, PromptTemplate) else prompt}


def _encode_label_names(clf, name, d, model_ref):
    names = clf.label_names
    return {"label_names": {"mapping": names} if isinstance(names, dict) else names}


#: How each ``saved`` kind of :data:`judge.parameters.PARAMS` is written: (clf, name, folder, model_ref) -> fields.
_ENCODE = {
    "json": lambda clf, name, d, model_ref: {name: getattr(clf, name)},
    "labels": _encode_labels,
    "model": _encode_model,
    "prompt": _encode_prompt,
    "label_names": _encode_label_names,
    "embedder": lambda clf, name, d, model_ref: {name: _embedder_reference(clf.embedder)},
    "encoders": lambda clf, name, d, model_ref: {name: _shortlist_reference(clf.shortlist_encoder)},
}


def _decode_labels(labels, cfg, d, path):
    descriptions = cfg.get("descriptions")
    if descriptions is not None:
        if not isinstance(descriptions, dict) or list(descriptions) != list(labels):
            raise ValueError(f"{path}: field 'descriptions' should map the labels, in their order, to descriptions; "
                             f"got {descriptions!r:.80}.")
        return descriptions
    return labels


def _decode_model(ref, cfg, d, path):
    kind, value = (ref.get("kind"), ref.get("value")) if isinstance(ref, dict) else (None, None)
    if kind == "packaged":
        return None
    if kind == "path" and isinstance(value, str):
        return str((d / value).resolve()) if not os.path.isabs(value) else value
    if kind == "name" and isinstance(value, str):
        return value
    raise ValueError(f"{path}: field 'model' is malformed ({ref!r}); expected kind packaged, path or name.")


def _decode_prompt(prompt, cfg, d, path):
    if isinstance(prompt, dict):
        try:
            return PromptTemplate(**prompt["template"])
        except (KeyError, TypeError) as err:
            raise ValueError(f"{path}: field 'prompt' is malformed ({err}).") from None
    return prompt


def _as_saved(value, cfg, d, path):
    return value


#: How each ``saved`` kind is read back: (value, the whole config, folder, classifier.json's path) -> value.
_DECODE = {
    "json": _as_saved,
    "labels": _decode_labels,
    "model": _decode_model,
    "prompt": _decode_prompt,
    "label_names": lambda names, cfg, d, path: names.get("mapping") if isinstance(names, dict) else names,
    "embedder": _as_saved,
    "encoders": _as_saved,
}

#: A parameter missing from a folder saved before it existed reads this value, not today's default:
#: classifiers saved before the embedder existed answered with the LM alone.
LEGACY_DEFAULTS = {"embedder": None}

#: The ``saved`` kinds this module writes and reads (a test checks every parameter's kind is here).
CODECS = tuple(sorted(set(_ENCODE) & set(_DECODE)))


def save_classifier(clf, directory, *, model_ref=None) -> Path:
    """Write ``clf`` to ``directory`` (created); returns the folder.

    Parameters
    ----------
    clf : judge.Classifier
    directory : str or Path
    model_ref : str, optional
        Where the model can be loaded from, for a classifier built on an in-memory model.

    Examples
    --------
    >>> import tempfile
    >>> from judge import Classifier
    >>> from judge.testing import tiny_pair
    >>> model, tok = tiny_pair()
    >>> folder = save_classifier(Classifier(["yes", "no"], model, tokenizer=tok), tempfile.mkdtemp(),
    ...                          model_ref="my-org/my-model")
    >>> sorted(p.name for p in folder.iterdir())
    ['classifier.json']
    """
    from safetensors.numpy import save_file

    d = Path(_check_directory(directory, "save"))
    d.mkdir(parents=True, exist_ok=True)
    config = {"format": "trie-judge-classifier", "version": FORMAT_VERSION}
    for p in PARAMS:  # every saved parameter, by its codec (judge.parameters: a test checks none is missing)
        if p.saved is not None:
            config.update(_ENCODE[p.saved](clf, p.name, d, model_ref))
    config["fusion"] = None if clf.fusion_ is None else [clf.fusion_.weight, clf.fusion_.temperature]
    config["calibration"] = None
    cal = clf.calibration_
    if cal is not None:
        config["calibration"] = {"labels": list(cal.labels), "temperature": cal.temperature,
                                 "threshold": cal.threshold, "bias_method": cal.bias_method,
                                 "report": cal.report, "has_bias": cal.bias is not None}
        arrays = {"calib_proba": np.ascontiguousarray(cal.proba, np.float64),
                  "calib_y": np.ascontiguousarray(cal.y, np.int64)}
        if cal.bias is not None:
            arrays["bias"] = np.ascontiguousarray(cal.bias, np.float64)
        tmp = d / "calibration.safetensors.tmp"
        save_file(arrays, str(tmp), metadata={"labels": json.dumps(list(cal.labels), ensure_ascii=False)})
        tmp.replace(d / "calibration.safetensors")
    tr = getattr(clf, "transduction_", None)
    config["transduction"] = None if tr is None else tr.config()
    if tr is not None:  # what adapt() learnt from unlabelled texts: the moved label vectors
        tmp = d / "transduction.safetensors.tmp"
        save_file({"label_vectors": np.ascontiguousarray(tr.label_vectors, np.float64)}, str(tmp),
                  metadata={"labels": json.dumps(list(clf.labels), ensure_ascii=False)})
        tmp.replace(d / "transduction.safetensors")
    ad = getattr(clf, "adaptation_", None)
    config["adaptation"] = None if ad is None else ad.config()
    if ad is not None:  # what fit() learned: the head's weights, the adapters' matrices, the demonstrations
        tmp = d / "adaptation.safetensors.tmp"
        save_file({k: np.ascontiguousarray(v) for k, v in ad.arrays().items()}, str(tmp),
                  metadata={"labels": json.dumps(list(clf.labels), ensure_ascii=False)})
        tmp.replace(d / "adaptation.safetensors")
    ml = getattr(clf, "multilabel_", None)
    config["multilabel"] = None if ml is None else ml.config()
    if ml is not None:  # multi_label=True: the one-vs-rest head and the per-label calibration
        tmp = d / "multilabel.safetensors.tmp"
        save_file(ml.arrays(), str(tmp), metadata={"labels": json.dumps(list(clf.labels), ensure_ascii=False)})
        tmp.replace(d / "multilabel.safetensors")
    tmp = d / "classifier.json.tmp"
    tmp.write_text(json.dumps(config, indent=2, ensure_ascii=False))
    tmp.replace(d / "classifier.json")
    return d


def _check_directory(directory, verb: str):
    """``directory`` if it is a str or PathLike, else a TypeError naming what was given."""
    if not isinstance(directory, (str, os.PathLike)):
        raise TypeError(f"Classifier.{verb}() takes a folder path (str or pathlib.Path), got "
                        f"{type(directory).__name__} {directory!r:.40}; e.g. {'clf' if verb == 'save' else 'Classifier'}.{verb}"
                        f"('my-classifier').")
    return directory


def _need(cfg, key, path, types):
    if key not in cfg:
        raise ValueError(f"{path} lacks the field {key!r}; it was not written by Classifier.save() of this version.")
    v = cfg[key]
    if types is not None and not isinstance(v, types):
        raise ValueError(f"{path}: field {key!r} should be {types}, got {type(v).__name__} ({v!r:.60}).")
    return v


def load_classifier(cls, directory, *, model=None, tokenizer=None, device=None):
    """Read a folder written by :func:`save_classifier`, validating every field.

    Examples
    --------
    >>> import tempfile
    >>> from judge import Classifier
    >>> from judge.testing import tiny_pair
    >>> model, tok = tiny_pair()
    >>> folder = save_classifier(Classifier(["yes", "no"], model, tokenizer=tok), tempfile.mkdtemp(),
    ...                          model_ref="my-org/my-model")
    >>> load_classifier(Classifier, folder, model=model, tokenizer=tok).labels
    ['yes', 'no']
    """
    from safetensors.numpy import load_file

    d = Path(_check_directory(directory, "load"))
    path = d / "classifier.json"
    if not path.exists():
        raise FileNotFoundError(f"{path} does not exist; pass the directory given to Classifier.save().")
    try:
        cfg = json.loads(path.read_text(encoding="utf-8"))
    except json.JSONDecodeError as err:
        raise ValueError(f"{path} is not valid JSON ({err}); was it written by Classifier.save()?") from None
    if not isinstance(cfg, dict) or cfg.get("format") != "trie-judge-classifier" \
            or cfg.get("version") != FORMAT_VERSION:
        got = (cfg.get("format"), cfg.get("version")) if isinstance(cfg, dict) else type(cfg).__name__
        raise ValueError(f"{path} is not a trie-judge classifier of format version {FORMAT_VERSION} (got {got}).")
    for k in _KEYS:
        _need(cfg, k, path, None)
    labels = _need(cfg, "labels", path, list)
    given = {}
    for p in PARAMS:
        if p.saved is not None:
            value = cfg.get(p.name, LEGACY_DEFAULTS.get(p.name, p.default))
            given[p.name] = _DECODE[p.saved](value, cfg, d, path)
    given.update(tokenizer=tokenizer, device=device)
    if model is not None:
        given["model"] = model
    try:
        clf = cls(**given)
    except (ValueError, TypeError) as err:
        raise type(err)(f"{path}: {err}") from None
    fusion = cfg.get("fusion")
    if fusion is not None and clf.embedder is not None:
        from judge.fusion import Fusion

        try:
            fusion = Fusion(float(fusion[0]), float(fusion[1]))
        except (TypeError, ValueError, IndexError) as err:
            raise ValueError(f"{path}: field 'fusion' should be [weight, temperature], got {fusion!r} ({err}).") from None
        if clf.fusion_ is None and fusion.weight > 0:  # saved beside the embedder, which is not here now
            from judge.encoders import EMBED_EXTRA

            raise ValueError(f"{path}: this classifier was saved fusing the language model with a sentence embedder "
                             f"(weight {fusion.weight}), which cannot run here; its answers would differ. "
                             f"{EMBED_EXTRA}.")
        object.__setattr__(clf, "fusion_", fusion)
    tr = cfg.get("transduction")
    if tr:
        _load_transduction(clf, d, tr, labels)
    cal = cfg["calibration"]
    if cal:
        if not isinstance(cal, dict):
            raise ValueError(f"{path}: field 'calibration' should be an object, got {type(cal).__name__}.")
        for k in ("labels", "temperature", "threshold", "report", "has_bias"):
            _need(cal, k, f"{path} (calibration)", None)
        if list(cal["labels"]) != list(labels):
            raise ValueError(
                f"{path}: the calibration was fitted for the labels in another order or another set "
                f"(calibration labels {cal['labels'][:4]}..., classifier labels {labels[:4]}...); the bias "
                f"would be applied to the wrong labels. Refit with calibrate().")
        T, th = cal["temperature"], cal["threshold"]
        if T is not None and not (isinstance(T, (int, float)) and math.isfinite(T) and T > 0):
            raise ValueError(f"{path}: calibration temperature must be a finite number > 0, got {T!r}.")
        f = d / "calibration.safetensors"
        if not f.exists():
            raise FileNotFoundError(f"{f} is missing; it holds the calibration arrays written by save().")
        arrays = load_file(str(f))
        _check_bound_labels(f, labels, "calibration")
        for k in ("calib_proba", "calib_y"):
            if k not in arrays:
                raise ValueError(f"{f} lacks the array {k!r}.")
        if bool(cal["has_bias"]) != ("bias" in arrays):
            raise ValueError(f"{f}: the bias array is {'missing' if cal['has_bias'] else 'unexpected'}.")
        try:
            obj = Calibration(tuple(labels), arrays.get("bias"), T, th, arrays["calib_proba"], arrays["calib_y"],
                              cal["report"], cal.get("bias_method"))
        except ValueError as err:
            raise ValueError(f"{path}: {err}") from None
        object.__setattr__(clf, "calibration_", obj)
    ad = cfg.get("adaptation")  # absent in folders saved before fit() existed
    if ad:
        from judge.adaptation import from_saved

        f = d / "adaptation.safetensors"
        if not f.exists():
            raise FileNotFoundError(f"{f} is missing; it holds what fit() learned, written by save().")
        arrays = load_file(str(f))
        _check_bound_labels(f, labels, "adaptation")
        try:
            object.__setattr__(clf, "adaptation_", from_saved(ad, arrays, len(labels)))
        except ValueError as err:
            raise ValueError(f"{path}: {err}") from None
    ml = cfg.get("multilabel")  # absent in folders saved before multi_label existed
    if ml:
        from judge.multilabel import MultiLabelFit

        f = d / "multilabel.safetensors"
        if not f.exists():
            raise FileNotFoundError(f"{f} is missing; it holds the multi-label fit and calibration written by save().")
        arrays = load_file(str(f))
        _check_bound_labels(f, labels, "multi-label fit")
        try:
            object.__setattr__(clf, "multilabel_", MultiLabelFit.from_saved(ml, arrays, len(labels)))
        except ValueError as err:
            raise ValueError(f"{path}: {err}") from None
    return clf


def _check_bound_labels(f: Path, labels, what: str) -> None:
    """Refuse arrays fitted for other labels than ``labels`` (the list saved in their safetensors metadata).

    ``what``: ``"calibration"`` (``calibrate``'s bias and probabilities) or ``"adaptation"`` (what
    ``fit`` learned); it words the error.
    """
    import warnings

    from safetensors import safe_open

    with safe_open(str(f), framework="np") as sf:
        meta = sf.metadata() or {}
    if "labels" not in meta:
        warnings.warn(f"{f} was written before the fitted arrays were bound to their labels: the label order "
                      f"cannot be checked; save the classifier again to bind them.", UserWarning, stacklevel=3)
        return
    try:
        bound = json.loads(meta["labels"])
    except json.JSONDecodeError:
        bound = None
    if bound == list(labels):
        return
    if what == "calibration":
        raise ValueError(f"{f}: the calibration arrays were fitted for the labels {bound!r}, but classifier.json "
                         f"lists {list(labels)!r}; the bias would be applied to the wrong labels. Restore the "
                         f"saved label list, or refit with calibrate() and save again.")
    raise ValueError(f"{f}: what fit() learned (its head weights, adapters or demonstrations) was fitted for the "
                     f"labels {bound!r}, but classifier.json lists {list(labels)!r}; its scores would go to the "
                     f"wrong labels. Restore the saved label list, or fit() again and save.")


def fingerprint(clf) -> str:
    """SHA-256 of everything that changes a classifier's scores (see ``Classifier.fingerprint``)."""
    import hashlib

    from judge.models import weights_fingerprint

    c = clf.compiled_
    spec = {"labels": list(clf.labels), "surfaces": c.surfaces, "prefix": c.prefix, "tail": c.tail,
            "method": c.method, "seqs": c.label_seqs, "think": [c.think, c.think_tokens],
            "top_k": clf.top_k, "path": c.engine.path_, "model": weights_fingerprint(c.engine.model_),
            "rotated": [r.prefix for r in c.rotated or ()]}
    ad = getattr(clf, "adaptation_", None)
    if ad is not None:  # what fit() learned changes every score; its report (timings, CV tables) changes none
        spec_ad = {k: v for k, v in ad.config().items() if k != "report"}
        h = hashlib.sha256(json.dumps(spec_ad, sort_keys=True, default=str).encode())
        for k, v in sorted(ad.arrays().items()):
            h.update(k.encode() + np.ascontiguousarray(v).tobytes())
        spec["adaptation"] = h.hexdigest()
    ml = getattr(clf, "multilabel_", None)
    if clf.multi_label:  # a multi-label classifier's logits: the zero-shot weights and what fit()/calibrate() fitted
        from judge.multilabel import ZERO_SHOT_THRESHOLD, ZERO_SHOT_WEIGHTS

        h = hashlib.sha256(json.dumps([ZERO_SHOT_WEIGHTS, ZERO_SHOT_THRESHOLD], sort_keys=True).encode())
        for k, v in sorted(({} if ml is None else ml.arrays()).items()):
            h.update(k.encode() + np.ascontiguousarray(v).tobytes())
        spec["multilabel"] = h.hexdigest()
    if is_fused(clf.fusion_):  # the embedder's side changes every score too (LM-alone keys unchanged)
        f, tr = clf.fusion_, getattr(clf, "transduction_", None)
        try:
            ref = _embedder_reference(clf.embedder_)
        except ValueError:  # an unnamed callable: its type is all a key can say
            ref = type(clf.embedder_).__qualname__
        spec["fusion"] = [f.weight, f.temperature, ref, clf.descriptions,
                          None if tr is None else hashlib.sha256(np.ascontiguousarray(tr.label_vectors).tobytes()).hexdigest()]
    return hashlib.sha256(json.dumps(spec, sort_keys=True, default=str).encode()).hexdigest()


def _load_transduction(clf, d, cfg, labels):
    """Set ``transduction_`` from ``transduction.safetensors`` (what ``adapt`` learnt), checked."""
    from safetensors.numpy import load_file

    from judge.transductive import DEFAULT_ROUNDS, DEFAULT_STEP, Transduction

    f = d / "transduction.safetensors"
    if not f.exists():
        raise FileNotFoundError(f"{f} is missing; it holds the label vectors adapt() learnt (written by save()).")
    _check_bound_labels(f, labels, "transduction")
    L = load_file(str(f)).get("label_vectors")
    if L is None or L.ndim != 2 or len(L) != len(labels) or not np.isfinite(L).all():
        raise ValueError(f"{f}: 'label_vectors' should be a finite ({len(labels)}, d) array, got "
                         f"{None if L is None else L.shape}; delete the folder's transduction files or adapt() again.")
    if not isinstance(cfg, dict):
        raise ValueError(f"{d / 'classifier.json'}: field 'transduction' should be an object, got {cfg!r:.60}.")
    object.__setattr__(clf, "transduction_", Transduction(L, int(cfg.get("rounds", DEFAULT_ROUNDS)),
                                                          float(cfg.get("step", DEFAULT_STEP)), int(cfg.get("n_texts", 0))))
