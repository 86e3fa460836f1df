"""A label set compiled onto a scorer: the one place that decides how texts become label scores.

:func:`compile_labels` builds a :class:`CompiledLabels` from explicit parameters
(:class:`LabelSpec`: the labels as the model writes them, the prompt, the path and its
options, the scorer's settings); nothing in it reads a Classifier. It is frozen: a
:class:`judge.Classifier` holds one and, when a parameter changes, builds another and swaps it
whole. Derived things that cost time and are not always needed (a retrieval shortlist's label
index, the label automaton, the label-free prior, the labels' sentence vectors) are built once
on first use (:meth:`CompiledLabels.derived`) and live exactly as long as the set.

:meth:`CompiledLabels.score` is the one dispatch between the paths, and returns what it did
(:class:`Scored`: the scores, the path taken and the certified search's report):

* ``exact`` — log P(label | prompt) summed over each label's canonical tokens (plus the
  end token where a label's tokens are a prefix of another's): what ``auto`` picks.
* ``first_token`` — each label's canonical first-token log-probability only (what a
  constrained decoder commits to at its first step), renormalised over the labels by the
  caller; not the labels' sequence likelihood. ``auto`` picks it only when every label is a
  single token, where it equals ``exact``.
* ``search`` — the certified argmax of full exact scoring (or a distribution within a
  tolerance), expanding only the label-trie subtrees a prefix bound cannot rule out
  (:class:`judge.engine.protocol.TreeSearch`): ``auto`` above ``decode_above`` labels, and
  any ``exact`` set when the caller asks for a certified answer.
* ``decode`` — beam search through the label automaton (it can miss the argmax).
* ``shortlist`` — retrieval keeps M labels per text, scored exactly (:func:`score_shortlist`).

The paths' steps (texts to token items, think-then-answer, each path's scoring) are
:mod:`judge.label_paths`; scorers are used through :class:`judge.engine.protocol.Scorer` and the
capabilities each step checks for (:class:`~judge.engine.protocol.TreeSearch` for the search,
:class:`~judge.engine.protocol.LocalModel` for generation and the model's own states,
:class:`~judge.engine.protocol.RootCaching` for the instructions' cache).

What it deliberately does not do: calibrate or validate user arguments (the Classifier does),
or keep the last call's report (the caller does, from :class:`Scored`).
"""

from __future__ import annotations

import threading
import warnings
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np

from judge.engine.protocol import HiddenStates, LocalModel, RootCaching, TreeSearch
from judge.label_paths import (
    local_model,
    score_decode,
    score_exact,
    score_shortlist,
    search_texts,
    think,
    vocabulary,
)
from judge.prompts import DEFAULT_PROMPT, PromptTemplate

__all__ = ["LabelSpec", "ScoreOptions", "Scored", "CompiledLabels", "compile_labels", "length_divisors"]


@dataclass(frozen=True)
class LabelSpec:
    """What a label set is compiled from: every parameter, explicit.

    Parameters
    ----------
    labels : tuple of str, length K
        The classes as the caller names them.
    names : tuple of str, length K
        What the model writes for each label (`judge.labels.label_names_for`).
    prompt : PromptTemplate, str or None
        None: :data:`judge.prompts.DEFAULT_PROMPT`; a str is a completion template.
    method : {"auto", "first_token", "exact", "search", "decode"}
    decode_above : int
        ``auto`` searches above this many labels.
    think, think_tokens : bool, int
        Think-then-answer, and the reasoning's length.
    rotations : int
        Label-list orders averaged over.
    top_k : int
        Distinct labels the decode path returns.
    shortlist : int or None
        Labels kept per text by retrieval; ``shortlist_encoder`` embeds them.
    model, tokenizer, device, end_token, backend
        The scorer's settings (`judge.backends.make_scorer`).
    length_norm : {None, "token", "byte"}
        Each label's log-probability divided by its length (:func:`length_divisors`).

    Examples
    --------
    >>> LabelSpec(("yes", "no"), ("yes", "no")).method
    'auto'
    """

    labels: tuple
    names: tuple
    prompt: Any = None
    method: str = "auto"
    decode_above: int = 2000
    think: bool = False
    think_tokens: int = 128
    rotations: int = 1
    top_k: int = 5
    shortlist: int | None = None
    shortlist_encoder: Any = None
    model: Any = None
    tokenizer: Any = None
    device: Any = None
    end_token: Any = "auto"
    backend: str = "transformers"
    length_norm: str | None = None


@dataclass(frozen=True)
class ScoreOptions:
    """How one scoring call runs (not what is compiled: changing these never recompiles).

    Parameters
    ----------
    batch_size : int
        Texts per forward pass (1: bit-identical scores whatever else is in the call).
    pack : int
        Texts packed into one row of a pass.
    progress : bool, "auto" or None
        A progress bar (None: when there are more than 4 batches).
    search_budget : int or None
        Most tokens the certified search feeds per text.
    search_tolerance : float
        The ``search`` path's total-variation tolerance for full distributions.

    Examples
    --------
    >>> ScoreOptions(batch_size=4).pack
    1
    """

    batch_size: int = 8
    pack: int = 1
    progress: Any = None
    search_budget: int | None = 20_000
    search_tolerance: float = 1e-3


@dataclass(frozen=True)
class Scored:
    """What :meth:`CompiledLabels.score` did.

    Attributes
    ----------
    scores : ndarray of float64, shape (n, K)
        Log-probabilities; ``-inf`` for labels a path did not score (search, shortlist,
        decode), NaN never.
    path : {"exact", "first_token", "search", "decode", "shortlist"}
    report : judge.engine.SearchResult or None
        The certified search's report where it ran.
    states : ndarray of float64, shape (n, d), or None
        With ``states=True`` on the exact and first-token paths: each text's answer-slot hidden
        state, read from the same forward pass (:class:`judge.engine.protocol.HiddenStates`).

    Examples
    --------
    >>> Scored(np.zeros((1, 2)), "exact").report is None
    True
    """

    scores: np.ndarray
    path: str
    report: Any = None
    states: Any = None


@dataclass(frozen=True)
class CompiledLabels:
    """A label set compiled onto a scorer: prompt split around the text, label tokens, path.

    Built by :func:`compile_labels`; frozen (``derived`` values are built once, on first use).

    Attributes
    ----------
    spec : LabelSpec
        What it was compiled from.
    engine : judge.engine.Scorer
    prefix, tail : str
        The prompt before and after the text; ``prefix``'s tokens (``root_ids``) are cached.
    names, surfaces : list of str, length K
        What the model sees for each label, and writes (with the answer's lead).
    method : {"first_token", "exact", "search", "decode"}
    label_seqs : list of K lists of int, or None (decode)
        The token sequences scored (end token appended where the policy says).
    option_trie : judge.engine.OptionTrie or None
        The label trie the certified search walks (exact and search paths).
    rotated : tuple of CompiledLabels
        The same labels under the other list rotations (``rotations=R``).

    Examples
    --------
    >>> from judge import Classifier
    >>> from judge.testing import tiny_pair
    >>> model, tok = tiny_pair()
    >>> c = Classifier(["card_arrival", "exchange_rate"], model, tokenizer=tok, method="exact").compiled_
    >>> c.method, c.surfaces
    ('exact', [' card arrival', ' exchange rate'])
    >>> c.score(["Where is my card?"]).scores.shape
    (1, 2)
    """

    spec: LabelSpec
    engine: object
    prefix: str
    tail: str
    add_special: bool
    names: list
    surfaces: list
    method: str
    root_ids: list
    label_seqs: list | None
    first_ids: np.ndarray | None
    max_label_tokens: int
    think: bool
    think_tokens: int
    automaton: object = None
    option_trie: object = None
    rotated: tuple = ()
    _memo: dict = field(default_factory=dict, repr=False, compare=False)
    _memo_lock: Any = field(default_factory=threading.RLock, repr=False, compare=False)

    def pieces(self, text: str, extra=()):
        return [(self.prefix, False), (text, True), (self.tail, False), *extra]

    def derived(self, name: str, build):
        """A value derived from this label set, built by ``build()`` once (thread-safe) and kept.

        Examples
        --------
        >>> from judge import Classifier
        >>> from judge.testing import tiny_pair
        >>> c = Classifier(["yes", "no"], *tiny_pair()[:1], tokenizer=tiny_pair()[1]).compiled_
        >>> c.derived("answer", lambda: 42), c.derived("answer", lambda: 0)
        (42, 42)
        """
        if name in self._memo:
            return self._memo[name]
        with self._memo_lock:
            if name not in self._memo:
                self._memo[name] = build()
            return self._memo[name]

    def label_automaton(self):
        """The labels' :class:`~judge.automaton.trie.TrieAutomaton` (the decode path's; else built on first use)."""
        if self.automaton is not None:
            return self.automaton

        def build():
            from judge.automaton.trie import TrieAutomaton

            return TrieAutomaton.build(self.surfaces, vocabulary(self.engine, "the label automaton"))

        return self.derived("automaton", build)

    def shortlist(self):
        """The retrieval shortlist (``spec.shortlist`` labels per text), built on first use.

        ``spec.shortlist_encoder``: None or ``"tfidf"`` (character n-gram TF-IDF, the default:
        chosen on ICD-10-CM validation texts), ``"minilm"`` (the packaged sentence embedder),
        ``"model"`` (the model's own mean-pooled hidden states), any encoder or callable
        ``list of str -> (n, d)`` (:mod:`judge.encoders`), a list of them (similarities averaged)
        or a mapping of them to weights (``{"tfidf": 0.25, "minilm": 0.75}``: the weighted sum,
        the ICD-10-CM validation choice).

        Examples
        --------
        >>> from judge import Classifier
        >>> from judge.testing import tiny_pair
        >>> model, tok = tiny_pair()
        >>> clf = Classifier(["card arrival", "exchange rate"], model, tokenizer=tok, shortlist=1, shortlist_encoder="tfidf")
        >>> clf.compiled_.shortlist().query(["what exchange rate"]).tolist()
        [[1]]
        """
        if self.spec.shortlist is None:
            raise ValueError("This label set has no shortlist: compile it with shortlist=M.")

        def build():
            from judge.encoders import LMEncoder
            from judge.retrieval import Shortlist

            def resolve(e):  # the LM's own states need this set's model
                if isinstance(e, str) and e == "model":
                    eng = local_model(self.engine, "shortlist_encoder='model'")
                    return LMEncoder(eng.model_, eng.tokenizer_)
                return e

            enc, weights = self.spec.shortlist_encoder, None
            if isinstance(enc, dict):  # {encoder: weight}
                enc, weights = list(enc), [float(w) for w in enc.values()]
            enc = [resolve(e) for e in enc] if isinstance(enc, (list, tuple)) else resolve(enc)
            return Shortlist(self.names, self.spec.shortlist, encoder=enc, weights=weights)

        return self.derived("shortlist", build)

    def searchable(self) -> bool:
        """Whether the certified search applies: exact or search path, one prompt, no think, no shortlist,
        no length normalisation (its prefix bound holds for sums of log-probabilities, not for means),
        a tree-pass scorer, prefix-free label sequences."""
        return (self.method in ("exact", "search") and not self.think and not self.rotated and self.spec.shortlist is None
                and self.spec.length_norm is None
                and isinstance(self.engine, TreeSearch) and self.engine.path_ == "tree"
                and self.option_trie is not None and self.option_trie.prefix_free)

    def search_pays(self) -> bool:
        """Whether ``predict`` should prove its argmax by the certified search rather than score in full.

        Always on the ``search`` path (huge label sets: full scoring is what the search avoids). On
        the ``exact`` path only where the model computes on the CPU: there the search feeds fewer
        tokens than full scoring and wins (1.3-2x on Banking77); on a GPU one forward over the whole
        label trie costs about what one of the search's rounds does, and the search takes several
        (measured on an H200, Banking77, float32: 7.1 vs 38.6 texts/s at batch 1, 110 vs 247 at
        batch 64; bench/results/gpu_h200.json). Either way the answer is the same argmax.

        Examples
        --------
        >>> from judge import Classifier
        >>> from judge.testing import tiny_pair
        >>> model, tok = tiny_pair()
        >>> Classifier(["card_arrival", "exchange_rate"], model, tokenizer=tok, method="exact").compiled_.search_pays()
        True
        """
        if self.method == "search" or not isinstance(self.engine, LocalModel):
            return True
        try:
            device = next(self.engine.model_.parameters()).device
        except (AttributeError, StopIteration, TypeError):  # no weights here: nothing to measure by
            return True
        return device.type == "cpu"

    def score(self, texts, options: ScoreOptions | None = None, *, search=None, cal=None,
              full: bool = False, states: bool = False) -> Scored | None:
        """Score ``texts`` by this set's path: the one dispatch (shortlist, search, decode, exact).

        Parameters
        ----------
        texts : list of str, length n
        options : ScoreOptions, optional
        search : None, ("argmax", 0.0) or ("tolerance", eps)
            None: the set's own path (``search`` sets search within ``search_tolerance``).
            Given: the certified search in that mode, after ``cal``'s bias and temperature,
            or None where it does not apply (the caller then scores in full).
        cal : judge.calibration.state.Calibration, optional
        full : bool
            Every label scored exactly on the ``search`` path too (what the label-free prior is
            computed from: it must be the distribution full scoring gives, not one within a tolerance).
        states : bool
            Also read each text's answer-slot state from the scoring pass (``Scored.states``) where
            one pass gives both: the exact and first-token paths of one prompt (no rotations, no
            thinking, a scorer with hidden states); elsewhere ``Scored.states`` is None.

        Returns
        -------
        Scored, or None (``search`` asked where it does not apply)

        Examples
        --------
        >>> from judge import Classifier
        >>> from judge.testing import tiny_pair
        >>> model, tok = tiny_pair()
        >>> c = Classifier(["card_arrival", "exchange_rate", "pin_blocked"], model, tokenizer=tok, method="exact").compiled_
        >>> r = c.score(["Where is my card?"], search=("argmax", 0.0))
        >>> r.path, bool(r.report.certified[0])
        ('search', True)
        >>> c.score(["Where is my card?"]).path
        'exact'
        """
        o = options or ScoreOptions()
        texts = list(texts)
        K = len(self.surfaces)
        step = o.batch_size
        def searched(cal, mode, eps):  # None where the bound does not apply (search_texts says: searchable())
            res = search_texts(self, texts, cal, mode, eps, budget=o.search_budget, batch_size=step)
            return None if res is None else Scored(np.nan_to_num(res.dense(K), nan=-np.inf), "search", res)

        if search is not None:
            return searched(cal, *search)
        if not texts:
            return Scored(np.zeros((0, K)), self.method)
        if self.spec.shortlist is not None and self.label_seqs is not None:
            s = score_shortlist(self, texts, self.shortlist().query(texts), batch_size=step)
            return Scored(self._normalised(s), "shortlist")
        if self.method == "search" and not full:  # labels within search_tolerance of the mass, the rest -inf
            r = searched(None, "tolerance", o.search_tolerance)
            if r is not None:
                return r
        if self.method == "decode":
            extras = think(self, texts, batch_size=step) if self.think else None
            return Scored(score_decode(self, texts, top_k=self.spec.top_k, batch_size=step, extras=extras), "decode")
        show = o.progress if o.progress is not None else ("auto" if len(texts) > 4 * step else False)
        pack = min(o.pack, step)
        path = "first_token" if self.method == "first_token" else "exact"
        if states and not self.rotated and not self.think and isinstance(self.engine, HiddenStates):
            s, H = score_exact(self, texts, batch_size=max(1, step // pack), progress=show, pack=pack, states=True)
            return Scored(self._normalised(s), path, states=H)
        out = []
        for ci in (self, *self.rotated):  # rotations: the mean log-probability over the list orders
            extras = think(ci, texts, batch_size=step) if ci.think else None
            out.append(score_exact(ci, texts, batch_size=max(1, step // pack), progress=show, extras=extras,
                                   pack=pack))
        return Scored(self._normalised(out[0] if len(out) == 1 else np.mean(out, axis=0)), path)

    def _normalised(self, scores: np.ndarray) -> np.ndarray:
        """``scores`` divided by each label's length under ``spec.length_norm`` (-inf stays -inf)."""
        if self.spec.length_norm is None:
            return scores
        return scores / length_divisors(self)


def compile_labels(spec: LabelSpec, engine=None) -> CompiledLabels:
    """Compile a label set: the scorer set up, the prompt split and its prefix cached, the label tokens, the path.

    ``engine`` (a previous set's scorer) is reused when the model, tokenizer, device and
    end-token policy are unchanged; the returned ``CompiledLabels.engine`` is the one to keep.

    Examples
    --------
    >>> from judge.testing import tiny_pair
    >>> model, tok = tiny_pair()
    >>> c = compile_labels(LabelSpec(("yes", "no"), ("yes", "no"), model=model, tokenizer=tok))
    >>> c.root_ids == tok(c.prefix)["input_ids"], c.method
    (True, 'first_token')
    """
    from judge.backends import make_scorer

    if spec.backend == "vllm":  # the same token sequences, scored by vLLM
        from judge.backends.vllm import check_classifier

        check_classifier(spec)
    fresh = make_scorer(spec.backend, spec.model, spec.tokenizer, device=spec.device, end_token=spec.end_token)
    same = type(engine) is type(fresh) and engine.model is spec.model and engine.tokenizer is spec.tokenizer \
        and engine.end_token == spec.end_token and engine.device == fresh.device
    eng = engine if same else fresh
    eng.setup()
    prompt = spec.prompt
    prompt = DEFAULT_PROMPT if prompt is None else (
        PromptTemplate.from_string(prompt) if isinstance(prompt, str) else prompt)
    c = _compile_prompt(spec, eng, prompt)
    if spec.rotations > 1:
        if c.method == "decode":
            raise ValueError(f"rotations={spec.rotations} averages over label lists, which the decode path "
                             f"(K > decode_above, or method='decode') does not score; use rotations=1.")
        K = len(spec.labels)
        offsets = sorted({(r * K) // spec.rotations for r in range(1, spec.rotations)} - {0})
        rotated = [_compile_prompt(spec, eng, replace(prompt, rotate=prompt.rotate + o), method=c.method)
                   for o in offsets]
        c = replace(c, rotated=tuple(r for r in rotated if r.prefix != c.prefix))
        if not c.rotated:
            warnings.warn(f"rotations={spec.rotations} has no effect: the prompt does not list the labels "
                          f"(K={K} > max_listed_labels, or no {{labels}} in the template), so every "
                          f"rotation is the same prompt; scoring once.", stacklevel=3)
        if isinstance(eng, RootCaching):
            for r in c.rotated:
                eng.set_root(r.root_ids)
    if isinstance(eng, RootCaching):
        eng.set_root(c.root_ids)
    return c


def _compile_prompt(spec: LabelSpec, eng, prompt, method=None) -> CompiledLabels:
    """CompiledLabels for one prompt template (one list order)."""
    from judge.engine.options import OptionTrie

    tok = eng.tokenizer_
    chat = prompt.uses_chat(tok)
    names = list(spec.names)
    surfaces = [prompt.label_prefix(tok) + n for n in names]
    prefix, suffix = prompt.split(tok, names)
    tail = suffix.split("{text}", 1)[1]
    if not chat:  # completion prompts start with the tokenizer's BOS: write it into the prompt text
        with_bos = tok("x", add_special_tokens=True)["input_ids"]
        plain = tok("x", add_special_tokens=False)["input_ids"]
        if len(with_bos) == len(plain) + 1 and with_bos[1:] == plain and tok.bos_token:
            prefix = tok.bos_token + prefix
    root = eng.encode([(prefix, False)])
    K = len(spec.labels)
    seqs = firsts = automaton = trie = None
    wanted = spec.method if spec.method != "auto" else ("search" if K > spec.decode_above else "auto")
    if wanted == "search" and isinstance(eng, TreeSearch) and eng.path_ == "fallback":  # no tree masks: beam search instead
        warnings.warn(f"{type(eng.model_).__name__} runs the engine's causal fallback ({eng.check_.get('reason')}), "
                      f"where the certified search cannot run; {K} labels are searched by beam search through "
                      f"the automaton instead (method='decode': it can miss the argmax).", stacklevel=4)
        wanted = "decode"
    if wanted == "decode":
        method, max_tokens = "decode", max(len(x.encode()) for x in surfaces) + 1
    elif wanted == "search":
        seqs = eng.option_ids(tail, surfaces, what="Label")
        method, max_tokens = "search", max(len(x) for x in seqs)
    else:
        seqs = eng.option_ids(tail, surfaces, what="Label")
        firsts = np.asarray([s[0] for s in seqs], np.int64)
        distinct = len(set(firsts.tolist())) == K
        # auto: the first-token path only where it scores exactly what the exact path would (every
        # label one token, no end token). Chosen on validation (bench/first_token.py): where labels
        # have several tokens but distinct first ones, exact beat first-token by 4.2 points (51.1 vs
        # 46.9%, batch prior; TREC and 9 ten-label subsets, 1,445 texts).
        single = all(len(x) == 1 for x in seqs)
        method = method or (("first_token" if single else "exact") if spec.method == "auto" else spec.method)
        if method == "first_token" and not distinct:
            dup = [spec.labels[i] for i in range(K) if (firsts == firsts[i]).sum() > 1][:4]
            raise ValueError(
                f"method='first_token' needs every label to start with a different token, but {dup} "
                f"share their first token; use method='exact' (or 'auto').")
        max_tokens = max(len(s) for s in seqs)
    if spec.length_norm is not None and (method in ("search", "decode") or (
            method == "first_token" and any(len(x) > 1 for x in seqs))):
        why = (f"the {method} path scores only some of the {K} labels per text" if method != "first_token" else
               "method='first_token' scores each label's first token only, and some labels have several")
        raise ValueError(
            f"length_norm={spec.length_norm!r} divides each label's full log-probability by its length, but "
            f"{why}. Use method='exact' (every label scored in full; K={K}, decode_above={spec.decode_above}) "
            f"or length_norm=None.")
    if method in ("exact", "search") and isinstance(eng, TreeSearch):
        trie = OptionTrie(seqs)
    if method == "decode":
        from judge.automaton.trie import TrieAutomaton

        automaton = TrieAutomaton.build(surfaces, vocabulary(eng, "method='decode'"))
    return CompiledLabels(spec, eng, prefix, tail, False, names, surfaces, method, root, seqs, firsts,
                          max_tokens, spec.think, spec.think_tokens, automaton=automaton, option_trie=trie)


def length_divisors(c: CompiledLabels) -> np.ndarray:
    """What each label's log-probability is divided by under ``c.spec.length_norm``: (K,) float64.

    ``"token"``: the number of tokens scored for the label (its canonical tokens, plus the end token
    where one is appended; 1 on the first-token path); ``"byte"``: the UTF-8 bytes of the label's text
    as the model writes it after the answer cue (``c.surfaces``, the leading space included, as
    lm-evaluation-harness's ``acc_norm`` counts the continuation's bytes); None: ones.

    Examples
    --------
    >>> from judge import Classifier
    >>> from judge.testing import tiny_pair
    >>> model, tok = tiny_pair()
    >>> c = Classifier(["card_arrival", "pin"], model, tokenizer=tok, method="exact", length_norm="byte").compiled_
    >>> c.surfaces, length_divisors(c).tolist()
    ([' card arrival', ' pin'], [13.0, 4.0])
    """
    K = len(c.surfaces)
    norm = c.spec.length_norm
    if norm is None:
        return np.ones(K)
    if norm == "byte":
        return np.asarray([max(1, len(x.encode("utf-8"))) for x in c.surfaces], np.float64)
    # tokens: the first-token path takes length_norm only where every label is one token (compile refuses
    # the others), so the sequences' lengths are its divisors too
    return np.asarray([len(x) for x in c.label_seqs], np.float64)
