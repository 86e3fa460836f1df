"""The sentence embedder tuned on the user's labelled texts: one more candidate of ``fit``'s head.

* :func:`tune_embedder` — contrastive tuning of a sentence-transformers model on labelled texts:
  each text is paired with another text of its class, and sentence-transformers'
  ``MultipleNegativesRankingLoss`` pulls every pair together while pushing it from the other
  pairs of its batch (batches hold one text per class, so in-batch negatives are other classes).
  The FastFit/CPFT recipe; SetFit's cosine loss over sampled pairs reached a lower accuracy at
  about 7x the time on Banking77 at 4 per class (bench/results/tuned_embedder_select.json).
* :class:`TunedEncoder` — the tuned model as an encoder (``texts -> (n, d)``, L2-normalised), its
  weights saved as arrays beside the head's (safetensors, never pickled) and rebuilt offline from
  the packaged base model.

The choice between the frozen and the tuned embedder is :func:`judge.adaptation.fit_head_tuned`'s.

Why not ``SentenceTransformerTrainer`` (or ``setfit``)? Both need the ``datasets`` package and
set up a trainer per call; the head tunes the embedder once per fold plus once at the end, a
few dozen optimiser steps each, so the loop here is ten lines around sentence-transformers' own
loss and model.

What it deliberately does not do: tune the language model (``fit(method="lora")`` does) or fit
the head (:func:`judge.adaptation.head.fit_head` does, on the tuned features).
"""

from __future__ import annotations

import time

import numpy as np

__all__ = ["TUNE_DEFAULTS", "TunedEncoder", "pair_batches", "tune_embedder"]

#: Tuning settings: epochs over the texts, learning rate, texts per batch (each with its pair).
TUNE_DEFAULTS = {"epochs": 2, "lr": 2e-5, "batch_size": 32}


def _base_folder(base) -> str:
    from judge.encoders import SentenceEncoder, embedder_folder

    if isinstance(base, SentenceEncoder):
        base = base.model
    if not isinstance(base, str):
        raise TypeError(f"tuning needs a sentence-transformers model by name or folder ('minilm', a folder), got "
                        f"{type(base).__name__}; pass fit(..., embedder='minilm') or tune_embedder=False.")
    return str(embedder_folder(base))


def _load(base):
    try:
        from sentence_transformers import SentenceTransformer
    except ModuleNotFoundError as err:
        from judge.encoders import EMBED_EXTRA

        raise ModuleNotFoundError(f"Tuning the embedder needs sentence-transformers, which is not installed: "
                                  f"{EMBED_EXTRA}.") from err
    return SentenceTransformer(_base_folder(base), device="cpu")


def pair_batches(y, batch_size: int, rng) -> list[list[int]]:
    """One epoch's batches of text indices: shuffled, never two texts of one class in a batch.

    Examples
    --------
    >>> b = pair_batches([0, 0, 1, 1, 2], 2, np.random.default_rng(0))
    >>> sorted(i for x in b for i in x), all(len({[0, 0, 1, 1, 2][i] for i in x}) == len(x) for x in b)
    ([0, 1, 2, 3, 4], True)
    """
    y = np.asarray(y)
    pending, batches = list(rng.permutation(len(y))), []
    while pending:
        batch, seen, rest = [], set(), []
        for i in pending:
            if y[i] in seen or len(batch) == batch_size:
                rest.append(i)
            else:
                batch.append(int(i))
                seen.add(y[i])
        batches.append(batch)
        pending = rest
    return batches


class TunedEncoder:
    """A sentence embedder tuned on labelled texts: ``encoder(texts)`` is (n, d) float32, rows of unit norm.

    Parameters
    ----------
    base : str
        The model it was tuned from (``"all-MiniLM-L6-v2"`` or a folder): what :meth:`from_saved` loads
        before putting the tuned weights back.
    model : sentence_transformers.SentenceTransformer
    report : dict
        ``steps``, ``seconds``, ``stopped`` (True when ``max_seconds`` cut the tuning short).

    Examples
    --------
    >>> enc = tune_embedder("minilm", ["card lost", "lost my card", "rate?", "exchange rate"], [0, 0, 1, 1],
    ...                     epochs=1)
    >>> enc(["where is my card"]).shape, enc.spec["kind"], enc.report["steps"]  # 2 batches: one text per class
    ((1, 384), 'tuned', 2)
    """

    def __init__(self, base, model, report):
        self.base, self.model, self.report = str(base), model, dict(report)

    @property
    def spec(self) -> dict:
        """What is saved in the classifier's JSON (the weights go to the arrays: :meth:`arrays`)."""
        return {"kind": "tuned", "base": self.base, "report": self.report}

    def __call__(self, texts) -> np.ndarray:
        texts = [str(t) for t in texts]
        if not texts:
            dim = getattr(self.model, "get_embedding_dimension", None) or self.model.get_sentence_embedding_dimension
            return np.zeros((0, dim()), np.float32)
        return np.asarray(self.model.encode(texts, batch_size=64, normalize_embeddings=True, convert_to_numpy=True,
                                            show_progress_bar=False), np.float32)

    encode = __call__

    def arrays(self) -> dict:
        """The tuned weights by parameter name (float32 arrays)."""
        return {k: v.detach().cpu().numpy() for k, v in self.model.state_dict().items()}

    @classmethod
    def from_saved(cls, spec: dict, arrays: dict) -> TunedEncoder:
        """Rebuild from :attr:`spec` and :meth:`arrays`: the base model loaded offline, the tuned weights put back."""
        import torch

        model = _load(spec["base"])
        own = model.state_dict()
        if set(arrays) != set(own) or any(tuple(arrays[k].shape) != tuple(own[k].shape) for k in own):
            raise ValueError(f"the saved tuned embedder does not match its base {spec['base']!r} (other weights or "
                             f"shapes); fit again.")
        model.load_state_dict({k: torch.as_tensor(np.asarray(v)) for k, v in arrays.items()})
        model.eval()
        return cls(spec["base"], model, spec.get("report") or {})

    def __repr__(self):
        return f"TunedEncoder(base={self.base!r}, steps={self.report.get('steps')})"


def tune_embedder(base, texts, y, *, epochs=TUNE_DEFAULTS["epochs"], lr=TUNE_DEFAULTS["lr"],
                  batch_size=TUNE_DEFAULTS["batch_size"], random_state=0, max_seconds=None,
                  progress=False) -> TunedEncoder:
    """Tune a copy of a sentence embedder on labelled texts (contrastive, in-batch negatives).

    Parameters
    ----------
    base : str or judge.encoders.SentenceEncoder
        ``"minilm"`` (the packaged all-MiniLM-L6-v2) or a sentence-transformers folder. It is not
        changed: a fresh copy is loaded and tuned.
    texts : sequence of str, length n
    y : sequence of int, length n
        Class indices. A class with one text is paired with itself (it is still pushed away from the
        other classes).
    epochs, lr, batch_size : as :data:`TUNE_DEFAULTS`
    random_state : int
        Seeds the batches, the pairs and dropout; the global torch random state is left as it was.
    max_seconds : float, optional
        Stop after the step that crosses this many seconds (``report["stopped"]`` says so).
    progress : bool
        A progress bar over the steps.

    Returns
    -------
    TunedEncoder

    Examples
    --------
    >>> enc = tune_embedder("minilm", ["card lost", "lost my card", "rate?", "exchange rate"], [0, 0, 1, 1],
    ...                     epochs=1, max_seconds=60)
    >>> enc.report["stopped"], enc(["card"]).dtype
    (False, dtype('float32'))
    """
    import torch

    try:  # sentence-transformers >= 5.3 moved the losses; the old path warns there
        from sentence_transformers.sentence_transformer import losses
    except ImportError:
        from sentence_transformers import losses

    texts = [str(t) for t in texts]
    y = np.asarray(y, dtype=np.int64)
    if len(texts) != len(y) or len(texts) < 2:
        raise ValueError(f"tune_embedder needs at least 2 texts and one class per text, got {len(texts)} texts and "
                         f"{len(y)} classes.")
    start = time.perf_counter()
    model = _load(base)
    rng = np.random.default_rng(random_state)
    by_class = {c: np.flatnonzero(y == c) for c in np.unique(y)}
    plan = [b for _ in range(int(epochs)) for b in pair_batches(y, int(batch_size), rng) if len(b) > 1]
    loss = losses.MultipleNegativesRankingLoss(model)
    encode = getattr(model, "preprocess", None) or model.tokenize  # preprocess: sentence-transformers >= 5
    opt = torch.optim.AdamW(model.parameters(), lr=float(lr))
    steps, stopped = 0, False
    bar = None
    if progress:
        from tqdm.auto import tqdm

        bar = tqdm(total=len(plan), desc="tuning the embedder", unit="step")
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(random_state)
        model.train()
        for batch in plan:
            pos = [int(rng.choice(by_class[y[i]][by_class[y[i]] != i])) if len(by_class[y[i]]) > 1 else i
                   for i in batch]
            value = loss([encode([texts[i] for i in batch]), encode([texts[i] for i in pos])], None)
            value.backward()
            opt.step()
            opt.zero_grad()
            steps += 1
            if bar is not None:
                bar.update(1)
            if max_seconds is not None and time.perf_counter() - start > max_seconds:
                stopped = True
                break
        model.eval()
    if bar is not None:
        bar.close()
    name = base.model if hasattr(base, "model") else str(base)
    return TunedEncoder(name, model, {"steps": steps, "seconds": round(time.perf_counter() - start, 3),
                                      "stopped": stopped, "texts": len(texts)})
