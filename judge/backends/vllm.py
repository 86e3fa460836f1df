"""vLLM behind the Scorer protocol, and the label automaton as a vLLM v1 logits processor.

Two things, both on one ``vllm.LLM`` engine:

* **Constrained generation.** :data:`PROCESSOR` names a vLLM v1 logits processor
  (:func:`logits_processor_class`) that keeps a request inside the automaton of *its own* label
  set, switched on per request by ``SamplingParams(extra_args={LABELS_KEY: labels})``; other
  requests in the batch are left alone. Each distinct label set is compiled once into a
  :class:`~judge.automaton.trie.TrieAutomaton` and cached (LRU, per engine process); a request's
  state is a node id advanced by its generated tokens. Each step masks CPU float logits in place,
  one numba kernel call per label set for all its rows (:meth:`TrieAutomaton.mask_logits
  <judge.automaton.trie.TrieAutomaton.mask_logits>`: -inf between a row's allowed tokens, no
  bitmask); on other devices it fills one packed bitmask row per request (xgrammar's layout, one
  kernel call per label set) applied with xgrammar's kernel, as vLLM's structured output does.
  Any tokenization of a label is admitted, then only end tokens (as
  :class:`~judge.automaton.hf.TrieLogitsProcessor`, whose greedy output it reproduces).
  ``is_argmax_invariant()`` is False; it is refused under speculative decoding. For
  :mod:`judge.structured`'s enum fields where vLLM serves the model, a field's ``EnumSlot.labels``
  are such a set, and ``value_distribution(..., scorer=VLLMScorer(...))`` scores them.
* **Scoring.** :class:`VLLMScorer` answers :class:`~judge.engine.Scorer`: each option of each
  query is one request ``prompt + option`` with ``prompt_logprobs=0``, summed over the option's
  tokens. Tokenization is the transformers engine's own (an :class:`~judge.engine.Engine` over a
  weightless meta-device copy of the model answers ``encode`` and ``option_ids``). Prefix caching
  is on. **Block-boundary guard:** where cached blocks reach into the option
  (``num_cached_tokens >= len(prompt)``, e.g. a prompt whose length is a multiple of the block
  size), vLLM silently returns the first option token's log-probability from a block it never
  computed (a token id of 1,157,333,899 with a negative rank was seen). Such requests, and any
  whose returned ids or values are not the ones asked for, are recomputed without cache reads
  (``cache_stats_["recomputed"]``).

Scores equal the engine's to float32 rounding (vLLM normalises in float32): ``<= 1e-4`` in the
tests. On CPU this is slower than the engine's one-pass tree; it is there for GPU throughput.

What it deliberately does not do: import vLLM at module level (``import judge.backends.vllm``
loads none), take loaded model objects (vLLM loads a hub id or folder), or implement ``think``,
``decode``, the certified search or ``fit`` (they need the transformers model).

Examples
--------
>>> PROCESSOR
'judge.backends.vllm:TrieVLLMLogitsProcessor'
>>> scorer = VLLMScorer("path/to/model", engine_kwargs={"block_size": 16})   # stores arguments only
>>> scorer.path_
'vllm'
"""

from __future__ import annotations

import atexit
import functools
import os
import threading

import numpy as np

from judge.backends._vllm_front import check_classifier, front, import_vllm, model_path
from judge.backends.label_rows import LABELS_KEY, LabelRows, automaton_cache_info
from judge.engine.protocol import Closing, Item, option_context

__all__ = ["VLLMScorer", "PROCESSOR", "LABELS_KEY", "logits_processor_class", "automaton_cache_info",
           "check_classifier"]

#: Fully qualified name of the logits processor, for ``vllm.LLM(logits_processors=[PROCESSOR])``.
PROCESSOR = "judge.backends.vllm:TrieVLLMLogitsProcessor"
_ENGINES: dict = {}  # (model, tokenizer, engine arguments) -> [vllm.LLM, scorers using it]: one per setting
_ENGINES_LOCK = threading.Lock()


#: The client's daemon threads (vLLM's names): the engine monitor, and the thread reading the engine's outputs
#: off its socket. Either one still inside native code when the interpreter finalizes aborts the process.
_CLIENT_THREADS = ("MPClientEngineMonitor", "EngineCoreOutputQueueThread")


def _shutdown(llm) -> None:
    """Stop a vLLM engine's core process and its workers (vLLM's own ``engine_core.shutdown``),
    then wait (5 s at most each) for the client's threads to end (:data:`_CLIENT_THREADS`): a daemon
    thread still inside vLLM's cleanup or a socket read when the interpreter finalizes aborts the process."""
    core = getattr(getattr(llm, "llm_engine", None), "engine_core", None)
    if core is not None and hasattr(core, "shutdown"):
        core.shutdown()
    for thread in threading.enumerate():
        if thread.name in _CLIENT_THREADS and thread is not threading.current_thread():
            thread.join(timeout=5.0)


def _shutdown_all() -> None:
    """At interpreter exit, stop every engine still open.

    Registered again each time an engine starts (:func:`_run_last_registered_first`), so it runs
    before the exit handlers vLLM registers when it builds an engine (``weakref.finalize``, which
    stop the engine's processes but leave the client's monitor thread to clean up while the
    interpreter finalizes: an abort, "terminate called without an active exception") and before
    multiprocessing's, which would join the engine processes."""
    with _ENGINES_LOCK:
        engines = [e[0] for e in _ENGINES.values()]
        _ENGINES.clear()
    for llm in engines:
        try:
            _shutdown(llm)
        except Exception:  # noqa: BLE001 - exiting anyway; one failed stop must not keep the others
            pass


def _run_last_registered_first() -> None:
    """(Re-)register :func:`_shutdown_all` as the newest exit handler: ``atexit`` runs the newest first."""
    atexit.unregister(_shutdown_all)
    atexit.register(_shutdown_all)


_run_last_registered_first()


# ----------------------------------------------------------------------------- logits processor

def _processor_vocab(vllm_config):
    """The vocabulary the processor of an engine built with ``vllm_config`` masks over (speculative decoding refused)."""
    if getattr(vllm_config, "speculative_config", None) is not None:
        raise ValueError("The judge label-automaton logits processor cannot run under speculative decoding: "
                         "it would mask logits of draft tokens that are not yet accepted; start vLLM "
                         "without speculative_config to constrain requests.")
    mc = vllm_config.model_config
    return front(str(mc.model), str(getattr(mc, "tokenizer", None) or mc.model)).vocab_


@functools.cache
def logits_processor_class():
    """The vLLM v1 logits processor class (built on first call: it subclasses vLLM's, imported here).

    Register it with ``vllm.LLM(..., logits_processors=[PROCESSOR])`` (the name resolves to this
    class) and switch it on per request with ``SamplingParams(extra_args={LABELS_KEY: labels})``.

    Returns
    -------
    type
        ``TrieVLLMLogitsProcessor``, a subclass of ``vllm.v1.sample.logits_processor.LogitsProcessor``.

    Examples
    --------
    Needs vLLM: these examples run in the vLLM environment (skipped elsewhere by the repository's conftest.py).

    >>> from vllm import LLM, SamplingParams
    >>> from judge.models import packaged_model_dir
    >>> llm = LLM(str(packaged_model_dir()), logits_processors=[PROCESSOR],
    ...           enforce_eager=True, dtype="float32")
    >>> sp = SamplingParams(temperature=0, max_tokens=8, extra_args={LABELS_KEY: [" yes", " no"]})
    >>> text = llm.generate("Is the sky blue? Answer:", sp)[0].outputs[0].text
    >>> text.split("<")[0] in (" yes", " no")          # one of the labels, then only an end token
    True
    """
    from vllm.v1.sample.logits_processor import LogitsProcessor
    from vllm.v1.sample.logits_processor.builtin import process_dict_updates

    class TrieVLLMLogitsProcessor(LabelRows, LogitsProcessor):
        """Keeps each request that carries ``extra_args[LABELS_KEY]`` inside its labels' automaton."""

        @classmethod
        def validate_params(cls, sampling_params):
            labels = (sampling_params.extra_args or {}).get(LABELS_KEY)
            if labels is not None:
                from judge.labels import validate_labels

                if not isinstance(labels, (list, tuple)):
                    raise ValueError(f"extra_args[{LABELS_KEY!r}] must be a list of label strings, got "
                                     f"{type(labels).__name__}.")
                validate_labels(list(labels))

        def __init__(self, vllm_config, device, is_pin_memory):
            LabelRows.__init__(self, _processor_vocab(vllm_config), device)

        def update_state(self, batch_update):
            process_dict_updates(self.req_info, batch_update, self.new_walk)

    TrieVLLMLogitsProcessor.__module__ = __name__
    TrieVLLMLogitsProcessor.__qualname__ = "TrieVLLMLogitsProcessor"
    return TrieVLLMLogitsProcessor


def __getattr__(name: str):
    if name == "TrieVLLMLogitsProcessor":  # what PROCESSOR names; pickling the class by reference too
        return logits_processor_class()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


# ----------------------------------------------------------------------------- the scorer

class VLLMScorer(Closing):
    """The :class:`~judge.engine.Scorer` protocol answered by a vLLM engine (prompt log-probabilities).

    Stores its arguments; vLLM is imported and the engine started on first use (:meth:`setup`).
    The engine also carries the label-automaton logits processor, so one engine scores and
    generates constrained (:meth:`sampling_params`, :meth:`generate_labels`).

    Parameters
    ----------
    model : None, str or os.PathLike
        ``None``: the packaged SmolLM2 (its converted folder); a packaged model's name, a hub id
        or a local folder. Loaded model objects are refused (vLLM loads the weights itself).
    tokenizer : None, str or os.PathLike
        Default: the model's.
    end_token : {"auto", True, False}
        As :class:`judge.engine.Engine`'s.
    dtype : str, optional
        vLLM's ``dtype``; default ``"float32"``, as the transformers engine (its scores then equal
        the engine's to float32 rounding; ``"bfloat16"`` trades that for memory and speed).
    max_requests : int
        Requests per ``LLM.generate`` call (bounds the memory of the outputs held at once).
    engine_kwargs : dict, optional
        More ``vllm.LLM`` arguments (``block_size``, ``gpu_memory_utilization``, ``max_model_len``,
        ``enforce_eager``...). Defaults: ``enforce_eager=True`` (compiling took 2-3 minutes on CPU
        and did not pay back there), ``enable_prefix_caching=True``, ``seed=0``.

    Attributes
    ----------
    llm_ : vllm.LLM
    tokenizer_, vocab_, end_id_ : the transformers engine's tokenizer, vocabulary and end token
    model_ : PreTrainedModel on the meta device
        The model's architecture and config, without weights (nothing runs on it).
    path_ : "vllm"
    block_size_ : int
        The KV cache's block size (the guard's period).
    last_usage_ : dict
        ``{"input_tokens": int}``: prompt tokens vLLM computed in the last call (cache hits excluded).
    cache_stats_ : dict
        Totals since setup: ``requests``, ``prompt_tokens``, ``cached_tokens``, ``recomputed``
        (requests the block-boundary guard sent again without cache reads).

    Examples
    --------
    Starting vLLM needs the vLLM environment (these examples run there; skipped elsewhere).

    >>> from judge.engine import Query
    >>> scorer = VLLMScorer().setup()
    >>> scorer.score([Query((("Sky colour:", False),), (" blue", " green"))])[0].shape
    (2,)
    """

    def __init__(self, model=None, tokenizer=None, *, end_token="auto", dtype=None, max_requests: int = 4096,
                 engine_kwargs=None):
        if end_token not in ("auto", True, False):
            raise ValueError(f"end_token must be 'auto', True or False, got {end_token!r}.")
        for name, v in (("model", model), ("tokenizer", tokenizer)):
            if v is not None and not isinstance(v, (str, os.PathLike)):
                raise TypeError(f"VLLMScorer({name}=...) takes a hub id or a folder (vLLM loads it), not a loaded "
                                f"{type(v).__name__}.")
        if not isinstance(max_requests, int) or isinstance(max_requests, bool) or max_requests < 1:
            raise ValueError(f"max_requests must be a positive int, got {max_requests!r}.")
        self.model, self.tokenizer, self.end_token, self.dtype = model, tokenizer, end_token, dtype
        self.device = None
        self.max_requests = max_requests
        self.engine_kwargs = dict(engine_kwargs or {})
        self.path_ = "vllm"
        self.check_ = {"plan": "vllm", "reason": "scored by vLLM (prompt log-probabilities, one request per option)"}
        self.last_usage_ = {"input_tokens": 0}
        self.cache_stats_ = {"requests": 0, "prompt_tokens": 0, "cached_tokens": 0, "recomputed": 0}
        self._lock = threading.RLock()
        self._ready = False

    # ------------------------------------------------------------------ setup
    def setup(self) -> VLLMScorer:
        """Start the vLLM engine (with the logits processor) and the tokenization front; returns self."""
        if self._ready:
            return self
        with self._lock:
            if self._ready:
                return self

            LLM = import_vllm().LLM
            path = model_path(self.model)
            tok_path = path if self.tokenizer is None else str(self.tokenizer)
            fr = front(path, tok_path)
            kw = {"enforce_eager": True, "enable_prefix_caching": True, "seed": 0,
                  "dtype": self.dtype or "float32"}
            kw.update(self.engine_kwargs)
            kw["logits_processors"] = list(kw.get("logits_processors") or []) + [PROCESSOR]
            key = (path, tok_path, repr(sorted(kw.items())))
            with _ENGINES_LOCK:  # scorers with the same settings share one engine (a GPU holds one)
                if key not in _ENGINES:
                    _ENGINES[key] = [LLM(model=path, tokenizer=tok_path, **kw), 0]
                    _run_last_registered_first()  # after vLLM's own exit handlers: ours runs first
                _ENGINES[key][1] += 1
                self.llm_, self._key = _ENGINES[key][0], key
            self._front = fr
            self.tokenizer_, self.vocab_, self.end_id_ = fr.tokenizer_, fr.vocab_, fr.end_id_
            self.model_, self.dtype_ = fr.model_, kw["dtype"]
            engine = self.llm_.llm_engine
            self.block_size_ = int(engine.vllm_config.cache_config.block_size)
            self.max_model_len_ = int(engine.model_config.max_model_len)
            self._ready = True
        return self

    def close(self) -> None:
        """Let go of the vLLM engine; the last scorer using it stops its processes (idempotent).

        Scorers with the same settings share one engine; it is shut down when the last of them
        closes, and at interpreter exit for any still open. A script that uses vLLM needs the
        ``if __name__ == "__main__":`` guard (vLLM spawns its workers by re-importing the script).

        Examples
        --------
        >>> VLLMScorer().close()          # never set up: nothing to release
        """
        with self._lock:
            if not self._ready:
                return
            llm = None
            with _ENGINES_LOCK:
                entry = _ENGINES.get(self._key)
                if entry is not None and entry[0] is self.llm_:
                    entry[1] -= 1
                    if entry[1] <= 0:
                        llm = _ENGINES.pop(self._key)[0]
            for name in ("llm_", "_front", "tokenizer_", "vocab_", "model_"):
                self.__dict__.pop(name, None)
            self._ready = False
        if llm is not None:
            _shutdown(llm)

    # --------------------------------------------------------------- tokenization
    def encode(self, pieces, *, add_special_tokens=False) -> list[int]:
        """Token ids of a prompt given as ``(text, is_user)`` pieces: the transformers engine's ``encode``."""
        return self.setup()._front.encode(pieces, add_special_tokens=add_special_tokens)

    def option_ids(self, context, options, *, end_token=None, what="Option") -> list[list[int]]:
        """Canonical token ids of each option after ``context``: the transformers engine's ``option_ids``."""
        self.setup()
        return self._front.option_ids(context, options, end_token=self.end_token if end_token is None else end_token,
                                      what=what)

    def set_root(self, ids) -> None:
        """Warm the prefix cache with the shared instructions ``ids`` (one request; full blocks are kept)."""
        ids = [int(t) for t in ids]
        if len(ids) >= self.setup().block_size_:
            with self._lock:
                self._run([ids], skip_cache=False)

    # ------------------------------------------------------------------ scoring
    def score(self, queries, *, root=None, first_token=False, batch_size=8) -> list[np.ndarray]:
        """log P(option | prompt) for every option of every query (as ``Engine.score``).

        Returns
        -------
        list of Q ndarrays of float64, shape (K_q,)
        """
        self.setup()
        items = []
        for q in queries:
            ctx = option_context(q.pieces)
            items.append(Item(self.encode(q.pieces), self.option_ids(ctx, q.options), first_only=first_token))
        return self.score_items(items, root=root or (), batch_size=batch_size)

    def score_items(self, items, *, root=(), batch_size=8, progress=None, pack=1) -> list[np.ndarray]:
        """Token-level :meth:`score`: one request per distinct ``prompt + option`` sequence.

        ``root``, ``batch_size`` and ``pack`` are accepted for the protocol's signature; vLLM's
        scheduler batches and its prefix cache shares prompts.
        """
        self.setup()
        items = list(items)
        need: dict[tuple, int] = {}  # sequence -> first scored position (the shortest prompt using it)
        plan = []
        for it in items:
            if not it.ids:
                raise ValueError("Every item needs at least one prompt token; got an empty prompt.")
            row = []
            for opt in it.options:
                seq = tuple(int(t) for t in it.ids) + tuple(int(t) for t in (list(opt)[:1] if it.first_only else opt))
                need[seq] = min(need.get(seq, len(it.ids)), len(it.ids))
                row.append(seq)
            plan.append(row)
        too_long = [len(s) for s in need if len(s) > self.max_model_len_]
        if too_long:
            raise ValueError(f"A prompt with its option needs {max(too_long)} positions, over vLLM's max_model_len "
                             f"{self.max_model_len_}; shorten the prompt or raise engine_kwargs['max_model_len'].")
        seqs = list(need)
        values: dict[tuple, list] = {}
        fed = 0
        with self._lock:
            for s in range(0, len(seqs), self.max_requests):
                chunk = seqs[s:s + self.max_requests]
                outs = self._run(chunk, skip_cache=False)
                redo = []
                for seq, out in zip(chunk, outs):
                    lp = _token_logprobs(out, seq, need[seq])
                    if lp is None or (out.num_cached_tokens or 0) >= need[seq]:  # the block-boundary guard
                        redo.append(seq)
                    else:
                        values[seq] = lp
                        fed += len(seq) - (out.num_cached_tokens or 0)
                if redo:
                    self.cache_stats_["recomputed"] += len(redo)
                    for seq, out in zip(redo, self._run(redo, skip_cache=True)):
                        lp = _token_logprobs(out, seq, need[seq])
                        if lp is None:
                            raise RuntimeError(f"vLLM returned no valid prompt log-probabilities for a {len(seq)}-token "
                                               f"sequence even without cache reads; cannot score it.")
                        values[seq] = lp
                        fed += len(seq)
        self.last_usage_ = {"input_tokens": int(fed)}
        out = []
        for it, row in zip(items, plan):
            start = len(it.ids)
            out.append(np.array([float(np.sum(values[seq][start - need[seq]:], dtype=np.float64)) for seq in row],
                                np.float64))
        return out

    def _run(self, seqs, *, skip_cache: bool):
        from vllm import SamplingParams
        from vllm.inputs import TokensPrompt

        sp = SamplingParams(max_tokens=1, prompt_logprobs=0, detokenize=False, skip_reading_prefix_cache=skip_cache)
        outs = self.llm_.generate([TokensPrompt(prompt_token_ids=list(s)) for s in seqs], sp, use_tqdm=False)
        st = self.cache_stats_
        st["requests"] += len(seqs)
        st["prompt_tokens"] += sum(len(s) for s in seqs)
        st["cached_tokens"] += sum(o.num_cached_tokens or 0 for o in outs)
        return outs

    # ------------------------------------------------------------ constrained generation
    def sampling_params(self, labels, **kwargs):
        """``vllm.SamplingParams`` that keep a request inside ``labels``' automaton (greedy by default).

        ``stop_token_ids`` are the automaton's end tokens (generation stops right after a label) and
        ``max_tokens`` the longest label's bytes plus one, unless given.

        Examples
        --------
        Needs vLLM (runs in the vLLM environment).

        >>> VLLMScorer().sampling_params([" yes", " no"]).extra_args
        {'judge_labels': [' yes', ' no']}
        """
        self.setup()  # first: without vLLM it says where vLLM lives
        from vllm import SamplingParams

        labels = [str(x) for x in labels]
        kw = {"temperature": 0.0, "max_tokens": max(len(x.encode()) for x in labels) + 1,
              "stop_token_ids": list(self.vocab_.end_token_ids), **kwargs}
        extra = dict(kw.pop("extra_args", None) or {}, **{LABELS_KEY: labels})
        return SamplingParams(extra_args=extra, **kw)

    def generate_labels(self, prompts, labels, **kwargs) -> list:
        """The label each prompt's constrained generation wrote (None where ``max_tokens`` cut it short).

        Parameters
        ----------
        prompts : list of str or list of lists of int, length n
            Strings are tokenized by :meth:`encode` (template text, no user pieces).
        labels : list of str, length K
            What the model may write (e.g. ``Classifier.surfaces_``).
        **kwargs
            More ``SamplingParams`` (see :meth:`sampling_params`).

        Returns
        -------
        list of n (str or None)
        """
        sp = self.sampling_params(labels, **kwargs)
        from vllm.inputs import TokensPrompt

        ids = [self.encode([(p, False)]) if isinstance(p, str) else [int(t) for t in p] for p in prompts]
        outs = self.llm_.generate([TokensPrompt(prompt_token_ids=x) for x in ids], sp, use_tqdm=False)
        # the automaton admits exactly the tokenizations of a label followed by an end token: the bytes tell
        spelled = {lab.encode(): lab for lab in sp.extra_args[LABELS_KEY]}
        ends, tb = set(self.vocab_.end_token_ids), self.vocab_.token_bytes
        res = []
        for o in outs:
            toks = list(o.outputs[0].token_ids)
            done = o.outputs[0].finish_reason == "stop" and (not toks or toks[-1] in ends or o.outputs[0].stop_reason)
            res.append(spelled.get(b"".join(tb[t] for t in toks if t not in ends)) if done else None)
        return res


def _token_logprobs(out, seq, start):
    """log P of ``seq[start:]`` from a request's prompt log-probabilities, or None if any is not the one asked.

    vLLM returns, per prompt position, ``{token id: Logprob}`` holding that position's token; a
    position read from a block it did not compute holds another id (or a positive value).
    """
    plp = out.prompt_logprobs
    if plp is None or len(plp) != len(seq):
        return None
    vals = []
    for i in range(start, len(seq)):
        d = plp[i]
        got = None if d is None else d.get(seq[i])
        v = None if got is None else float(got.logprob)
        if v is None or not (v <= 0.0) or v == -np.inf:
            return None
        vals.append(v)
    return vals
