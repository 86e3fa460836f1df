"""The scoring engine: exact log-probabilities of every option of every query, in one pass.

A :class:`Query` is a prompt (text pieces, some of them user text) and the
options that may follow it. :meth:`Engine.score` scores a list of queries:

* Every prompt is tokenized **whole** (``judge.prompts.encode_pieces``), so its
  tokens equal tokenizing the rendered prompt in one call; user pieces never
  become special tokens.
* The longest token prefix shared with the engine's cached **root** (the
  instructions) is taken from a key/value cache computed once; prompts that
  share more tokens (one state, many questions) share nodes of one
  :class:`~judge.forest.Forest` row; each answer slot carries the token trie of
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

What it deliberately does not do: render prompts from questions (callers do:
:class:`judge.Classifier`, :mod:`judge.decisions`), calibrate, or decode.
"""

from __future__ import annotations

import os
import threading
import warnings
import weakref
from dataclasses import dataclass

import numpy as np

from judge._errors import LabelError
from judge.forest import Forest, row_mask

__all__ = ["Query", "Engine", "EngineCheckWarning", "native_gqa"]

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


@dataclass(frozen=True)
class Query:
    """A prompt and the options that may follow it.

    Parameters
    ----------
    pieces : tuple of (str, bool)
        The prompt text in order, up to where the answer starts; the flag is
        True for user text, which never becomes special tokens.
    options : tuple of str
        The options exactly as the model would write them after the prompt.

    Examples
    --------
    >>> q = Query((("Is the sky green? Answer:", False),), (" yes", " no"))
    >>> len(q.options)
    2
    """

    pieces: tuple
    options: tuple

    def __post_init__(self):
        object.__setattr__(self, "pieces", tuple((str(t), bool(u)) for t, u in self.pieces))
        object.__setattr__(self, "options", tuple(self.options))
        if not self.options:
            raise ValueError("A Query needs at least one option; got none.")


@dataclass
class _Item:
    """Token-level work for one query: prompt ids and option token sequences."""

    ids: list
    options: list  # list of list of int
    first_only: bool = False
    group: int = 0


def _mask_plan(model):
    """How to express the tree mask for this model: ``(kind, windows)`` or ``(None, reason)``.

    kind "single": one 4D mask for every layer, window ``windows[None]``;
    kind "dict": one mask per layer type ``{type: window}``.
    """
    import inspect

    cfg = getattr(model, "config", None)
    cfg = getattr(cfg, "text_config", None) or cfg
    if cfg is None:
        return None, "the model has no config"
    if getattr(cfg, "alibi", False) or getattr(cfg, "model_type", "") in ("bloom", "mpt", "jais"):
        return None, "ALiBi attention biases are computed from the 2D padding mask, not from a tree mask"
    if getattr(cfg, "attention_layers", None) or getattr(cfg, "attention_types", None):
        return None, "its local attention layers build their own masks"
    types = getattr(cfg, "layer_types", None)
    window = getattr(cfg, "sliding_window", None)
    if types is None:
        use = getattr(cfg, "use_sliding_window", True)
        return "single", {None: int(window) if (window and use) else None}
    windows = {}
    for t in set(types):
        if t == "full_attention":
            windows[t] = None
        elif t == "sliding_attention":
            windows[t] = int(window) if window else None
        else:
            return None, f"layer type {t!r} has no tree-mask equivalent"
    if len(set(windows.values())) == 1:
        return "single", {None: next(iter(windows.values()))}
    try:
        src = inspect.getsource(inspect.getmodule(type(model)))
    except (OSError, TypeError):
        src = ""
    if "isinstance(causal_mask_mapping := attention_mask, dict)" not in src:
        return None, "its layers differ in window but it does not accept a mask per layer type"
    return "dict", windows


def _logits_of(out):
    return out.logits


class Engine:
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
        Run the self-check at first use (compare the tree pass with the
        ordinary causal fallback on a probe). ``False`` trusts the structural
        plan alone.
    path : {"auto", "tree", "fallback"}
        Force a path (``"tree"`` raises where the mask cannot be expressed).

    Attributes
    ----------
    model_, tokenizer_, vocab_ : after first use
    path_ : {"tree", "fallback"}
    check_ : dict
        The self-check's result (max difference, probe sizes, reason).

    Examples
    --------
    >>> eng = Engine(model, tok)                                             # doctest: +SKIP
    >>> [s.shape for s in eng.score([Query((("Sky colour:", False),), (" blue", " green"))])]  # doctest: +SKIP
    [(2,)]
    """

    def __init__(self, model=None, tokenizer=None, *, device=None, end_token="auto", check=True,
                 path="auto"):
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
        self._lock = threading.RLock()
        self._ready = False
        self._roots: dict[tuple, object] = {}
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
            import torch

            from judge.automaton.vocab import Vocabulary
            from judge.models import load_model

            model, tok = load_model(self.model, self.tokenizer, device=self.device)
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
            self._dtype = next(model.parameters()).dtype
            kind, plan = _mask_plan(model)
            self._plan = (kind, plan)
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
                    key = (str(self._dtype), str(model.device))
                    done = _CHECKED.get(model, {}).get(key)
                    if done is None:
                        self._self_check()
                        _CHECKED.setdefault(model, {})[key] = (self.path_, dict(self.check_))
                    else:  # this model passed (or failed) the check already in this process
                        self.path_, self.check_ = done[0], dict(done[1])
            self._ready = True
        return self

    def _windows(self):
        kind, plan = self._plan
        return kind, plan

    def _self_check(self):
        """Tree pass vs ordinary causal passes on a probe longer than the sliding window."""
        windows = [w for w in self._plan[1].values() if w]
        w = min(windows) if windows else None
        n_root = (w + 8) if (w and w <= 2048) else 24
        rng = np.random.default_rng(0)
        pool = np.flatnonzero(~np.asarray(self.vocab_.special, bool))
        pool = pool[pool < len(self.tokenizer_)]
        toks = [int(t) for t in rng.choice(pool, n_root + 40)]
        root = toks[:n_root]
        opts = [toks[n_root:n_root + 1], toks[n_root:n_root + 3], toks[n_root + 3:n_root + 5],
                toks[n_root + 5:n_root + 6]]
        # items 0 and 2 share one row (and the whole root); item 1 sees only half of the root
        items = [_Item(root + toks[n_root + 6:n_root + 11], opts, group=0),
                 _Item(root[: n_root // 2] + toks[n_root + 11:n_root + 20], opts, group=1),
                 _Item(root + toks[n_root + 20:n_root + 22], opts, group=0)]
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
        tol = _ATOL.get(str(self._dtype).replace("torch.", ""), _HALF_ATOL)
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
        >>> Engine(model, tok).encode([("Hello ", False), ("world", True)])     # doctest: +SKIP
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
        tok = self.tokenizer_
        base = tok(context, add_special_tokens=False)["input_ids"]
        fulls = tok([context + o for o in options], add_special_tokens=False)["input_ids"]
        seqs = []
        for opt, full in zip(options, fulls):
            if full[: len(base)] == base and len(full) > len(base):
                ids = full[len(base):]
            else:  # the option merged with the prompt's end: tokenize it alone
                ids = tok(opt, add_special_tokens=False)["input_ids"]
            bad = [i for i in ids if i >= len(self.vocab_.special) or self.vocab_.special[i]]
            if not ids or bad:
                got = "nothing" if not ids else f"special or unknown token(s) {tok.convert_ids_to_tokens(bad)}"
                raise LabelError(
                    f"{what} {opt!r} cannot be spelled by this tokenizer's vocabulary: it tokenizes to "
                    f"{got}; give it a name the tokenizer can write.")
            seqs.append(list(ids))
        if policy is True:
            seqs = [x + [self.end_id_] for x in seqs]
        elif policy == "auto":
            prefixes = {tuple(x[:j]) for x in seqs for j in range(1, len(x))}
            seqs = [x + [self.end_id_] if tuple(x) in prefixes else x for x in seqs]
        if len(self._option_cache) > 256:
            self._option_cache.clear()
        self._option_cache[key] = [tuple(x) for x in seqs]
        return seqs

    # ------------------------------------------------------------------ roots
    def _root(self, ids: tuple):
        """Key/value snapshot of a root token prefix (computed once, kept while in use)."""
        import torch
        from transformers import DynamicCache

        hit = self._roots.get(ids)
        if hit is not None:
            return ids, hit
        kv = None
        if ids:
            cache = DynamicCache()  # full layers: a sliding-window cache would drop keys the tree needs
            x = torch.tensor([list(ids)], dtype=torch.long, device=self.model_.device)
            with torch.inference_mode():
                self.model_(input_ids=x, use_cache=True, logits_to_keep=1, **{_cache_kw(self.model_): cache})
            kv = [(layer.keys, layer.values) for layer in cache.layers]
        if len(self._roots) > 8:
            self._roots.clear()
        self._roots[ids] = kv
        return ids, kv

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
        >>> q = Query((("The capital of France is", False),), (" Paris", " Rome"))
        >>> Engine(model, tok).score([q])[0].shape                           # doctest: +SKIP
        (2,)
        """
        self.setup()
        queries = list(queries)
        ids = [self.encode(q.pieces) for q in queries]
        items = []
        groups: dict[tuple, int] = {}
        for q, x in zip(queries, ids):
            ctx = "".join(t for t, _ in q.pieces)[-64:]
            # queries about the same state (their first user piece) share one row: the state is fed once
            g = groups.setdefault(next((t for t, u in q.pieces if u), None), len(groups))
            items.append(_Item(x, self.option_ids(ctx, q.options), first_only=first_token, group=g))
        if root is None:
            root = _common_prefix(ids) if len(ids) > 1 else []
            if len(root) < 16:
                root = []
        return self.score_items(items, root=root, batch_size=batch_size)

    def score_items(self, items, *, root=(), batch_size=8, progress=None, pack=1) -> list[np.ndarray]:
        """Score token-level items (prompt ids + option token sequences); see :meth:`score`.

        ``pack`` groups share one row of the forward pass (packing instead of
        padding: fewer rows, one copy of the root's keys per row, but
        attention over the whole row); ``batch_size`` counts groups.
        """
        self.setup()
        if not isinstance(pack, int) or pack < 1:
            raise ValueError(f"pack must be a positive int, got {pack!r}.")
        with self._lock:
            if self.path_ == "fallback":
                out = self._score_fallback(items)
                return out
            rid = self._root(tuple(int(t) for t in root))
            out = [None] * len(items)
            order = _group_order(items)
            if pack > 1:  # consecutive groups (similar lengths) become one row
                items = [_Item(it.ids, it.options, it.first_only, g // pack)
                         for g, grp in enumerate(order) for it in [items[i] for i in grp]]
                flat = [i for grp in order for i in grp]
                back = {j: i for j, i in enumerate(flat)}
                order = [[j for j in range(len(flat)) if items[j].group == r]
                         for r in range((len(order) + pack - 1) // pack)]
            else:
                back = None
            batches = [order[i:i + batch_size] for i in range(0, len(order), batch_size)]
            it = batches
            if progress:
                from tqdm.auto import tqdm

                it = tqdm(batches, desc="scoring", unit="batch")
            tokens = 0
            for groups in it:
                sel = [i for g in groups for i in g]
                res = self._score_tree([items[i] for i in sel], rid)
                tokens += self._last_fed
                for i, r in zip(sel, res):
                    out[back[i] if back is not None else i] = r
            self.last_usage_ = {"input_tokens": int(tokens)}
            return out

    # -------------------------------------------------------------- tree pass
    def _rows(self, items, root_ids):
        """One Forest row per group of items."""
        rows: dict[int, Forest] = {}
        R = len(root_ids)
        for qi, it in enumerate(items):
            f = rows.setdefault(it.group, Forest())
            x = it.ids
            lcp = 0
            lim = min(R, len(x) - 1)
            while lcp < lim and x[lcp] == root_ids[lcp]:
                lcp += 1
            if len(x) < 1:
                raise ValueError("A prompt needs at least one token.")
            end = f.add_path(x[lcp:], -1, lcp)
            paths = []
            for seq in it.options:
                node, path = end, []
                for j, t in enumerate(seq):
                    if it.first_only and j > 0:
                        break
                    node = f.add(t, node, lcp, fed=False)
                    f.fed[f.parent[node]] = True
                    path.append(node)
                paths.append(path)
            from judge.forest import Slot

            f.slots.append(Slot(qi, end, paths))
        return list(rows.values())

    def _masks(self, rows, fed, R, dev):
        """Additive masks per layer type for a batch of rows: dict or a tensor (B, 1, N, R + N)."""
        import torch

        kind, plan = self._plan
        N = max(len(f) for f in fed)
        neg = torch.finfo(self._dtype).min
        out = {}
        for name, window in plan.items():
            m = np.zeros((len(rows), N, R + N), bool)
            for b, (row, nodes) in enumerate(zip(rows, fed)):
                n = len(nodes)
                pos = np.asarray(row.position, np.int64)[nodes]
                par = _remap_parents(row, nodes)
                rl = np.asarray(row.root_len, np.int64)[nodes]
                m[b, :n, : R + n] = row_mask(pos, par, rl, R, window)[:, : R + n]
                if n < N:  # padding tokens see themselves only
                    m[b, np.arange(n, N), R + np.arange(n, N)] = True
                    m[b, :n, R + n:] = False
            t = torch.zeros(m.shape, dtype=self._dtype)
            t.masked_fill_(torch.from_numpy(~m), neg)
            out[name] = t[:, None].to(dev)
        if kind == "single":
            return out[None]
        return out

    def _score_tree(self, items, rid) -> list[np.ndarray]:
        import torch
        from transformers import DynamicCache

        root_ids, kv = rid
        R = len(root_ids) if kv is not None else 0
        rows = self._rows(items, root_ids if kv is not None else ())
        fed = [row.fed_nodes() for row in rows]
        B, N = len(rows), max(len(f) for f in fed)
        dev = self.model_.device
        ids = torch.zeros((B, N), dtype=torch.long)
        pos = torch.zeros((B, N), dtype=torch.long)
        reads = []  # per row: fed-index of every node whose logits are read
        for b, (row, nodes) in enumerate(zip(rows, fed)):
            ids[b, : len(nodes)] = torch.as_tensor(np.asarray(row.tokens)[nodes])
            pos[b, : len(nodes)] = torch.as_tensor(np.asarray(row.position)[nodes])
            read = sorted({int(row.parent[n]) for s in row.slots for p in s.option_paths for n in p})
            reads.append(read)
        index = [{int(n): j for j, n in enumerate(nodes)} for nodes in fed]
        P = max(len(r) for r in reads)
        keep = torch.zeros((B, P), dtype=torch.long)
        for b, r in enumerate(reads):
            cols = [index[b][n] for n in r]
            keep[b, : len(cols)] = torch.as_tensor(cols)
            keep[b, len(cols):] = cols[-1]
        mask = self._masks(rows, fed, R, dev)
        cache = DynamicCache()
        if kv is not None:
            for i, (k, v) in enumerate(kv):
                cache.update(k.expand(B, *k.shape[1:]), v.expand(B, *v.shape[1:]), i)
        with torch.inference_mode(), native_gqa(dev):
            out = self.model_(input_ids=ids.to(dev), attention_mask=mask, position_ids=pos.to(dev),
                              use_cache=True, logits_to_keep=keep.to(dev), **{_cache_kw(self.model_): cache})
            logits = _logits_of(out).reshape(B, P, -1)
            results = [None] * len(items)
            for b, row in enumerate(rows):
                r = reads[b]
                lse = _lse64(logits[b, : len(r)])
                at = {n: j for j, n in enumerate(r)}
                for slot in row.slots:
                    parents = [at[int(row.parent[n])] for p in slot.option_paths for n in p]
                    toks = [row.tokens[n] for p in slot.option_paths for n in p]
                    lp = (logits[b, parents, toks].double() - lse[parents]).cpu().numpy()
                    lens = [len(p) for p in slot.option_paths]
                    results[slot.query] = np.add.reduceat(lp, np.r_[0, np.cumsum(lens)[:-1]]) \
                        if len(lp) else np.zeros(len(lens))
        self._last_fed = int(sum(len(f) for f in fed))
        return results

    def _continue(self, it, cache, longer, kw, dev) -> np.ndarray:
        """Options' later tokens continued from the prompt's cache: batched, or one at a time for
        caches that cannot be repeated along the batch (recurrent / linear-attention states)."""
        add = np.zeros(len(it.options))
        try:
            vals = _continuation(self.model_, it, cache, longer, kw, dev)
        except (AttributeError, NotImplementedError, TypeError):
            vals = [_continuation(self.model_, it, cache, [k], kw, dev)[0] for k in longer]
        add[longer] = vals
        return add

    # ---------------------------------------------------------- fallback pass
    def _score_fallback(self, items) -> list[np.ndarray]:
        """Each prompt as an ordinary causal sequence, its options batched on a copy of its cache."""
        import torch

        dev = self.model_.device
        kw = _cache_kw(self.model_)
        out = []
        fed = 0
        with torch.inference_mode():
            for it in items:
                x = torch.tensor([it.ids], dtype=torch.long, device=dev)
                res = self.model_(input_ids=x, use_cache=True, logits_to_keep=1)
                cache = getattr(res, "cache", None) or getattr(res, "past_key_values", None)
                first = _logits_of(res)[0, -1]
                lse0 = _lse64(first[None])[0]
                fed += len(it.ids)
                scores = np.zeros(len(it.options))
                longer = [k for k, s in enumerate(it.options) if len(s) > 1 and not it.first_only]
                for k, s in enumerate(it.options):
                    scores[k] = float(first[s[0]].double() - lse0)
                if longer:
                    scores += self._continue(it, cache, longer, kw, dev)
                    fed += sum(len(it.options[k]) - 1 for k in longer)
                out.append(scores)
        self._last_fed = fed
        self.last_usage_ = {"input_tokens": int(fed)}
        return out


def _continuation(model, it, cache, rows, kw, dev):
    """Log-probs of tokens 2.. of options ``rows`` continued from ``cache`` as one right-padded batch."""
    import copy

    import torch

    L = max(len(it.options[k]) - 1 for k in rows)
    n = len(rows)
    inp = torch.zeros((n, L), dtype=torch.long)
    att = torch.zeros((n, len(it.ids) + L), dtype=torch.long)
    att[:, : len(it.ids)] = 1
    for r, k in enumerate(rows):
        s = it.options[k][:-1]
        inp[r, : len(s)] = torch.as_tensor(s)
        att[r, len(it.ids): len(it.ids) + len(s)] = 1
    c = copy.deepcopy(cache)
    if n > 1:
        c.batch_repeat_interleave(n)
    lg = model(input_ids=inp.to(dev), attention_mask=att.to(dev), use_cache=True, **{kw: c}).logits
    out = []
    for r, k in enumerate(rows):
        s = it.options[k]
        x = lg[r, : len(s) - 1]
        out.append(float((x[torch.arange(len(s) - 1), torch.as_tensor(s[1:])].double() - _lse64(x)).sum()))
    return out


class native_gqa:
    """On CPU, let transformers' sdpa path use torch's native grouped-query attention with a mask.

    transformers repeats the key/value heads (``repeat_kv``, a copy of the whole cache per layer)
    whenever a mask is given, because CUDA kernels then fall back to the math kernel anyway. On
    CPU the math kernel is what runs in both cases, and native GQA gives bit-identical scores
    (checked on SmolLM2) at about half the time of a tree pass. Scoped to our forward calls
    (under the engine's lock); a user's own setting of the variable is left alone.

    Examples
    --------
    >>> import os
    >>> with native_gqa("cpu"):
    ...     on = os.environ.get("TRANSFORMERS_SDPA_FORCE_GQA")
    >>> on == "1" or "TRANSFORMERS_SDPA_FORCE_GQA" in os.environ
    True
    """

    def __init__(self, device):
        self.on = getattr(device, "type", str(device)) == "cpu" and "TRANSFORMERS_SDPA_FORCE_GQA" not in os.environ

    def __enter__(self):
        if self.on:
            os.environ["TRANSFORMERS_SDPA_FORCE_GQA"] = "1"

    def __exit__(self, *exc):
        if self.on:
            os.environ.pop("TRANSFORMERS_SDPA_FORCE_GQA", None)


def _cache_kw(model) -> str:
    import inspect

    params = inspect.signature(model.forward).parameters
    return "cache" if "cache" in params else "past_key_values"


def _lse64(logits):
    """float64 logsumexp over the last axis, in row chunks (bounded memory): (M, V) -> (M,)."""
    import torch

    out = torch.empty(logits.shape[0], dtype=torch.float64, device=logits.device)
    step = max(1, (1 << 24) // max(1, logits.shape[-1]))
    for i in range(0, logits.shape[0], step):
        out[i:i + step] = torch.logsumexp(logits[i:i + step].double(), dim=-1)
    return out


def _remap_parents(row: Forest, nodes: np.ndarray) -> np.ndarray:
    index = {int(n): j for j, n in enumerate(nodes)}
    return np.asarray([index.get(int(row.parent[n]), -1) for n in nodes], np.int64)


def _common_prefix(seqs) -> list[int]:
    first = seqs[0]
    n = min(len(s) for s in seqs)
    i = 0
    while i < n and all(s[i] == first[i] for s in seqs):
        i += 1
    return list(first[:i])


def _group_order(items):
    """Groups of item indices (items of one group share a row), longest prompts first."""
    groups: dict[int, list[int]] = {}
    for i, it in enumerate(items):
        groups.setdefault(it.group, []).append(i)
    return sorted(groups.values(), key=lambda g: -max(len(items[i].ids) for i in g))
