"""Features of the frozen model for a fitted head: the hidden state at the answer slot, and text embeddings.

* :func:`answer_states` — the last layer's hidden state (after the final norm: what the LM head
  reads) at the answer slot of each text's prompt, i.e. at the prompt's last token, where the
  label's first token is predicted. The prompts are the classifier's own token items
  (:func:`judge.scorers.prompt_items`: tokenized whole, by the engine), so the head sees exactly
  the prompt the labels are scored after. One plain forward pass of the decoder per batch, no
  label tree: on SmolLM2-135M about a quarter of the cost of exact scoring over Banking77's 77
  labels. The instructions' keys/values (the compiled ``root_ids``) are computed once per model
  and reused, as the engine does for scoring.
* :func:`text_embeddings` — the mean of the last layer over the tokens of the text alone (no
  prompt): the SetFit-style embedding the baselines' logistic regression uses.

What it deliberately does not do: score labels (the engine does) or tokenize (the engine's
``encode`` and ``prompt_items`` do).
"""

from __future__ import annotations

import threading
import weakref

import numpy as np

__all__ = ["answer_states", "text_embeddings", "states_of_prompts"]

_ROOTS: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()  # model -> {root ids: key/values}
_ROOTS_LOCK = threading.Lock()


def _root_kv(model, decoder, root: tuple):
    import torch
    from transformers import DynamicCache

    from judge._math import cache_keyword

    with _ROOTS_LOCK:
        hit = _ROOTS.setdefault(model, {}).get(root)
    if hit is not None:
        return hit
    cache = DynamicCache()
    x = torch.tensor([list(root)], dtype=torch.long, device=model.device)
    with torch.inference_mode():
        decoder(input_ids=x, use_cache=True, **{cache_keyword(decoder): cache})
    kv = [(layer.keys, layer.values) for layer in cache.layers]
    with _ROOTS_LOCK:
        store = _ROOTS.setdefault(model, {})
        if len(store) > 8:
            store.clear()
        store[root] = kv
    return kv


def _last_states(model, decoder, seqs, root, kv, batch_size):
    """Final-layer state at the last token of each ``root + seq``: (n, d) float64 (seqs sorted by caller)."""
    import torch
    from transformers import DynamicCache

    from judge._math import cache_keyword

    R = len(root)
    dev = model.device
    out = []
    for s in range(0, len(seqs), batch_size):
        part = seqs[s:s + batch_size]
        B, L = len(part), max(len(x) for x in part)
        ids = torch.zeros((B, L), dtype=torch.long)
        att = torch.zeros((B, R + L), dtype=torch.long)
        att[:, :R] = 1
        for b, x in enumerate(part):  # right padding: the padding follows every real token
            ids[b, : len(x)] = torch.as_tensor(x, dtype=torch.long)
            att[b, R: R + len(x)] = 1
        kw = {"input_ids": ids.to(dev), "attention_mask": att.to(dev),
              "position_ids": (R + torch.arange(L)).expand(B, L).to(dev)}
        if kv is not None:
            cache = DynamicCache()
            for i, (k, v) in enumerate(kv):
                cache.update(k.expand(B, *k.shape[1:]), v.expand(B, *v.shape[1:]), i)
            kw[cache_keyword(decoder)] = cache
            kw["use_cache"] = True
        with torch.inference_mode():
            h = decoder(**kw).last_hidden_state
        last = torch.as_tensor([len(x) - 1 for x in part], device=h.device)
        out.append(h[torch.arange(B, device=h.device), last].double().cpu().numpy())
    return out


def states_of_prompts(model, prompts, root=(), *, batch_size: int = 16) -> np.ndarray:
    """Final-layer hidden state at the last token of each prompt: (n, d) float64.

    Parameters
    ----------
    model : transformers.PreTrainedModel
        A causal LM; its decoder (``model.get_decoder()``) is run, not its LM head.
    prompts : list of list of int, length n
        Token ids of each prompt (at least one token each).
    root : sequence of int
        A token prefix shared by the prompts (the instructions): its keys/values are computed once
        per model and reused for every prompt that starts with it.
    batch_size : int

    Returns
    -------
    ndarray of float64, shape (n, d)
        ``d`` = the model's hidden size; rows in the order of ``prompts``.

    Examples
    --------
    >>> from judge.testing import tiny_pair
    >>> model, tok = tiny_pair()
    >>> with_root = states_of_prompts(model, [[1, 2, 3, 4], [1, 2, 5]], root=[1, 2])
    >>> whole = states_of_prompts(model, [[1, 2, 3, 4], [1, 2, 5]])
    >>> with_root.shape, bool(np.abs(with_root - whole).max() < 1e-4)
    ((2, 64), True)
    """
    if not isinstance(batch_size, int) or isinstance(batch_size, bool) or batch_size < 1:
        raise ValueError(f"batch_size must be a positive int, got {batch_size!r}.")
    prompts = [list(map(int, p)) for p in prompts]
    if any(not p for p in prompts):
        raise ValueError("Every prompt needs at least one token; got an empty one.")
    decoder = model.get_decoder()
    root = tuple(int(t) for t in root)
    out = np.zeros((len(prompts), int(model.config.get_text_config().hidden_size)))
    groups: dict[int, list[int]] = {}  # shared prefix length -> prompts (a prompt tokenized whole may
    for i, p in enumerate(prompts):    # merge its text's first token with the root's last one)
        m = 0
        while m < min(len(root), len(p) - 1) and p[m] == root[m]:
            m += 1
        groups.setdefault(m, []).append(i)
    for m, members in groups.items():
        members.sort(key=lambda i: len(prompts[i]))
        kv = _root_kv(model, decoder, root[:m]) if m else None
        got = _last_states(model, decoder, [prompts[i][m:] for i in members], root[:m], kv, batch_size)
        out[members] = np.concatenate(got)
    return out


def answer_states(clf, texts, *, batch_size: int | None = None) -> np.ndarray:
    """Hidden state at the answer slot of each text's prompt: (n, d) float64.

    The prompt is the classifier's (``clf.compiled_``), tokenized whole by its engine; the state
    is the one the label's first token is predicted from. It is the state of the classifier's
    one prompt as written: no think-then-answer reasoning before the answer cue and no rotated
    label lists, so ``Classifier.fit`` refuses classifiers with ``think=True`` or effective
    ``rotations`` (their scores would come from other prompts than these states).

    Parameters
    ----------
    clf : judge.Classifier
    texts : sequence of str, length n
    batch_size : int, optional
        Texts per forward pass; None: the classifier's own setting (``clf.batch_size``, or 1 when
        ``clf.batch_invariant``: then each state is computed alone and does not depend on which
        texts share its batch).

    Returns
    -------
    ndarray of float64, shape (n, d)

    Examples
    --------
    >>> from judge import Classifier
    >>> from judge.testing import tiny_pair
    >>> model, tok = tiny_pair()
    >>> answer_states(Classifier(["yes", "no"], model, tokenizer=tok), ["Is it?", "Sure."]).shape
    (2, 64)
    """
    from judge._checks import check_texts
    from judge.scorers import prompt_items

    texts = check_texts(texts)
    if batch_size is None:
        batch_size = 1 if clf.batch_invariant else clf.batch_size
    c = clf.compiled_
    if not texts:
        return np.zeros((0, int(c.engine.model_.config.get_text_config().hidden_size)))
    items = prompt_items(c, texts)
    return states_of_prompts(c.engine.model_, [it.ids for it in items], c.root_ids, batch_size=batch_size)


def text_embeddings(clf, texts, *, batch_size: int = 32) -> np.ndarray:
    """Mean of the last layer over each text's own tokens, without any prompt: (n, d) float64.

    The embedding a SetFit-style logistic-regression baseline uses (no contrastive tuning).
    Texts are tokenized by the classifier's engine (as user text).

    Examples
    --------
    >>> from judge import Classifier
    >>> from judge.testing import tiny_pair
    >>> model, tok = tiny_pair()
    >>> text_embeddings(Classifier(["yes", "no"], model, tokenizer=tok), ["Is it?"]).shape
    (1, 64)
    """
    import torch

    from judge._checks import check_texts

    texts = check_texts(texts)
    eng = clf.compiled_.engine
    model = eng.model_
    decoder = model.get_decoder()
    seqs = [eng.encode([(t, True)]) for t in texts]
    order = sorted(range(len(seqs)), key=lambda i: len(seqs[i]))
    out = np.zeros((len(seqs), int(model.config.get_text_config().hidden_size)))
    for s in range(0, len(order), batch_size):
        idx = order[s:s + batch_size]
        L = max(len(seqs[i]) for i in idx)
        ids = torch.zeros((len(idx), L), dtype=torch.long)
        att = torch.zeros((len(idx), L), dtype=torch.long)
        for b, i in enumerate(idx):
            ids[b, : len(seqs[i])] = torch.as_tensor(seqs[i])
            att[b, : len(seqs[i])] = 1
        with torch.inference_mode():
            h = decoder(input_ids=ids.to(model.device), attention_mask=att.to(model.device)).last_hidden_state
        m = att.to(h.device).unsqueeze(-1).to(h.dtype)
        out[idx] = ((h * m).sum(1) / m.sum(1)).double().cpu().numpy()
    return out
