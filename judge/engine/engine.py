"""The transformers scorer: exact log-probabilities of every option of every query, in one pass.

:class:`Engine` answers the :class:`~judge.engine.protocol.Scorer` protocol. A
:class:`~judge.engine.protocol.Query` is a prompt (text pieces, some of them user
text) and the options that may follow it. :meth:`Engine.score` scores a list of queries:

* Every prompt is tokenized **whole** (``judge.prompts.encode_pieces``), so its
  tokens equal tokenizing the rendered prompt in one call; user pieces never
  become special tokens.
* The longest token prefix shared with the engine's cached **root** (the
  instructions) is taken from a key/value cache computed once; prompts that
  share more tokens (one state, many questions) share nodes of one
  :class:`~judge.engine.forest.Forest` row; each answer slot carries the token trie of
  its options. One forward pass over all rows scores every option exactly:
  every token attends to the root columns it shares and its own ancestors,
  positions follow depth, and per layer type the sliding window is applied on
  logical positions (a dict of masks keyed by layer type where layers differ).
* Log-probabilities are normalised in float64 (a float32 log-softmax over a
  262k vocabulary is off by up to 6e-5 per token).
* Models whose attention this mask cannot express exactly (ALiBi, local or
  linear attention, unknown layer types), or that fail a numerical self-check
  at first use (tree pass against an ordinary causal pass on a probe longer
  than the sliding window), use the **fallback**: each prompt run as an
  ordinary causal sequence, then all its options continued from that cache as
  one batch. Exact as well, slower. ``Engine.path_`` and a warning say which.

Forward passes are planned and run by :mod:`judge.engine.passes`, within ``max_batch_tokens``
and ``max_batch_logits`` (memory bounded by the settings, not by the call: a state too large
for one row is split over rows sharing its cached prefix, exactly; prompts past the model's
context are refused). Masks come from :mod:`judge.engine.masks`; certified search (:meth:`Engine.search`) runs
:mod:`judge.engine.search` on this engine's model and root cache.

What it deliberately does not do: render prompts from questions (callers do:
:class:`judge.Classifier`, :mod:`judge.decisions`), calibrate, or decode.
"""

from __future__ import annotations

import threading
import warnings
import weakref

import numpy as np

from judge._math import cache_keyword
from judge.engine.fallback import score_fallback
from judge.engine.masks import mask_plan
from judge.engine.options import option_token_ids
from judge.engine.passes import (
    DEFAULT_MAX_BATCH_TOKENS,
    default_max_logits,
    model_context,
    plan_passes,
    self_check_probe,
    tree_pass,
)
from judge.engine.protocol import Closing, Item, default_root, lower_queries
from judge.engine.states import states_of_prompts

__all__ = ["Engine", "EngineCheckWarning"]

_ATOL = {"float32": 2e-3, "float64": 1e-6}
_HALF_ATOL = 0.15
_CHECKED: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()  # model -> (path, check) of its self-check


class EngineCheckWarning(UserWarning):
    """The fast tree pass is not used for this model (the exact fallback is); the message says why.

    Examples
    --------
    >>> import warnings
    >>> issubclass(EngineCheckWarning, UserWarning)
    True
    """


class Engine(Closing):
    """A causal LM that scores options after prompts, exactly, many at once.

    Parameters
    ----------
    model : None, str, path or PreTrainedModel
        As for :func:`judge.models.load_model` (``None``: the packaged model).
        Loaded lazily on first use.
    tokenizer : PreTrainedTokenizerBase, optional
    device : str, optional
    end_token : {"auto", True, False}
        Append the end-of-answer token to options: ``"auto"`` only to options
        whose tokens are a prefix of another option's (so no option's
        probability contains another's).
    check : bool
        Run the self-check at first use (compare the tree pass with the ordinary causal fallback on
        a probe). ``False`` trusts the structural plan alone.
    path : {"auto", "tree", "fallback"}
        Force a path (``"tree"`` raises where the mask cannot be expressed).
    max_batch_tokens : int
        Key columns per forward pass, ``rows x (root + fed tokens)`` (T): bounds the pass's
        key/value cache, its mask (``<= T^2`` entries) and the root cache (at most T tokens).
        A state's questions that do not fit one row are split over rows sharing the state's
        cached keys (exact; see :mod:`judge.engine.passes`). A call's peak memory: :meth:`memory_bound`.
    max_batch_logits : int, optional
        Logit rows per forward pass (P); default 2^26 logits' worth (256 MiB in float32).

    Attributes
    ----------
    model_, tokenizer_, vocab_ : after first use
    path_ : {"tree", "fallback"}
    mask_plan_, dtype_ : ``(kind, windows)`` from :func:`judge.engine.masks.mask_plan`; the parameters' dtype
    check_ : dict
        The self-check's result (max difference, probe sizes, reason).

    Examples
    --------
    >>> from judge.engine import Query
    >>> from judge.testing import tiny_pair
    >>> eng = Engine(*tiny_pair())
    >>> [s.shape for s in eng.score([Query((("Sky colour:", False),), (" blue", " green"))])]
    [(2,)]
    >>> eng.path_
    'tree'
    """

    def __init__(self, model=None, tokenizer=None, *, device=None, end_token="auto", check=True,
                 path="auto", max_batch_tokens: int = DEFAULT_MAX_BATCH_TOKENS, max_batch_logits: int | None = None):
        for name, v in (("max_batch_tokens", max_batch_tokens), ("max_batch_logits", max_batch_logits)):
            if v is not None and (not isinstance(v, int) or isinstance(v, bool) or v < 2):
                raise ValueError(f"{name} must be an int >= 2, got {v!r}.")
        if end_token not in ("auto", True, False):
            raise ValueError(f"end_token must be 'auto', True or False, got {end_token!r}.")
        if path not in ("auto", "tree", "fallback"):
            raise ValueError(f"path must be 'auto', 'tree' or 'fallback', got {path!r}.")
        self.model = model
        self.tokenizer = tokenizer
        self.device = device
        self.end_token = end_token
        self.check = bool(check)
        self.path = path
        self.max_batch_tokens = max_batch_tokens
        self.max_batch_logits = max_batch_logits
        self._lock = threading.RLock()
        self._ready = False
        self._roots: dict[tuple, object] = {}
        self._root_fed = 0
        self._option_cache: dict[tuple, list] = {}
        self.last_usage_ = {"input_tokens": 0}

    # ------------------------------------------------------------------ setup
    def setup(self) -> Engine:
        """Load the model and decide the scoring path (once; thread-safe). Returns self."""
        if self._ready:
            return self
        with self._lock:
            if self._ready:
                return self
            from judge.models import load_model

            # first: a model name found nowhere fails in about a second, before torch is imported
            model, tok = load_model(self.model, self.tokenizer, device=self.device)
            import torch

            from judge.automaton.vocab import Vocabulary

            if model.device.type == "cpu":
                # Small models' hidden states drift into denormal floats, which x86 CPUs process
                # 5-10x slower; flushing them (process-wide) changes scores by < 1e-30.
                torch.set_flush_denormal(True)
            self.model_, self.tokenizer_ = model, tok
            gen_eos = getattr(getattr(model, "generation_config", None), "eos_token_id", None)
            base = Vocabulary.from_tokenizer(tok)
            ends = list(base.end_token_ids)
            for e in ([gen_eos] if isinstance(gen_eos, int) else list(gen_eos or [])):
                if e not in ends and e < len(tok):
                    ends.append(int(e))
            self.vocab_ = Vocabulary.from_tokenizer(tok, end_token_ids=ends)
            self.end_id_ = int(self.vocab_.end_token_ids[0])
            self.dtype_ = next(model.parameters()).dtype
            kind, plan = mask_plan(model)
            self.mask_plan_ = (kind, plan)
            self.check_ = {"plan": kind, "reason": None if kind else plan}
            if self.path == "fallback":
                self.path_ = "fallback"
            elif kind is None:
                if self.path == "tree":
                    raise ValueError(
                        f"path='tree' was requested but a tree mask cannot be exact for "
                        f"{type(model).__name__}: {plan}. Use path='auto'.")
                self.path_ = "fallback"
                warnings.warn(
                    f"{type(model).__name__}: scoring with the exact fallback (one causal pass per "
                    f"prompt, options batched on its cache), slower than the tree pass, because {plan}.",
                    EngineCheckWarning, stacklevel=3)
            else:
                self.path_ = "tree"
                if self.check and self.path == "auto":
                    key = (str(self.dtype_), str(model.device))
                    done = _CHECKED.get(model, {}).get(key)
                    if done is None:
                        self._self_check()
                        _CHECKED.setdefault(model, {})[key] = (self.path_, dict(self.check_))
                    else:  # this model passed (or failed) the check already in this process
                        self.path_, self.check_ = done[0], dict(done[1])
            self._ready = True
        return self

    def _self_check(self):
        """Tree pass vs ordinary causal passes on a probe longer than the sliding window."""
        root, items, w = self_check_probe(self.mask_plan_, self.vocab_.special, len(self.tokenizer_))
        n_root = len(root)
        try:
            rid = self._root(tuple(root))
            tree = self._score_tree(items, rid)
        except Exception as err:  # the model refused the tree pass: fall back, say why
            self.path_ = "fallback"
            self.check_.update(reason=f"the tree pass raised {type(err).__name__}: {err}")
            warnings.warn(
                f"{type(self.model_).__name__}: the tree pass failed its self-check "
                f"({type(err).__name__}: {str(err)[:200]}); scoring with the exact fallback instead.",
                EngineCheckWarning, stacklevel=4)
            return
        ref = self._score_fallback(items)
        diff = max(float(np.max(np.abs(a - b))) for a, b in zip(tree, ref))
        tol = _ATOL.get(str(self.dtype_).replace("torch.", ""), _HALF_ATOL)
        self.check_.update(max_abs_diff=diff, tolerance=tol, probe_root=n_root, window=w)
        if not diff <= tol:
            self.path_ = "fallback"
            self.check_["reason"] = f"tree pass differs from causal passes by {diff:.3g} nats on a probe"
            warnings.warn(
                f"{type(self.model_).__name__}: the tree pass differs from ordinary causal passes by "
                f"{diff:.3g} nats on a {n_root}-token probe (tolerance {tol}); scoring with the exact "
                f"fallback instead.", EngineCheckWarning, stacklevel=4)
        self._roots.clear()

    # --------------------------------------------------------------- encoding
    def encode(self, pieces, *, add_special_tokens=False) -> list[int]:
        """Token ids of the prompt made of ``pieces``, tokenized whole (user text never special).

        Parameters
        ----------
        pieces : sequence of (str, bool)

        Returns
        -------
        list of int

        Examples
        --------
        >>> from judge.testing import tiny_pair
        >>> Engine(*tiny_pair()).encode([("Hello ", False), ("world", True)])
        [19556, 905]
        """
        from judge.prompts import encode_pieces

        self.setup()
        return encode_pieces(self.tokenizer_, pieces, add_special_tokens=add_special_tokens)

    def option_ids(self, context: str, options, *, end_token=None, what="Option") -> list[list[int]]:
        """Canonical token ids of each option written right after ``context`` (cached).

        Parameters
        ----------
        context : str
            The end of the prompt (the text after the last user piece is enough).
        options : sequence of str, length K
        end_token : {"auto", True, False}, optional
            Default: the engine's ``end_token``.

        Returns
        -------
        list of K lists of int
            The scored sequences (end token appended where the policy says).

        Raises
        ------
        LabelError
            An option tokenizes to nothing or to special tokens.
        """
        self.setup()
        policy = self.end_token if end_token is None else end_token
        key = (context, tuple(options), policy)
        hit = self._option_cache.get(key)
        if hit is not None:
            return [list(x) for x in hit]
        seqs = option_token_ids(self.tokenizer_, context, options, special=self.vocab_.special, end_id=self.end_id_,
                                policy=policy, what=what)
        if len(self._option_cache) > 256:
            self._option_cache.clear()
        self._option_cache[key] = [tuple(x) for x in seqs]
        return seqs

    # ------------------------------------------------------------------ roots
    def _root(self, ids: tuple):
        """Key/value snapshot of a root token prefix (computed once, kept while in use)."""
        import torch
        from transformers import DynamicCache

        hit = self._roots.pop(ids, None)
        if hit is not None:
            self._roots[ids] = hit  # most recently used last
            return ids, hit
        kv = None
        if ids:
            cache = DynamicCache()  # full layers: a sliding-window cache would drop keys the tree needs
            x = torch.tensor([list(ids)], dtype=torch.long, device=self.model_.device)
            with torch.inference_mode():
                self.model_(input_ids=x, use_cache=True, logits_to_keep=1, **{cache_keyword(self.model_): cache})
            kv = [(layer.keys, layer.values) for layer in cache.layers]
        self._root_fed += len(ids)
        held = sum(len(r) for r in self._roots) + len(ids)
        while self._roots and (held > self.max_batch_tokens or len(self._roots) > 8):  # at most T tokens kept
            held -= len(next(iter(self._roots)))
            del self._roots[next(iter(self._roots))]
        self._roots[ids] = kv
        return ids, kv

    def close(self) -> None:
        """Release the model, tokenizer and cached keys/values this engine holds (idempotent).

        A model object passed in stays the caller's (only this engine's references are dropped);
        the next call sets the engine up again.

        Examples
        --------
        >>> from judge.testing import tiny_pair
        >>> eng = Engine(*tiny_pair()).setup()
        >>> eng.close(); hasattr(eng, "model_")
        False
        """
        with self._lock:
            for name in ("model_", "tokenizer_", "vocab_"):
                self.__dict__.pop(name, None)
            self._roots.clear()
            self._option_cache.clear()
            self._root_fed = 0
            self._ready = False

    def memory_bound(self) -> dict:
        """The most memory one call takes above an idle process, by part (bytes): `judge.engine.passes.memory_bound`
        of this engine's limits, dtype and attention-window kinds (loads the model)."""
        from judge.engine.passes import memory_bound

        self.setup()
        cfg = getattr(self.model_.config, "text_config", None) or self.model_.config
        kind, plan = self.mask_plan_
        return memory_bound(self.model_, max_batch_tokens=self.max_batch_tokens, dtype_bytes=self.dtype_.itemsize,
                            max_batch_logits=self.max_batch_logits or default_max_logits(cfg.vocab_size),
                            mask_types=len(plan) if kind == "dict" else 1)

    def set_root(self, ids) -> None:
        """Cache the key/values of ``ids`` (the shared instructions) for later :meth:`score` calls."""
        self.setup()
        if self.path_ == "fallback":  # the fallback runs every prompt whole
            return
        with self._lock:
            self._root(tuple(int(t) for t in ids))

    # ---------------------------------------------------------------- scoring
    def score(self, queries, *, root=None, first_token=False, batch_size=8) -> list[np.ndarray]:
        """log P(option | prompt) for every option of every query.

        Parameters
        ----------
        queries : sequence of Query, length Q
        root : sequence of int, optional
            Token prefix to cache (default: the longest common token prefix of
            the queries' prompts, when at least 16 tokens).
        first_token : bool
            Score only each option's first token (one pass, no trie).
        batch_size : int
            Rows per forward pass; the queries of one call that share their
            first user piece (a text, a state) are kept in one row, so their
            common tokens are fed once.

        Returns
        -------
        list of Q ndarrays of float64, shape (K_q,)

        Examples
        --------
        >>> from judge.engine import Query
        >>> from judge.testing import tiny_pair
        >>> q = Query((("The capital of France is", False),), (" Paris", " Rome"))
        >>> Engine(*tiny_pair()).score([q])[0].shape
        (2,)
        """
        self.setup()
        items = self.lower(queries, first_token=first_token)
        if root is None:
            root = default_root([it.ids for it in items])
        return self.score_items(items, root=root, batch_size=batch_size)

    def lower(self, queries, *, first_token=False) -> list[Item]:
        """The token-level items :meth:`score` scores (:func:`judge.engine.protocol.lower_queries`)."""
        self.setup()
        return lower_queries(self, queries, first_token=first_token)

    def score_items(self, items, *, root=(), batch_size=8, progress=None, pack=1) -> list[np.ndarray]:
        """Score token-level items (prompt ids + option token sequences); see :meth:`score`.

        ``pack`` groups share one row of the forward pass (packing instead of
        padding: fewer rows, one copy of the root's keys per row, but
        attention over the whole row); ``batch_size`` caps the rows of a pass.
        Passes are planned by :func:`judge.engine.passes.plan_passes` within
        ``max_batch_tokens`` and ``max_batch_logits`` (a group too large for one
        row is split over rows that share its cached prefix). ``progress``: a bar
        (``"auto"``: shown only once the scoring has taken 2 s, so short calls print none).
        """
        return self._run_items(items, root, batch_size, progress, pack, False)[0]

    def score_items_states(self, items, *, root=(), batch_size=8, pack=1, progress=None) -> tuple[list, np.ndarray]:
        """:meth:`score_items` and each item's answer-slot state from the same forward pass: (scores, (n, d)).

        The decoder's final-layer output at the prompt's last token, as :meth:`hidden_states` gives it
        (:class:`~judge.engine.protocol.HiddenStates`). On the fallback path: a second pass.

        >>> from judge.testing import tiny_pair
        >>> eng = Engine(*tiny_pair())
        >>> scores, H = eng.score_items_states([Item([1, 2, 3], [[7], [8, 9]])])
        >>> H.shape, bool(np.abs(H - eng.hidden_states([Item([1, 2, 3], [[7]])])).max() < 1e-4)
        ((1, 64), True)
        """
        return self._run_items(items, root, batch_size, progress, pack, True)

    def hidden_states(self, items, *, root=(), pooling="last", batch_size=16) -> np.ndarray:
        """Each item's prompt state, at its last token (``"last"``) or mean-pooled: (n, d) float64.

        :func:`judge.engine.states.states_of_prompts` of the items' prompt ids (their options are not
        read), on this engine's model; ``root``: a shared prefix whose keys/values are computed once
        (not on the fallback path, which runs every prompt whole).
        """
        self.setup()
        with self._lock:
            return states_of_prompts(self.model_, [it.ids for it in items], () if self.path_ == "fallback" else root,
                                     batch_size=batch_size, pooling=pooling)

    def _run_items(self, items, root, batch_size, progress, pack, states):
        self.setup()
        if not isinstance(pack, int) or pack < 1:
            raise ValueError(f"pack must be a positive int, got {pack!r}.")
        items = list(items)
        self._check_context(items)
        with self._lock:
            if self.path_ == "fallback":
                out = self._score_fallback(items)
                return out, (self.hidden_states(items, root=root) if states else None)
            T = self.max_batch_tokens
            cfg = getattr(self.model_.config, "text_config", None) or self.model_.config
            P = self.max_batch_logits or default_max_logits(cfg.vocab_size)
            passes = plan_passes(items, root, max_tokens=T, max_logits=P, max_rows=batch_size, pack=pack)
            out: list = [None] * len(items)
            hidden = None
            parts: dict[int, list] = {}  # item -> [(option indices, scores)] where its options were split
            self._root_fed, rid = 0, None
            it = passes
            if progress:
                from tqdm.auto import tqdm

                it = tqdm(passes, desc="scoring", unit="pass", delay=2.0 if progress == "auto" else 0.0)
            tokens = 0
            for p in it:
                if rid is None or rid[0] != p.root:
                    rid = self._root(p.root)
                sel = [(i, opts) for row in p.rows for i, opts in row]
                part = [Item(items[i].ids, items[i].options if opts is None else [items[i].options[j] for j in opts],
                             items[i].first_only, b) for b, row in enumerate(p.rows) for i, opts in row]
                res = self._score_tree(part, rid, states=states)
                if states:  # an item split over passes: its state from the first
                    res, H = res
                    hidden = np.full((len(items), H.shape[1]), np.nan) if hidden is None else hidden
                    for (i, _), h in zip(sel, H):
                        hidden[i] = h if np.isnan(hidden[i, 0]) else hidden[i]
                tokens += self._last_fed
                for (i, opts), r in zip(sel, res):
                    if opts is None:
                        out[i] = r
                    else:
                        parts.setdefault(i, []).append((opts, r))
            for i, chunks in parts.items():
                out[i] = np.empty(len(items[i].options))
                for opts, r in chunks:
                    out[i][opts] = r
            self.last_usage_ = {"input_tokens": int(tokens + self._root_fed)}
            return out, hidden

    def _check_context(self, items) -> None:
        """Refuse a prompt whose options run past the model's trained positions (a silently meaningless score)."""
        ctx = model_context(self.model_)
        if ctx is None or not items:
            return
        need = [len(it.ids) + (1 if it.first_only else max((len(o) for o in it.options), default=0)) for it in items]
        worst = int(np.argmax(need))
        if need[worst] > ctx:
            raise ValueError(f"Item {worst} needs {need[worst]} positions (a {len(items[worst].ids)}-token prompt and "
                             f"its longest option), over the model's {ctx}-token context; shorten the prompt.")

    def search(self, items, trie, *, root=(), bias=None, temperature=None, mode="argmax", eps=0.0, budget=None,
               per_round=None, subtree=0, batch_size=8):
        """Certified best-first search of items that share one option trie (:mod:`judge.engine.search`).

        ``mode="argmax"``: exactly the argmax of full scoring after ``bias`` and ``temperature``,
        proven by the prefix bound; ``mode="tolerance"``: a distribution within total variation
        ``eps``; ``budget`` caps the tokens fed per text (answers past it are flagged
        uncertified, with their gap). Tree path only.

        Parameters
        ----------
        items : list of Item, length n
        trie : judge.engine.OptionTrie
            Of the items' (shared, prefix-free) option sequences.
        root : sequence of int
        bias : ndarray of shape (K,), optional
        temperature : float, optional
        mode : {"argmax", "tolerance"}
        eps : float
        budget : int, optional
        per_round, subtree, batch_size : int
            See :func:`judge.engine.search.search`.

        Returns
        -------
        judge.engine.search.SearchResult

        Examples
        --------
        >>> from judge.engine import Engine, Item, OptionTrie
        >>> from judge.testing import tiny_pair
        >>> eng = Engine(*tiny_pair())
        >>> seqs = eng.option_ids("Label:", [" yes", " no", " maybe"])
        >>> res = eng.search([Item(eng.encode([("Is it? Label:", False)]), seqs)], OptionTrie(seqs))
        >>> bool(res.certified[0]), res.dense(3).shape
        (True, (1, 3))
        """
        from judge.engine.search import search

        self.setup()
        if self.path_ != "tree":
            raise ValueError(f"search needs the tree path; this engine runs the {self.path_!r} path "
                             f"({self.check_.get('reason')}); score fully with score_items().")
        with self._lock:
            rid = self._root(tuple(int(t) for t in root))
            res = search(self.model_, self.mask_plan_, self.dtype_, rid, items, trie, bias=bias,
                         temperature=temperature, mode=mode, eps=eps, budget=budget, per_round=per_round,
                         subtree=subtree, batch_size=batch_size)
        self.last_usage_ = {"input_tokens": int(res.fed.sum())}
        return res

    def logprob_tensors(self, items, *, batch_size: int = 8) -> list:
        """log P(option | prompt) of every option of every item, as differentiable torch tensors.

        The same tree pass as :meth:`score_items` (no root cache: every prompt is fed whole), run
        with autograd on, so a loss over the options' log-probabilities can train the model
        (adapters, say). Tree path only.

        Parameters
        ----------
        items : list of Item, length n
        batch_size : int
            Items per forward pass.

        Returns
        -------
        list of n torch.Tensor of float64, shape (K_i,)

        Examples
        --------
        >>> from judge.engine import Item
        >>> from judge.testing import tiny_pair
        >>> eng = Engine(*tiny_pair()).setup()
        >>> t = eng.logprob_tensors([Item([1, 2, 3], [[7], [8, 9]])])[0]
        >>> t.shape, t.requires_grad
        (torch.Size([2]), True)
        >>> bool(abs(t.detach().numpy() - eng.score_items([Item([1, 2, 3], [[7], [8, 9]])])[0]).max() < 1e-5)
        True
        """
        self.setup()
        if self.path_ != "tree":
            raise ValueError(f"logprob_tensors needs the tree path; this engine runs the {self.path_!r} path "
                             f"({self.check_.get('reason')}).")
        items = list(items)
        out = [None] * len(items)
        with self._lock:
            for s in range(0, len(items), batch_size):
                part = [Item(it.ids, it.options, it.first_only, g) for g, it in enumerate(items[s:s + batch_size])]
                for j, t in enumerate(self._score_tree(part, ((), None), grad=True)):
                    out[s + j] = t
        return out

    def _score_tree(self, items, rid, grad=False, states=False):
        got = tree_pass(self.model_, self.mask_plan_, self.dtype_, rid, items, grad=grad, states=states)
        self._last_fed = got[1]
        return (got[0], got[2]) if states else got[0]

    # ---------------------------------------------------------- fallback pass
    def _score_fallback(self, items) -> list[np.ndarray]:
        """Each prompt as an ordinary causal sequence, its options batched on a copy of its cache."""
        out, fed = score_fallback(self.model_, items)
        self._last_fed = fed
        self.last_usage_ = {"input_tokens": int(fed)}
        return out

