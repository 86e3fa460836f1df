"""LoRA adapters trained on the exact label likelihood the engine scores.

:func:`train_lora` copies the classifier's model (the caller's model is never touched), injects
LoRA layers (``peft``, the ``adapt`` extra, imported here only) into the chosen linear modules and
trains them on the negative log-likelihood of the gold label, where each label's probability is
its exact sequence log-probability (:meth:`judge.engine.Engine.logprob_tensors`: the engine's own
tree pass, with autograd on) normalised over the K labels. A fraction of the training texts is
held out (stratified where every class has two examples); training stops when the held-out NLL
has not improved for ``patience`` epochs, and the best adapters are kept (the untrained ones,
i.e. zero-shot, when no epoch helped).

:class:`LoraAdapter` keeps only the adapters' matrices (``lora_A`` (r, in), ``lora_B`` (out, r)
per module) and merges them into a copy of the base model on first use (``W + alpha / r * B A``):
a plain transformers model, scored by a fresh engine exactly like any model (its self-check
included), so exactness holds on the adapted model; loading needs no ``peft``.

What it deliberately does not do: train the base weights, or run on the engine's causal
fallback (models whose attention the tree mask cannot express: train those another way).
"""

from __future__ import annotations

import copy
import inspect
import threading
import time
import weakref
from dataclasses import dataclass, field

import numpy as np

__all__ = ["LoraAdapter", "train_lora", "merge_into"]


def _need_peft():
    try:
        import peft
    except ImportError:
        raise ImportError("fit(method='lora') needs peft, which is not installed; run "
                          "pip install 'trie-judge[adapt]' (or pip install 'peft>=0.13').") from None
    return peft


def merge_into(model, arrays: dict, scaling: float):
    """A copy of ``model`` with the adapters merged into its weights: ``W + scaling * B @ A``.

    Parameters
    ----------
    model : transformers.PreTrainedModel
    arrays : dict
        ``"<module path>.lora_A"`` (r, in) and ``"<module path>.lora_B"`` (out, r) arrays.
    scaling : float
        ``alpha / rank``.

    Returns
    -------
    transformers.PreTrainedModel
        A new model (eval mode); ``model`` is unchanged.

    Examples
    --------
    >>> from judge.testing import tiny_pair
    >>> model, _ = tiny_pair()
    >>> a = {"model.layers.0.self_attn.q_proj.lora_A": np.ones((2, 64), np.float32),
    ...      "model.layers.0.self_attn.q_proj.lora_B": np.zeros((64, 2), np.float32)}
    >>> merged = merge_into(model, a, 2.0)
    >>> merged is model, bool((merged.model.layers[0].self_attn.q_proj.weight == model.model.layers[0].self_attn.q_proj.weight).all())
    (False, True)
    """
    import torch

    out = copy.deepcopy(model).eval()
    modules = dict(out.named_modules())
    names = sorted({k.rsplit(".", 1)[0] for k in arrays})
    for name in names:
        mod = modules.get(name)
        if mod is None or not hasattr(mod, "weight"):
            raise ValueError(f"The adapters name a module {name!r} that this model does not have; they were "
                             f"trained on another architecture.")
        A = torch.as_tensor(np.asarray(arrays[name + ".lora_A"]), dtype=mod.weight.dtype)
        B = torch.as_tensor(np.asarray(arrays[name + ".lora_B"]), dtype=mod.weight.dtype)
        if A.shape[1] != mod.weight.shape[1] or B.shape[0] != mod.weight.shape[0] or A.shape[0] != B.shape[1]:
            raise ValueError(f"adapter shapes for {name!r} ({tuple(A.shape)}, {tuple(B.shape)}) do not fit its "
                             f"weight {tuple(mod.weight.shape)}.")
        with torch.no_grad():
            mod.weight.add_((B @ A).to(mod.weight.device) * scaling)
    return out


def _inner_kwargs(clf) -> dict:
    """The classifier's constructor arguments (but labels, model, tokenizer), read from its attributes."""
    skip = {"self", "labels", "model", "tokenizer"}
    names = [p for p in inspect.signature(type(clf).__init__).parameters if p not in skip]
    return {p: getattr(clf, p) for p in names if hasattr(clf, p)}


def _settings(clf) -> tuple:
    """What the merged classifier is built from: the base model and tokenizer, and every option
    (``device``, ``backend``, ``batch_size``, ... : those ``fit`` survives included)."""
    kw = _inner_kwargs(clf)
    return (clf.model_, clf.tokenizer_, *sorted(kw.items(), key=lambda kv: kv[0]))


def _same(a, b) -> bool:
    """Settings equal: the same objects, or equal plain values (str, numbers, None, paths, torch devices)."""
    import os

    def eq(x, y):
        if isinstance(x, tuple) and isinstance(y, tuple) and len(x) == len(y):
            return all(eq(u, v) for u, v in zip(x, y))
        if x is y:
            return True
        plain = (str, bytes, int, float, os.PathLike)
        if isinstance(x, plain) or type(x).__name__ == "device":
            return type(x) is type(y) and x == y
        return False

    return eq(a, b)


@dataclass(frozen=True, eq=False)
class LoraAdapter:
    """Trained LoRA matrices and how to merge them.

    Parameters
    ----------
    rank : int
    alpha : float
    target_modules : tuple of str
    matrices : dict of str -> ndarray
        ``"<module path>.lora_A"`` (rank, in) and ``.lora_B`` (out, rank).
    report : dict
        Epochs, held-out NLL per epoch, the epoch kept, seconds.

    Examples
    --------
    >>> LoraAdapter(8, 16.0, ("q_proj",), {}).scaling
    2.0
    """

    rank: int
    alpha: float
    target_modules: tuple
    matrices: dict
    report: dict = field(default_factory=dict)
    _cache: dict = field(default_factory=dict, repr=False)
    kind = "lora"

    def __post_init__(self):
        self._cache["lock"] = threading.Lock()
        self._cache["built"] = weakref.WeakKeyDictionary()  # base classifier -> (its settings, merged classifier)
        for k, v in self.matrices.items():
            if not (k.endswith(".lora_A") or k.endswith(".lora_B")) or not np.all(np.isfinite(np.asarray(v))):
                raise ValueError(f"adapter array {k!r} is not a finite lora_A/lora_B matrix; fit again.")

    @property
    def scaling(self) -> float:
        return float(self.alpha) / int(self.rank)

    def __repr__(self):
        return (f"LoraAdapter(rank={self.rank}, alpha={self.alpha:g}, target_modules={list(self.target_modules)}, "
                f"matrices={len(self.matrices)})")

    def classifier(self, clf):
        """The classifier on the merged model: same labels, prompt, options.

        Built once per base classifier and its settings: changing ``device``, ``tokenizer``,
        ``backend`` (which ``fit`` survives), ``batch_size`` or any other option of ``clf``
        afterwards builds it again with the new settings.
        """
        with self._cache["lock"]:
            key = _settings(clf)
            got = self._cache["built"].get(clf)
            if got is None or not _same(got[0], key):  # the same class as clf, on the merged model
                self._cache["built"].pop(clf, None)  # the old merged copy goes before the new one is built
                merged = merge_into(clf.model_, self.matrices, self.scaling)
                hit = type(clf)(list(clf.labels), merged, tokenizer=clf.tokenizer_, **_inner_kwargs(clf))
                got = (key, hit)
                self._cache["built"][clf] = got
            return got[1]

    def decision_function(self, clf, texts, base_scores) -> np.ndarray:
        """Exact scores of the adapted model: (n, K) log-probabilities of each label."""
        return self.classifier(clf).decision_function(texts) if texts else base_scores(texts)

    def arrays(self) -> dict:
        """The arrays to save (safetensors): the matrices."""
        return dict(self.matrices)

    def config(self) -> dict:
        return {"kind": self.kind, "rank": self.rank, "alpha": self.alpha,
                "target_modules": list(self.target_modules), "report": self.report}


def _split(y, fraction, random_state):
    from sklearn.model_selection import train_test_split

    idx = np.arange(len(y))
    strat = y if np.bincount(y).max() >= 2 and np.min(np.bincount(y)[np.bincount(y) > 0]) >= 2 else None
    n_out = max(1, int(round(fraction * len(y))))
    if strat is not None and n_out < len(set(y.tolist())):
        strat = None  # too few held out to hold one of every class
    return train_test_split(idx, test_size=n_out, random_state=random_state, stratify=strat)


def _nll(eng, items, y, batch_size):
    import torch

    with torch.no_grad():
        lp = torch.stack(eng.logprob_tensors(items, batch_size=batch_size))
        return float(torch.nn.functional.cross_entropy(lp, torch.as_tensor(y), reduction="mean"))


def train_lora(clf, texts, y, *, rank=8, alpha=16.0, target_modules=("q_proj", "v_proj"), epochs=3, lr=5e-4,
               batch_size=8, validation_fraction=0.2, patience=1, random_state=0, callback=None) -> LoraAdapter:
    """Train LoRA adapters on the exact label likelihood, early-stopped on held-out texts.

    Parameters
    ----------
    clf : judge.Classifier
        Its model is copied; the copy gets the adapters.
    texts : list of str, length n
    y : ndarray of int, shape (n,)
    rank, alpha : int, float
        LoRA rank and scale (``alpha / rank`` multiplies ``B A``).
    target_modules : tuple of str
        Names of the linear modules to adapt (``q_proj``, ``v_proj`` on Llama-like models).
    epochs, lr, batch_size : training settings (AdamW).
    validation_fraction : float in (0, 1)
        Held out for early stopping.
    patience : int
        Epochs without held-out improvement before stopping.
    random_state : int
    callback : callable, optional
        Called with ``{"epoch", "step", "loss"}`` after every optimiser step (may raise to stop).

    Returns
    -------
    LoraAdapter

    Examples
    --------
    >>> from judge import Classifier
    >>> from judge.testing import tiny_pair
    >>> model, tok = tiny_pair()
    >>> clf = Classifier(["yes", "no"], model, tokenizer=tok)
    >>> ad = train_lora(clf, ["sure", "nope", "yes!", "never"] * 2, np.array([0, 1] * 4), rank=2, epochs=1)
    >>> sorted(ad.matrices)[0]
    'model.layers.0.self_attn.q_proj.lora_A'
    """
    import torch

    peft = _need_peft()
    from judge.engine import Engine
    from judge.label_paths import local_model, prompt_items

    t0 = time.perf_counter()
    c = clf.compiled_
    base = local_model(c.engine, "fit(method='lora')").model_
    have = {n.rsplit(".", 1)[-1] for n, _ in base.named_modules()}
    missing = sorted(set(target_modules) - have)
    if missing:
        raise ValueError(f"target_modules {missing} are not modules of this model; its linear layers include "
                         f"{sorted(n for n in have if n.endswith('proj'))[:8]}.")
    if c.label_seqs is None:
        raise ValueError(f"fit(method='lora') trains on the exact label likelihood, which the {c.method!r} path "
                         f"does not compute for every label; use method='exact' on the Classifier.")
    y = np.asarray(y, np.int64)
    items = prompt_items(c, list(texts))
    tr, va = _split(y, validation_fraction, random_state)
    torch.manual_seed(random_state)
    model = copy.deepcopy(base).eval()
    for p in model.parameters():
        p.requires_grad_(False)
    cfg = peft.LoraConfig(r=int(rank), lora_alpha=float(alpha), target_modules=list(target_modules),
                          lora_dropout=0.0, bias="none")
    model = peft.inject_adapter_in_model(cfg, model)
    lora = {n: p for n, p in model.named_parameters() if ".lora_" in n}
    for p in lora.values():
        p.requires_grad_(True)
    eng = Engine(model, c.engine.tokenizer_, device=clf.device, end_token=clf.end_token).setup()
    if eng.path_ != "tree":
        raise ValueError(f"fit(method='lora') needs the engine's tree pass; this model runs the exact fallback "
                         f"({eng.check_.get('reason')}).")
    opt = torch.optim.AdamW(list(lora.values()), lr=float(lr), weight_decay=0.0)
    vitems = [items[i] for i in va]

    def snapshot():
        return {n: p.detach().clone() for n, p in lora.items()}

    best, best_nll = snapshot(), _nll(eng, vitems, y[va], batch_size)
    history, best_epoch, bad, step = [best_nll], 0, 0, 0
    rng = np.random.default_rng(random_state)
    for epoch in range(1, int(epochs) + 1):
        order = tr[rng.permutation(len(tr))]
        for s in range(0, len(order), batch_size):
            batch = order[s:s + batch_size]
            lp = torch.stack(eng.logprob_tensors([items[i] for i in batch], batch_size=len(batch)))
            loss = torch.nn.functional.cross_entropy(lp, torch.as_tensor(y[batch]))
            opt.zero_grad()
            loss.backward()
            opt.step()
            step += 1
            if callback is not None:
                callback({"epoch": epoch, "step": step, "loss": float(loss.detach())})
        nll = _nll(eng, vitems, y[va], batch_size)
        history.append(nll)
        if nll < best_nll - 1e-6:
            best, best_nll, best_epoch, bad = snapshot(), nll, epoch, 0
        else:
            bad += 1
            if bad >= patience:
                break
    matrices = {}
    for n, t in best.items():  # model.layers.0.self_attn.q_proj.lora_A.default.weight -> ....q_proj.lora_A
        mod, kind = n.split(".lora_")
        matrices[f"{mod}.lora_{kind.split('.')[0]}"] = t.cpu().numpy().copy()
    report = {"n_train": int(len(tr)), "n_heldout": int(len(va)), "heldout_nll": history,
              "epoch_kept": best_epoch, "epochs_run": len(history) - 1, "steps": step,
              "seconds": time.perf_counter() - t0}
    return LoraAdapter(int(rank), float(alpha), tuple(target_modules), matrices, report)
