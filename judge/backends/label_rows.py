"""The label processor's logic without vLLM: each constrained row's walk through its labels' automaton,
and the logits of each label set's rows masked in one kernel call.

vLLM's v1 logits processor (:mod:`judge.backends.vllm`) is :class:`LabelRows` plus vLLM's batch
bookkeeping; ``bench.vllm_processor`` times this same object beside xgrammar's matchers. Each
distinct label set is compiled once into a :class:`~judge.automaton.trie.TrieAutomaton` and cached
(LRU, per process: :func:`automaton_cache_info`).

What it deliberately does not do: import vLLM, or know about requests beyond a row index and the
list of ids it generates.
"""

from __future__ import annotations

import threading
from collections import OrderedDict

import numpy as np

__all__ = ["LabelRows", "LABELS_KEY", "automaton_cache_info"]

#: ``SamplingParams.extra_args`` key holding a request's label list (the strings the model writes).
LABELS_KEY = "judge_labels"
_CACHE_SETS = 64  # distinct label sets kept compiled per engine process
_CACHE_BYTES = 2 << 30  # and at most this much automaton memory
_AUTOMATA: OrderedDict = OrderedDict()  # (vocabulary id, labels) -> TrieAutomaton
_STATS = {"compiled": 0, "hits": 0}
_LOCK = threading.Lock()


def _compiled(labels, vocab):
    """The automaton of ``labels`` over ``vocab``: compiled once per distinct set, then cached (LRU)."""
    from judge.automaton.trie import TrieAutomaton

    key = (id(vocab), tuple(labels))
    with _LOCK:
        hit = _AUTOMATA.get(key)
        if hit is not None:
            _AUTOMATA.move_to_end(key)
            _STATS["hits"] += 1
            return hit
    auto = TrieAutomaton.build(list(labels), vocab)
    with _LOCK:
        _AUTOMATA[key] = auto
        _STATS["compiled"] += 1
        held = sum(a.memory_bytes for a in _AUTOMATA.values())
        while len(_AUTOMATA) > 1 and (len(_AUTOMATA) > _CACHE_SETS or held > _CACHE_BYTES):
            held -= _AUTOMATA.popitem(last=False)[1].memory_bytes
    return auto


def automaton_cache_info(worker=None) -> dict:
    """How many label sets this process compiled and found cached (the logits processor's cache).

    ``worker`` is ignored: the signature lets ``llm.collective_rpc(automaton_cache_info)`` read
    the counts inside vLLM's worker processes.

    Returns
    -------
    dict
        ``{"compiled": int, "hits": int, "cached": int}``.

    Examples
    --------
    >>> sorted(automaton_cache_info())
    ['cached', 'compiled', 'hits']
    """
    with _LOCK:
        return {"compiled": _STATS["compiled"], "hits": _STATS["hits"], "cached": len(_AUTOMATA)}


class _Walk:
    """One constrained request: its automaton, its live output ids, and where it stands."""

    __slots__ = ("auto", "out", "n", "node")

    def __init__(self, auto, out):
        self.auto, self.out, self.n, self.node = auto, out, 0, auto.root

    def advance(self) -> int:
        """Consume the tokens generated since the last step (as TrieLogitsProcessor.state walks)."""
        out = self.out
        if self.n == len(out):  # nothing new (the first step, or a row that did not advance)
            return self.node
        a = self.auto
        while self.n < len(out):
            t = int(out[self.n])
            if t < 0:
                raise RuntimeError(f"Output token {self.n} of a constrained request is a placeholder ({t}); the "
                                   f"label automaton needs the real ids (vLLM provides them to logits processors "
                                   f"that read output ids).")
            node = self.node
            if node >= 0:
                node = (node if t in a.end_token_ids else -1) if node >= a.n_nodes else a.next(node, t)
            self.node, self.n = node, self.n + 1
        return self.node


class LabelRows:
    """The label processor's per-step logic, without vLLM: per-row walks, then the rows of each label set
    masked at once. The vLLM v1 logits processor (:func:`judge.backends.vllm.logits_processor_class`)
    is this class plus vLLM's batch bookkeeping.

    Per step: each row's walk consumes its new tokens (a Python loop over the rows: vLLM hands the
    output ids as one list per request), then one kernel call per label set masks all its rows
    (CPU float32/float16/bfloat16 logits in place; elsewhere a bitmask for xgrammar's kernel).
    Measured beside xgrammar's own per-step work by ``python -m bench.vllm_processor``.

    Parameters
    ----------
    vocab : judge.automaton.vocab.Vocabulary
    device : str or torch.device

    Examples
    --------
    >>> import torch
    >>> from judge.engine import Engine
    >>> from judge.testing import tiny_pair
    >>> vocab = Engine(*tiny_pair()).setup().vocab_
    >>> rows = LabelRows(vocab)
    >>> out = []
    >>> rows.add(0, [" yes", " no"], out)   # row 0: the few tokens that start " yes" or " no"; row 1 left alone
    >>> logits = rows.apply(torch.zeros(2, len(vocab.token_bytes)))
    >>> 0 < int(torch.isfinite(logits[0]).sum()) < 20, bool(torch.isfinite(logits[1]).all())
    (True, True)
    """

    def __init__(self, vocab, device="cpu"):
        import torch

        self.vocab_ = vocab
        self._direct_dtypes = (torch.float32, torch.float16, torch.bfloat16)  # masked in place on the CPU
        self.device = torch.device(device)
        self.req_info: dict[int, _Walk] = {}
        try:
            from xgrammar import apply_token_bitmask_inplace
        except ImportError:  # the torch path below: identical masks
            apply_token_bitmask_inplace = None
        self._xgr_apply = apply_token_bitmask_inplace

    def new_walk(self, params, prompt_ids, output_ids):
        """The walk of one request (vLLM's ``process_dict_updates`` callback): None where ``params``
        carry no label list under :data:`LABELS_KEY` (the request is left alone)."""
        labels = (getattr(params, "extra_args", None) or {}).get(LABELS_KEY)
        return None if labels is None else _Walk(_compiled(labels, self.vocab_), output_ids)

    def add(self, row: int, labels, output_ids: list) -> None:
        """Constrain batch row ``row`` to ``labels``; ``output_ids`` is the list its generated ids are
        appended to (read at each :meth:`apply`). A row added again starts a new request."""
        self.req_info[row] = _Walk(_compiled(list(labels), self.vocab_), output_ids)

    def is_argmax_invariant(self) -> bool:
        return False

    def apply(self, logits):
        if not self.req_info:
            return logits
        groups: dict[int, tuple] = {}  # automaton id -> (automaton, rows, states): one kernel call each
        for r, w in self.req_info.items():
            g = groups.get(id(w.auto))
            if g is None:
                g = groups[id(w.auto)] = (w.auto, [], [])
            g[1].append(r)
            g[2].append(w.advance())
        if logits.device.type == "cpu" and logits.dtype in self._direct_dtypes:
            for auto, rs, nodes in groups.values():  # in place, no bitmask (TrieAutomaton.mask_logits)
                auto.mask_logits(logits, np.asarray(rs, np.int64), np.asarray(nodes, np.int64))
            return logits
        return self._apply_bitmask(logits, groups)

    def _apply_bitmask(self, logits, groups):
        """Other devices and dtypes: packed bitmask rows filled on the CPU, applied on the logits' device."""
        import torch

        from judge.automaton.trie import set_token_bits

        B, V = logits.shape
        words = (V + 31) // 32
        bm = np.zeros((B, words), np.int32)
        rows = []
        for auto, rs, nodes in groups.values():
            nodes = np.asarray(nodes, np.int64)
            rs = np.asarray(rs, np.int64)
            done = (nodes < 0) | (nodes >= auto.n_nodes)  # finished (or off the automaton): only the end tokens
            part = np.zeros((len(rs), words), np.int32)
            auto.fill_bitmask(np.where(done, auto.root, nodes), part)  # one kernel call for the group
            for i in np.flatnonzero(done):
                part[i] = 0
                set_token_bits(part[i], [e for e in auto.end_token_ids if e < V])
            bm[rs] = part
            rows.extend(rs.tolist())
        rows.sort()
        mask = torch.from_numpy(bm).to(logits.device, non_blocking=True)
        if self._xgr_apply is not None:
            self._xgr_apply(logits, mask, indices=rows)
            return logits
        shifts = torch.arange(32, device=logits.device, dtype=torch.int32)
        idx = torch.tensor(rows, device=logits.device)
        allowed = ((mask[idx].unsqueeze(-1) >> shifts) & 1).reshape(len(rows), -1)[:, :V].bool()
        logits[idx] = logits[idx].masked_fill(~allowed, float("-inf"))
        return logits
