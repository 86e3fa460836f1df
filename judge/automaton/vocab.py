"""Tokenizer -> the exact bytes every token emits.

A :class:`Vocabulary` is built once per tokenizer and shared by every label
set. It knows, for every token id, the bytes the token appends to the text
when it follows other text:

* byte-level BPE (GPT-2, Llama-3, Qwen): each character of the token string is
  mapped back through GPT-2's byte-to-unicode table;
* SentencePiece-style BPE (Llama-2, Mistral, Gemma): ``▁`` is a space and
  ``<0xNN>`` byte-fallback tokens emit the single byte ``0xNN``.

Added tokens (special or not: ``<|im_end|>``, ``<think>``, ``<unused0>``)
are kept out of the label alphabet: they emit no bytes here and no label is
ever spelled through them. ``end_token_ids`` are the tokens that end an
answer: EOS and the chat end-of-turn token where the tokenizer has one.

What this module deliberately does not do: tokenize text (the tokenizer does),
or know anything about labels (see :mod:`judge.automaton.trie`).
"""

from __future__ import annotations

import re
import weakref
from collections.abc import Iterable
from dataclasses import dataclass, field
from functools import lru_cache

import numpy as np

__all__ = ["Vocabulary", "bytes_to_unicode"]

# Chat end-of-turn tokens of the common templates (ChatML, Llama-3, Gemma, Phi).
_END_OF_TURN = ("<|im_end|>", "<|eot_id|>", "<end_of_turn>", "<|end|>", "<|endoftext|>", "</s>")
_BYTE_TOKEN = re.compile(r"^<0x([0-9A-Fa-f]{2})>$")
_KINDS = ("byte_level", "sentencepiece")


@lru_cache(maxsize=1)
def bytes_to_unicode() -> dict[int, str]:
    """GPT-2's reversible byte -> printable unicode character table.

    Returns
    -------
    table : dict of int to str
        256 entries; byte-level BPE vocabularies spell every byte this way.

    Examples
    --------
    >>> bytes_to_unicode()[ord(" ")]
    'Ġ'
    >>> bytes_to_unicode()[ord("a")]
    'a'
    """
    bs = list(range(ord("!"), ord("~") + 1)) + list(range(ord("¡"), ord("¬") + 1))
    bs += list(range(ord("®"), ord("ÿ") + 1))
    cs = bs[:]
    n = 0
    for b in range(256):
        if b not in bs:
            bs.append(b)
            cs.append(256 + n)
            n += 1
    return dict(zip(bs, map(chr, cs)))


def _detect_kind(pieces: list[str | None]) -> str:
    n = max(1, sum(p is not None for p in pieces))
    sp = sum(1 for p in pieces if p and p.startswith("▁"))
    bl = sum(1 for p in pieces if p and p.startswith("Ġ"))
    if sp > 0.01 * n and sp > bl:
        return "sentencepiece"
    if bl > 0.01 * n:
        return "byte_level"
    raise ValueError(
        f"Cannot tell the tokenizer's kind: {sp} of {n} tokens start with '▁' (SentencePiece) "
        f"and {bl} start with 'Ġ' (byte-level BPE). Pass kind='byte_level' or kind='sentencepiece' "
        f"to Vocabulary.from_tokenizer."
    )


def _piece_bytes_byte_level(pieces, special) -> list[bytes]:
    dec = {c: b for b, c in bytes_to_unicode().items()}
    out = []
    for p, sp in zip(pieces, special):
        if sp or p is None:
            out.append(b"")
            continue
        try:
            out.append(bytes([dec[c] for c in p]))
        except KeyError:  # not in the byte alphabet: emitted as plain text
            out.append(p.encode("utf-8"))
    return out


def _piece_bytes_sentencepiece(pieces, special) -> list[bytes]:
    out = []
    for p, sp in zip(pieces, special):
        if sp or p is None:
            out.append(b"")
            continue
        m = _BYTE_TOKEN.match(p)
        out.append(bytes([int(m.group(1), 16)]) if m else p.replace("▁", " ").encode("utf-8"))
    return out


@dataclass(frozen=True, eq=False)
class Vocabulary:
    """Every token id of a tokenizer and the exact bytes it emits.

    Build it with :meth:`from_tokenizer`; it is cached per tokenizer object,
    so building it again is free.

    Attributes
    ----------
    token_bytes : tuple of bytes, length ``size``
        Bytes each token appends when it follows other text; ``b""`` for
        added/special tokens, which never spell a label.
    special : ndarray of bool, shape (size,)
        True for added/special tokens (kept out of the label alphabet).
    end_token_ids : tuple of int
        Tokens that end an answer (EOS and end-of-turn).
    kind : {"byte_level", "sentencepiece"}
    name : str
        The tokenizer's ``name_or_path``, for messages and caches.

    Examples
    --------
    >>> v = Vocabulary.from_token_bytes([b"a", b"b", b"ab", b""], end_token_ids=[3])
    >>> v.size, v.end_token_ids
    (4, (3,))
    >>> v.token_bytes[2]
    b'ab'
    """

    token_bytes: tuple[bytes, ...]
    special: np.ndarray
    end_token_ids: tuple[int, ...]
    kind: str = "byte_level"
    name: str = ""
    _cache: dict = field(default_factory=dict, repr=False, compare=False)

    @property
    def size(self) -> int:
        """Number of token ids (``len(tokenizer)``)."""
        return len(self.token_bytes)

    def __len__(self) -> int:
        return self.size

    @classmethod
    def from_token_bytes(
        cls,
        token_bytes: Iterable[bytes],
        *,
        end_token_ids: Iterable[int] = (),
        special: Iterable[bool] | None = None,
        name: str = "custom",
    ) -> Vocabulary:
        """A vocabulary from explicit token byte strings (for tests and custom models).

        Parameters
        ----------
        token_bytes : iterable of bytes, length V
            Bytes of each token id; ``b""`` marks a token that spells nothing.
        end_token_ids : iterable of int
            Ids that end an answer; they are marked special.
        special : iterable of bool, optional
            Extra special flags; by default only empty tokens and end tokens.

        Returns
        -------
        Vocabulary

        Examples
        --------
        >>> Vocabulary.from_token_bytes([b"x", b"y"]).size
        2
        """
        tb = tuple(bytes(b) for b in token_bytes)
        ends = tuple(int(i) for i in end_token_ids)
        for i in ends:
            if not 0 <= i < len(tb):
                raise ValueError(
                    f"end token id {i} is out of range for a vocabulary of {len(tb)} tokens; "
                    f"pass ids in [0, {len(tb)})."
                )
        sp = np.array([len(b) == 0 for b in tb], dtype=bool)
        if special is not None:
            sp |= np.asarray(list(special), dtype=bool)
        sp[list(ends)] = True
        tb = tuple(b"" if s else b for b, s in zip(tb, sp))
        sp.flags.writeable = False
        return cls(tb, sp, ends, "byte_level", name)

    @classmethod
    def from_tokenizer(
        cls,
        tokenizer,
        *,
        end_token_ids: Iterable[int] | None = None,
        kind: str | None = None,
    ) -> Vocabulary:
        """Build (or fetch from the in-memory cache) the vocabulary of a HF tokenizer.

        Parameters
        ----------
        tokenizer : transformers.PreTrainedTokenizerBase
            Any byte-level BPE or SentencePiece-style tokenizer.
        end_token_ids : iterable of int, optional
            Override the detected end-of-answer tokens (EOS and the chat
            end-of-turn token, e.g. ``<|im_end|>``).
        kind : {"byte_level", "sentencepiece"}, optional
            Override the detected tokenizer kind.

        Returns
        -------
        Vocabulary
            ``size == len(tokenizer)``.

        Examples
        --------
        >>> from judge.testing import tiny_pair
        >>> tok = tiny_pair()[1]                                  # SmolLM2's byte-level BPE tokenizer
        >>> Vocabulary.from_tokenizer(tok).token_bytes[tok.convert_tokens_to_ids("Ġthe")]
        b' the'
        """
        key = (None if end_token_ids is None else tuple(end_token_ids), kind)
        per_tok = _CACHE.get(tokenizer)
        if per_tok is not None and key in per_tok:
            return per_tok[key]
        if kind is not None and kind not in _KINDS:
            raise ValueError(f"Unknown tokenizer kind {kind!r}; valid kinds are {_KINDS}.")
        size = len(tokenizer)
        pieces = tokenizer.convert_ids_to_tokens(list(range(size)))
        special = np.zeros(size, dtype=bool)
        for i in getattr(tokenizer, "added_tokens_decoder", {}):
            if 0 <= i < size:
                special[i] = True
        for i in tokenizer.all_special_ids:
            if i is not None and 0 <= i < size:
                special[i] = True
        kind = kind or _detect_kind(pieces)
        if kind == "byte_level":
            tb = _piece_bytes_byte_level(pieces, special)
        else:
            tb = _piece_bytes_sentencepiece(pieces, special)
        if end_token_ids is None:
            ends = _detect_end_tokens(tokenizer)
        else:
            ends = tuple(int(i) for i in end_token_ids)
        for i in ends:
            special[i] = True
        tb = [b"" if s else b for b, s in zip(tb, special)]
        special.flags.writeable = False
        vocab = cls(tuple(tb), special, ends, kind, str(getattr(tokenizer, "name_or_path", "")))
        try:
            _CACHE.setdefault(tokenizer, {})[key] = vocab
        except TypeError:  # tokenizer not weak-referenceable: no caching
            pass
        return vocab

    def flat(self) -> tuple[np.ndarray, np.ndarray]:
        """All token bytes concatenated, and offsets into them.

        Returns
        -------
        data : ndarray of uint8, shape (total_bytes,)
        offsets : ndarray of int64, shape (size + 1,)
            Token ``i`` is ``data[offsets[i]:offsets[i+1]]``.

        Examples
        --------
        >>> data, off = Vocabulary.from_token_bytes([b"ab", b"c"]).flat()
        >>> bytes(data[off[0]:off[1]]), off.tolist()
        (b'ab', [0, 2, 3])
        """
        if "flat" not in self._cache:
            lens = np.fromiter((len(b) for b in self.token_bytes), np.int64, self.size)
            off = np.zeros(self.size + 1, np.int64)
            np.cumsum(lens, out=off[1:])
            data = np.frombuffer(b"".join(self.token_bytes), dtype=np.uint8)
            self._cache["flat"] = (data, off)
        return self._cache["flat"]

    def byte_trie(self):
        """The vocabulary's own byte trie (built once, cached): see :func:`judge.automaton.trie.ByteTrie`."""
        if "trie" not in self._cache:
            from judge.automaton.trie import ByteTrie

            data, off = self.flat()
            self._cache["trie"] = ByteTrie.build(data, off)
        return self._cache["trie"]


_CACHE: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


def _detect_end_tokens(tokenizer) -> tuple[int, ...]:
    ids = []
    eos = tokenizer.eos_token_id
    if isinstance(eos, int):
        ids.append(eos)
    vocab_added = {t.content if hasattr(t, "content") else str(t): i for i, t in getattr(tokenizer, "added_tokens_decoder", {}).items()}
    for name in _END_OF_TURN:
        i = vocab_added.get(name)
        if i is not None and i not in ids:
            if name in ("<|endoftext|>", "</s>") and ids:
                continue  # a plain EOS only when nothing better was found
            ids.append(i)
    if not ids:
        raise ValueError(
            f"Tokenizer {getattr(tokenizer, 'name_or_path', '?')!r} has no EOS or end-of-turn token, "
            f"so an answer cannot be terminated. Pass end_token_ids=[...] to Vocabulary.from_tokenizer."
        )
    return tuple(ids)
