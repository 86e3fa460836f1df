"""Small numerical and torch helpers shared across the package: one copy each.

* :func:`softmax` — row-wise, float64, ``-inf`` safe (calibration, decisions, the classifier).
* :func:`lse64` — float64 log-sum-exp over a logits matrix in bounded-memory chunks (the engine).
* :func:`left_pad` — token id lists -> a left-padded batch (generation).
* :func:`cache_keyword` — the name under which a model's ``forward`` takes its key/value cache
  (``cache`` from transformers 5.24 on, ``past_key_values`` before).

What it deliberately does not do: import torch at module level (``import judge`` stays light).
"""

from __future__ import annotations

import inspect

import numpy as np

__all__ = ["softmax", "unit_rows", "lse64", "left_pad", "cache_keyword"]


def softmax(scores) -> np.ndarray:
    """Softmax over the last axis in float64, ``-inf`` safe: (..., K) -> (..., K).

    Examples
    --------
    >>> softmax(np.array([[0.0, -np.inf]])).tolist()
    [[1.0, 0.0]]
    >>> softmax(np.log([1.0, 3.0])).round(2).tolist()
    [0.25, 0.75]
    """
    s = np.asarray(scores, np.float64)
    m = np.max(s, axis=-1, keepdims=True)
    m = np.where(np.isfinite(m), m, 0.0)
    e = np.exp(s - m)
    return e / e.sum(axis=-1, keepdims=True)


def unit_rows(a) -> np.ndarray:
    """``a`` as float64 with each row scaled to unit length (rows of norm below 1e-12 divided by 1e-12).

    Examples
    --------
    >>> unit_rows([[3.0, 4.0], [0.0, 0.0]]).tolist()
    [[0.6, 0.8], [0.0, 0.0]]
    """
    a = np.asarray(a, np.float64)
    return a / np.maximum(np.linalg.norm(a, axis=-1, keepdims=True), 1e-12)


def lse64(logits):
    """float64 log-sum-exp over the last axis, in row chunks (bounded memory): (M, V) -> (M,).

    Parameters
    ----------
    logits : torch.Tensor of shape (M, V), any float dtype

    Returns
    -------
    torch.Tensor of float64, shape (M,)

    Examples
    --------
    >>> import torch
    >>> lse64(torch.zeros(2, 4)).tolist() == [float(np.log(4))] * 2
    True
    """
    import torch

    out = torch.empty(logits.shape[0], dtype=torch.float64, device=logits.device)
    step = max(1, (1 << 24) // max(1, logits.shape[-1]))
    for i in range(0, logits.shape[0], step):
        out[i:i + step] = torch.logsumexp(logits[i:i + step].double(), dim=-1)
    return out


def left_pad(sequences, pad_id: int, device=None):
    """Left-pad token id lists into a batch, so every row ends at the last column.

    Parameters
    ----------
    sequences : list of list of int, length B
    pad_id : int

    Returns
    -------
    ids : LongTensor of shape (B, L)
    attention : LongTensor of shape (B, L)
        1 for real tokens, 0 for padding.

    Examples
    --------
    >>> ids, att = left_pad([[5, 6], [7]], pad_id=0)
    >>> ids.tolist(), att.tolist()
    ([[5, 6], [0, 7]], [[1, 1], [0, 1]])
    """
    import torch

    L = max(len(s) for s in sequences)
    ids = torch.full((len(sequences), L), pad_id, dtype=torch.long)
    att = torch.zeros((len(sequences), L), dtype=torch.long)
    for i, s in enumerate(sequences):
        ids[i, L - len(s):] = torch.as_tensor(s, dtype=torch.long)
        att[i, L - len(s):] = 1
    return ids.to(device), att.to(device)


def cache_keyword(model) -> str:
    """The keyword ``model.forward`` takes its key/value cache under.

    Examples
    --------
    >>> class M:
    ...     def forward(self, input_ids, past_key_values=None): ...
    >>> cache_keyword(M())
    'past_key_values'
    """
    params = inspect.signature(model.forward).parameters
    return "cache" if "cache" in params else "past_key_values"
