"""What every scorer answers: the :class:`Scorer` protocol and its two query types.

A *query* is a prompt and the options that may follow it. It comes at two levels
(as lm-eval keeps string level apart from token level):

* :class:`Query` — text: the prompt as pieces (user pieces are data and never become
  control tokens) and the options as strings. The scorer tokenizes, once, in one place.
* :class:`Item` — tokens: prompt ids and option token sequences, already tokenized.

A :class:`Scorer` turns queries into ``log P(option | prompt)`` for every option. The
transformers :class:`~judge.engine.Engine` answers it; so does the independent reference
:class:`judge.testing.Reference` (which shares no code with the engine), and so must any
other backend. Everything that scores in this package — the classifier's paths, typed
decisions, structured generation's value distributions, the server — goes through it.

Beyond the protocol, a scorer may have **capabilities**, each a protocol of its own that callers
check with ``isinstance`` before they use it (and refuse clearly when it is missing):
:class:`RootCaching` (keep the shared instructions' key/values), :class:`LocalModel` (the model
object in this process), :class:`TokenVocabulary` (the tokens' bytes and end tokens),
:class:`TreeSearch` (the certified search),
:class:`Training` (differentiable scores), :class:`HiddenStates` (the prompts' hidden states,
and each item's answer-slot state read from its scoring pass), :class:`MemoryBounded` (the most
memory a call can take), :class:`Lowering` (its ``score`` is ``score_items`` of :func:`lower_queries`). No code
outside :mod:`judge.engine` uses a scorer's member that the protocol or a
capability does not declare (tests/test_layout.py checks it).

What it deliberately does not do: implement anything (see :mod:`judge.engine.engine`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol, runtime_checkable

__all__ = ["Query", "Item", "Scorer", "Lowering", "lowers", "Closing", "OPTION_CONTEXT_CHARS", "option_context", "row_key",
           "lower_queries", "default_root", "RootCaching", "LocalModel", "TokenVocabulary", "TreeSearch", "Training",
           "HiddenStates", "MemoryBounded", "CAPABILITIES"]


#: How much of a prompt's end an option is tokenized after: an option's tokens can depend on what
#: precedes it (a space, a newline, a letter it merges with), and 64 characters hold any token
#: boundary of the tokenizers here. Every place that turns options into tokens (scoring, pricing a
#: request, spotting spellings that tokenize alike) uses this one rule, through :func:`option_context`.
OPTION_CONTEXT_CHARS = 64


def option_context(prompt) -> str:
    """The end of a prompt that its options are tokenized after: its last ``OPTION_CONTEXT_CHARS`` characters.

    Parameters
    ----------
    prompt : str or sequence of (str, bool)
        The prompt's text, or its ``(text, is_user)`` pieces (as :class:`Query` holds them).

    Examples
    --------
    >>> option_context([("Ticket: my card is late. ", True), ("Answer:", False)])
    'Ticket: my card is late. Answer:'
    >>> len(option_context("x" * 100))
    64
    """
    text = prompt if isinstance(prompt, str) else "".join(t for t, _ in prompt)
    return text[-OPTION_CONTEXT_CHARS:]


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
class Item:
    """A query at the token level: prompt ids and the option token sequences scored after them.

    Parameters
    ----------
    ids : list of int
        The prompt's token ids (at least one).
    options : list of list of int
        Each option's token ids as scored (end token included where wanted).
    first_only : bool
        Score only each option's first token.
    group : int
        Items of one call with the same group share one row of a forward pass
        (questions about one state: the state is fed once).

    Examples
    --------
    >>> it = Item([1, 2, 3], [[7], [8, 9]])
    >>> it.first_only, it.group
    (False, 0)
    """

    ids: list
    options: list
    first_only: bool = False
    group: int = 0


def row_key(pieces):
    """What queries of one call share a forward-pass row by: their first user piece (a text, a state), or None.

    Examples
    --------
    >>> row_key([("Ticket: ", False), ("my card is late", True), (" Answer:", False)])
    'my card is late'
    """
    return next((t for t, u in pieces if u), None)


def lower_queries(scorer, queries, *, first_token: bool = False, keys=None) -> list:
    """The token-level :class:`Item` s of ``queries``: the one lowering of text to tokens.

    Each prompt is tokenized whole (``scorer.encode``), each option after the prompt's
    :func:`option_context` (``scorer.option_ids``); queries with the same :func:`row_key`
    get the same ``group`` (numbered in order of first appearance), so the questions of one
    state share a row. A scorer that scores this way declares it (:class:`Lowering`), and
    callers that tokenize ahead of scoring (the server's admission) call this.

    Parameters
    ----------
    scorer : Scorer
    queries : sequence of Query
    first_token : bool
    keys : sequence, optional
        The row keys to group by (default: each query's :func:`row_key`).

    Examples
    --------
    >>> from judge.engine import Engine
    >>> from judge.testing import tiny_pair
    >>> qs = [Query((("Q: ", False), ("sky", True), (" A:", False)), (" blue", " red")),
    ...       Query((("Q: ", False), ("sky", True), (" B:", False)), (" no",))]
    >>> [(len(it.options), it.group) for it in lower_queries(Engine(*tiny_pair()), qs)]
    [(2, 0), (1, 0)]
    """
    queries = list(queries)
    groups: dict = {}
    keys = [row_key(q.pieces) for q in queries] if keys is None else list(keys)
    return [Item(scorer.encode(q.pieces), scorer.option_ids(option_context(q.pieces), q.options),
                 first_only=first_token, group=groups.setdefault(k, len(groups))) for q, k in zip(queries, keys)]


def default_root(ids, *, min_tokens: int = 16) -> list:
    """The root a scoring call caches by default: the prompts' common token prefix (several prompts, >= 16 tokens).

    Examples
    --------
    >>> default_root([[1, 2, 3], [1, 2, 4]], min_tokens=2), default_root([[1, 2, 3]])
    ([1, 2], [])
    """
    ids = list(ids)
    if len(ids) < 2:
        return []
    first, n, i = ids[0], min(len(s) for s in ids), 0
    while i < n and all(s[i] == first[i] for s in ids):
        i += 1
    return list(first[:i]) if i >= min_tokens else []


@runtime_checkable
class Scorer(Protocol):
    """The scoring interface: ``log P(option | prompt)`` for every option of every query.

    Attributes
    ----------
    tokenizer_ : PreTrainedTokenizerBase
        After :meth:`setup`.
    end_id_ : int
        The end-of-answer token appended where an option must be told apart from a
        longer one (``end_token="auto"``).
    last_usage_ : dict
        ``{"input_tokens": int}`` fed to the model by the last call.

    Examples
    --------
    >>> from judge.engine import Engine
    >>> isinstance(Engine(), Scorer)      # a structural check: nothing is loaded
    True
    """

    last_usage_: dict

    def setup(self) -> Scorer:
        """Load what is needed (once, thread-safe); returns self."""

    def encode(self, pieces, *, add_special_tokens: bool = False) -> list[int]:
        """Token ids of a prompt given as ``(text, is_user)`` pieces, tokenized whole."""

    def option_ids(self, context: str, options, *, end_token=None, what: str = "Option") -> list[list[int]]:
        """Canonical token ids of each option written right after ``context``."""

    def score(self, queries, *, root=None, first_token: bool = False, batch_size: int = 8) -> list:
        """``[ndarray (K_q,) float64]``: log P(option | prompt) per query."""

    def score_items(self, items, *, root=(), batch_size: int = 8, progress=None, pack: int = 1) -> list:
        """Like :meth:`score`, for token-level :class:`Item` s."""

    def close(self) -> None:
        """Release what :meth:`setup` acquired (a model, caches, a vLLM engine and its processes).

        Idempotent; a later call sets the scorer up again. Every scorer is also a context manager
        (:class:`Closing`): ``with Engine(...) as scorer:`` closes it at the end of the block."""


@runtime_checkable
class Lowering(Protocol):
    """A scorer whose :meth:`Scorer.score` is :meth:`Scorer.score_items` of :func:`lower_queries`.

    For such a scorer a caller may tokenize ahead of scoring (the server prices a request
    on the very items its batcher scores): ``score_items(lower_queries(scorer, queries),
    root=...)`` returns what ``score(queries, root=...)`` does, bit for bit.

    Examples
    --------
    >>> from judge.engine import Engine
    >>> from judge.testing import Reference, tiny_pair
    >>> isinstance(Engine(), Lowering), isinstance(Reference(*tiny_pair()), Lowering)
    (True, False)
    """

    def lower(self, queries, *, first_token: bool = False) -> list:
        """:func:`lower_queries` of ``queries`` with this scorer."""


def lowers(scorer) -> bool:
    """Whether ``scorer``'s class declares :class:`Lowering` (a ``lower`` method of its own).

    Asked of the class, not the instance: a wrapper that forwards unknown attributes to a
    scorer but defines its own ``score`` (a spy, a cache) is not a lowering scorer.

    Examples
    --------
    >>> from judge.engine import Engine
    >>> class Wrapper:
    ...     def __init__(self, inner): self.inner = inner
    ...     def __getattr__(self, name): return getattr(self.inner, name)
    >>> lowers(Engine()), lowers(Wrapper(Engine()))
    (True, False)
    """
    return callable(getattr(type(scorer), "lower", None))


class Closing:
    """``close()`` at the end of a ``with`` block: the context manager of scorers and their owners.

    Subclasses define :meth:`close`.

    Examples
    --------
    >>> from judge.engine import Engine, Query
    >>> from judge.testing import tiny_pair
    >>> with Engine(*tiny_pair()) as eng:
    ...     eng.score([Query((("Sky colour:", False),), (" blue", " green"))])[0].shape
    (2,)
    >>> hasattr(eng, "model_")             # released when the block ended
    False
    """

    def close(self) -> None:  # pragma: no cover - every subclass defines it
        raise NotImplementedError

    def __enter__(self):
        return self

    def __exit__(self, *exc) -> bool:
        self.close()
        return False


@runtime_checkable
class RootCaching(Protocol):
    """Capability: the key/values of a prompt prefix shared by many calls are computed once.

    Examples
    --------
    >>> from judge.engine import Engine
    >>> isinstance(Engine(), RootCaching)
    True
    """

    def set_root(self, ids) -> None:
        """Cache the key/values of ``ids`` (the shared instructions) for later calls."""


@runtime_checkable
class LocalModel(Protocol):
    """Capability: the model object lives in this process (after ``setup()``).

    ``model_`` is the transformers model (its config always; its weights where the scorer runs
    them here: the :class:`~judge.engine.Engine` and the reference, not vLLM, whose copy is on the
    meta device); ``dtype_`` the dtype it computes in.

    Examples
    --------
    >>> from judge.engine import Engine
    >>> from judge.testing import tiny_pair
    >>> isinstance(Engine(*tiny_pair()).setup(), LocalModel)
    True
    """

    model_: object
    dtype_: object


@runtime_checkable
class TokenVocabulary(Protocol):
    """Capability: the tokenizer's vocabulary as bytes, with the end tokens (after ``setup()``).

    ``vocab_`` is a :class:`judge.automaton.Vocabulary`: what the label automaton is built on and
    where generation stops.

    Examples
    --------
    >>> from judge.engine import Engine
    >>> from judge.testing import Reference, tiny_pair
    >>> isinstance(Engine(*tiny_pair()).setup(), TokenVocabulary), isinstance(Reference(*tiny_pair()), TokenVocabulary)
    (True, False)
    """

    vocab_: object


@runtime_checkable
class TreeSearch(Protocol):
    """Capability: the certified best-first search over an option trie (:mod:`judge.engine.search`).

    It runs only where ``path_ == "tree"`` (``check_`` says why not otherwise); both are set by
    ``setup()``, so check a scorer that is set up.

    Examples
    --------
    >>> from judge.engine import Engine
    >>> from judge.testing import Reference, tiny_pair
    >>> isinstance(Engine(*tiny_pair()).setup(), TreeSearch), isinstance(Reference(*tiny_pair()), TreeSearch)
    (True, False)
    """

    path_: str
    check_: dict

    def search(self, items, trie, *, root=(), bias=None, temperature=None, mode="argmax", eps=0.0, budget=None,
               per_round=None, subtree=0, batch_size=8):
        """``judge.engine.SearchResult`` of ``items`` sharing the option trie ``trie``."""


@runtime_checkable
class Training(Protocol):
    """Capability: exact option log-probabilities as differentiable tensors (fitting adapters).

    Examples
    --------
    >>> from judge.engine import Engine
    >>> from judge.testing import tiny_pair
    >>> isinstance(Engine(*tiny_pair()).setup(), Training)
    True
    """

    path_: str
    check_: dict

    def logprob_tensors(self, items, *, batch_size: int = 8) -> list:
        """log P(option | prompt) of every option of every item, as torch tensors with gradients."""


@runtime_checkable
class HiddenStates(Protocol):
    """Capability: the model's final-layer states of lowered items (``fit``'s features, decision profiles).

    ``hidden_states``: each item's prompt state at its last token (the answer slot) or mean-pooled;
    ``score_items_states``: ``score_items`` and the answer-slot states read from that same forward
    pass (a fitted profile answers a request in the one pass that scores it).

    Examples
    --------
    >>> from judge.engine import Engine
    >>> from judge.testing import Reference, tiny_pair
    >>> isinstance(Engine(*tiny_pair()), HiddenStates), isinstance(Reference(*tiny_pair()), HiddenStates)
    (True, True)
    """

    def hidden_states(self, items, *, root=(), pooling: str = "last", batch_size: int = 16):
        """(n, d) float64: each item's prompt state at its last token (``"last"``) or mean-pooled."""

    def score_items_states(self, items, *, root=(), batch_size: int = 8, pack: int = 1, progress=None) -> tuple:
        """(``score_items``' list, (n, d) answer-slot states), from one forward pass where the scorer can."""


@runtime_checkable
class MemoryBounded(Protocol):
    """Capability: the most memory one scoring call can take, by part (a server sizes itself on it).

    Examples
    --------
    >>> from judge.engine import Engine
    >>> from judge.testing import tiny_pair
    >>> b = Engine(*tiny_pair(), max_batch_tokens=256).memory_bound()
    >>> b["total"] > 0
    True
    """

    def memory_bound(self) -> dict:
        """``{"total": bytes, ...}`` (:func:`judge.engine.passes.memory_bound`)."""


#: Every capability a scorer may have beside the :class:`Scorer` protocol.
CAPABILITIES = (Lowering, RootCaching, LocalModel, TokenVocabulary, TreeSearch, Training, HiddenStates, MemoryBounded)
