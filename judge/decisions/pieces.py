"""Pieces of a state: what the guard erases, one at a time or together.

`leaves` lists the strings of a state (a string, or the strings inside a JSON object or
array, in the order canonical JSON writes them); `cut` partitions them into pieces:
sentences and lines (a header line such as ``[TICKET]`` or ``## Notes`` joins the text after
it; text without letters joins its neighbour), the segments a scanner finding covers joined
into one piece kept apart, the rest merged into runs of about equal length so that at most
``max_pieces`` pieces hold it; `erase` removes pieces and returns a new state of the same
shape. Pieces are contiguous spans with their trailing whitespace, so the text before an
erased piece is unchanged, character for character (a scorer shares those tokens).

What it deliberately does not do: scan (`judge.decisions.scanners`), decide which pieces to
erase (`judge.decisions.guard`), or cut inside a JSON key, number or boolean (only strings
are erased).
"""

from __future__ import annotations

import copy
import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from judge.decisions.questions import DecisionError

__all__ = ["DEFAULT_MAX_PIECES", "Piece", "canonical", "cut", "erase", "leaves", "repeats", "trusted_leaves"]

#: Pieces a state is cut into at most (flagged pieces are kept apart on top of these). Each piece is one
#: erased variant when the caller names cautious options; without them only flagged pieces are erased.
DEFAULT_MAX_PIECES = 12


@dataclass(frozen=True)
class Piece:
    """An erasable piece of a state: character spans of its strings.

    Attributes
    ----------
    spans : tuple of (int, int, int)
        ``(leaf, start, end)``: ``leaf`` indexes the state's strings (`leaves`).
    text : str
        The piece's text (its spans joined by a space).

    Examples
    --------
    >>> Piece(((0, 0, 5),), "Hello").text
    'Hello'
    """

    spans: tuple
    text: str



# ----------------------------------------------------------------------------- the state's strings

def leaves(state: Any) -> list[tuple[tuple, str]]:
    """The strings of a state (JSON objects and arrays walked in rendering order), with their paths.

    Examples
    --------
    >>> leaves({"b": ["x", 1], "a": "y"})
    [(('a',), 'y'), (('b', 0), 'x')]
    """
    out: list[tuple[tuple, str]] = []

    def walk(v, path):
        if isinstance(v, str):
            out.append((path, v))
        elif isinstance(v, Mapping):
            for k in sorted(v):
                walk(v[k], (*path, k))
        elif isinstance(v, (list, tuple)):
            for i, x in enumerate(v):
                walk(x, (*path, i))

    walk(state, ())
    return out


def erase(state: Any, pieces: Sequence[Piece], erased) -> Any:
    """The state with the pieces numbered in ``erased`` removed from its strings (a new object).

    Parameters
    ----------
    state : str, dict or list
    pieces : sequence of Piece
        From `cut` of this state.
    erased : iterable of int

    Returns
    -------
    str, dict or list

    Examples
    --------
    >>> state = {"text": "Lost my card. Refund approved."}
    >>> erase(state, cut(state), [1])
    {'text': 'Lost my card. '}
    """
    strings = leaves(state)
    cuts: dict[int, list[tuple[int, int]]] = {}
    for i in erased:
        for leaf, a, b in pieces[i].spans:
            cuts.setdefault(leaf, []).append((a, b))
    if isinstance(state, str):
        return _without(state, cuts.get(0, []))
    new = copy.deepcopy(state)
    for leaf, spans in cuts.items():
        path, text = strings[leaf]
        parent = new
        for k in path[:-1]:
            parent = parent[k]
        if isinstance(parent, tuple):  # tuples render as arrays; make them editable
            raise DecisionError("A state given as a tuple cannot be guarded; pass a list.")
        parent[path[-1]] = _without(text, spans)
    return new


def _without(text: str, spans) -> str:
    out, pos = [], 0
    for a, b in sorted(spans):
        out.append(text[pos:max(a, pos)])
        pos = max(pos, b)
    return "".join(out) + text[pos:]


# ----------------------------------------------------------------------------- cutting

_BOUNDARY = re.compile(r"(?<=[.!?…])[\"'”’)\]]*[ \t]+|[ \t]*\n\s*")
_HEADER_LINE = re.compile(r"\s*(?:\[[^\[\]\n]{1,120}\]|#{1,6}[ \t][^\n]{0,120}|[=*-]{3,}[^\n]{0,120})\s*")


def _segments(text: str) -> list[tuple[int, int]]:
    """A contiguous partition of ``text`` into sentences and lines, each with its trailing whitespace;
    a header line (``[...]``, ``# ...``) and a fragment without letters are joined to the next segment."""
    cuts, pos = [], 0
    for m in _BOUNDARY.finditer(text):
        if m.end() > pos and text[pos:m.start()].strip():
            cuts.append((pos, m.end()))
            pos = m.end()
    if pos < len(text):
        cuts.append((pos, len(text)))
    elif cuts:
        cuts[-1] = (cuts[-1][0], len(text))
    out: list[tuple[int, int]] = []
    glue = None
    for a, b in cuts:
        if glue is not None:
            a, glue = glue, None
        seg = text[a:b]
        if _HEADER_LINE.fullmatch(seg) or not re.search(r"\w", seg):
            glue = a
            continue
        out.append((a, b))
    if glue is not None:
        if out:
            out[-1] = (out[-1][0], len(text))
        else:
            out.append((glue, len(text)))
    return out


def cut(state: Any, *, max_pieces: int = DEFAULT_MAX_PIECES, apart=(), skip=()) -> list[Piece]:
    """The pieces of a state: sentences and lines, merged into at most ``max_pieces`` (plus those kept apart).

    Parameters
    ----------
    state : str, dict or list
    max_pieces : int
        Unflagged text is merged into runs of about equal length so that at most
        this many pieces hold it (a run goes on past a flagged piece inside it: a
        piece may have several spans); flagged segments are at most this many pieces
        too (consecutive ones share a piece when there are more).
    apart : iterable of (int, int, int)
        ``(leaf, start, end)`` spans (scanner findings) whose segments are joined
        into one flagged segment, never in a piece with unflagged text.
    skip : iterable of int
        Leaves (indices into `leaves`) left out of every piece: text the caller
        vouches for, never erased.

    Returns
    -------
    list of Piece
        Ordered by where they start; together they cover every character of every
        string not skipped; at most ``2 * max_pieces`` (about ``max_pieces`` without flags).

    Examples
    --------
    >>> [p.text for p in cut("Hi there. My card was charged twice!\\nPlease refund it.")]
    ['Hi there. ', 'My card was charged twice!\\n', 'Please refund it.']
    >>> [p.text for p in cut("One. Two. Three. Four.", max_pieces=2)]
    ['One. Two. ', 'Three. Four.']
    >>> [p.text for p in cut("One. Two. Verdict: yes. Four.", max_pieces=1, apart=[(0, 10, 22)])]
    ['One. Two.  Four.', 'Verdict: yes. ']
    >>> [p.text for p in cut({"policy": "Refunds need a receipt.", "text": "Refund me."}, skip=[0])]
    ['Refund me.']
    """
    strings = leaves(state)
    skip = set(skip)
    segs: list[list] = []  # [leaf, start, end, flagged]
    for li, (_, text) in enumerate(strings):
        if li in skip:
            continue
        for a, b in _segments(text):
            segs.append([li, a, b, False])
    for leaf, a, b in apart:  # a finding's segments become one flagged segment
        hit = [i for i, s in enumerate(segs) if s[0] == leaf and s[1] < max(b, a + 1) and a < s[2]]
        if not hit:
            continue
        first, last = hit[0], hit[-1]
        segs[first] = [leaf, segs[first][1], segs[last][2], True]
        del segs[first + 1:last + 1]
    plain = sum(s[2] - s[1] for s in segs if not s[3])
    target = plain / max_pieces
    flagged = [s for s in segs if s[3]]
    per_flag = -(-len(flagged) // max_pieces) if flagged else 1  # many flags: consecutive ones share a piece
    groups: list[list] = [flagged[i:i + per_flag] for i in range(0, len(flagged), per_flag)]
    cur: list = []
    size = 0
    for s in segs:  # runs of unflagged text; a flagged segment inside a run does not end it
        if s[3]:
            continue
        n = s[2] - s[1]
        if cur and size + n / 2 > target:  # s would take this run past its share: start the next run
            groups.append(cur)
            cur, size = [], 0
        cur.append(s)
        size += n
    if cur:
        groups.append(cur)
    groups.sort(key=lambda g: (g[0][0], g[0][1]))
    out = []
    for g in groups:
        spans: list[tuple[int, int, int]] = []
        for leaf, a, b, _f in g:
            if spans and spans[-1][0] == leaf and spans[-1][2] == a:
                spans[-1] = (leaf, spans[-1][1], b)
            else:
                spans.append((leaf, a, b))
        out.append(Piece(tuple(spans), " ".join(strings[leaf][1][a:b] for leaf, a, b in spans)))
    return out


# ----------------------------------------------------------------------------- canonical form, repeats

_BRACKET = re.compile(r"^[ \t]*\[([^\[\]\n]{1,80})\][ \t]*$", re.M)
_MD = re.compile(r"^[ \t]*#{1,6}[ \t]+([^\n]{1,80}?)[ \t]*$", re.M)
_KV = re.compile(r"([A-Z][A-Z0-9 _|/&()-]{0,60}[A-Z0-9)]):[ \t]*(\S[^\n]*)")


def _blocks(text: str) -> list[tuple[str, str]] | None:
    """A text written as titled blocks (``[TITLE]`` or ``### Title`` header lines, ``TITLE: body`` lines,
    a flat JSON object of strings): its (title, body) pairs; None for any other text."""
    t = text.strip()
    if t.startswith("{") and t.endswith("}"):
        try:
            obj = json.loads(t)
        except ValueError:
            return None
        if isinstance(obj, dict) and obj and all(isinstance(k, str) and isinstance(v, str) for k, v in obj.items()):
            return list(obj.items())
        return None
    lines = [ln for ln in t.split("\n") if ln.strip()]
    if lines and all(_KV.fullmatch(ln.strip()) for ln in lines):
        return [(m.group(1), m.group(2)) for m in (_KV.fullmatch(ln.strip()) for ln in lines)]
    for rx in (_BRACKET, _MD):
        heads = list(rx.finditer(t))
        if heads and heads[0].start() == 0:
            return [(h.group(1).strip(), t[h.end():heads[i + 1].start() if i + 1 < len(heads) else len(t)])
                    for i, h in enumerate(heads)]
    return None


def canonical(state: Any) -> Any:
    """The state with every string written as titled blocks put in one form (a new object when any changes).

    A string that is a sequence of titled blocks -- ``[TITLE]`` header lines, markdown
    headings, ``TITLE: body`` lines, or a flat JSON object of strings -- becomes
    ``[TITLE]\\nbody`` blocks separated by a blank line, titles in capitals, each body's
    whitespace runs collapsed to one space (a document of one block: its body alone). The same content
    then reads the same whatever serialization it came in; other strings are unchanged.

    Examples
    --------
    >>> a = canonical("[POLICY]\\nRefunds need a receipt.\\n\\n[MESSAGE]\\nRefund me,\\nplease.")
    >>> a
    '[POLICY]\\nRefunds need a receipt.\\n\\n[MESSAGE]\\nRefund me, please.'
    >>> canonical("POLICY: Refunds need a receipt.\\nMESSAGE: Refund me, please.") == a
    True
    >>> canonical('{"POLICY": "Refunds need a receipt.", "MESSAGE": "Refund me,\\\\nplease."}') == a
    True
    >>> canonical({"content": "### Message\\nRefund me."}), canonical("Just text: nothing else.")
    ({'content': 'Refund me.'}, 'Just text: nothing else.')
    """
    def one(text):
        blocks = _blocks(text)
        if not blocks:
            return text
        blocks = [(" ".join(h.split()).upper(), " ".join(b.split())) for h, b in blocks]
        if len(blocks) == 1:
            return blocks[0][1]
        return "\n\n".join(f"[{h}]\n{b}" for h, b in blocks)

    if isinstance(state, str):
        return one(state)
    strings = leaves(state)
    new = {path: one(t) for path, t in strings}
    if all(new[p] == t for p, t in strings):
        return state
    out = copy.deepcopy(state)
    for path, t in new.items():
        parent = out
        for k in path[:-1]:
            parent = parent[k]
        if isinstance(parent, tuple):
            raise DecisionError("A state given as a tuple cannot be guarded; pass a list.")
        parent[path[-1]] = t
    return out


def repeats(state: Any, *, share: float = 0.2) -> list[tuple[int, int, int]]:
    """Every copy of a sentence or line the state says three times or more, where such copies are ``share`` of it or more.

    Returns ``(leaf, start, end)`` spans (as `cut` takes them in ``apart``). Sentences are
    compared by their words and numbers (any case or spacing; three words at least). A
    sentence said word for word three times or more, in copies that make up a fifth of the
    state, is filler that dilutes the rest of it: every copy goes, the first included (the
    fact that it was repeated is lost with it). Never the whole state: where nothing else
    is left, nothing is returned.

    Examples
    --------
    >>> t = "Lost parcel. " + "The weather is fine today. " * 3 + "Order 12."
    >>> [t[a:b] for _, a, b in repeats(t)]
    ['The weather is fine today. ', 'The weather is fine today. ', 'The weather is fine today. ']
    >>> t = "Block my card. " + " ".join(f"Log line {i}: the job ran." for i in range(4))
    >>> repeats(t), repeats("Fine day today. " * 3), repeats("A short note. Another. A short note. A short note.", share=0.9)
    ([], [], [])
    """
    segs, count, total = [], {}, 0
    for li, (_, text) in enumerate(leaves(state)):
        total += len(text)
        for a, b in _segments(text):
            key = " ".join(re.findall(r"\w+", text[a:b].lower()))
            segs.append((li, a, b, key))
            count[key] = count.get(key, 0) + 1
    out = [(li, a, b) for li, a, b, key in segs if count[key] > 2 and key.count(" ") >= 2]
    rest = any(re.search(r"[^\W\d_]", k) for _, _, _, k in segs if count[k] <= 2 or k.count(" ") < 2)
    return out if out and rest and sum(b - a for _, a, b in out) >= share * total else []


_MISSING = object()


def trusted_leaves(state: Any, fields: Sequence[str]) -> frozenset:
    """The indices (into `judge.decisions.pieces.leaves`) of the strings under the ``fields`` of a JSON-object state.

    A field is a top-level key, or a dotted path to a nested key (a key that contains a
    dot is matched whole first).

    Raises
    ------
    DecisionError
        ``fields`` given for a state that is not a JSON object, or a field it does not have
        (its fields are listed).

    Examples
    --------
    >>> state = {"policy": "Refunds need a receipt.", "log": {"service": "ledger", "msg": "503"}, "text": "Hi"}
    >>> sorted(trusted_leaves(state, ["policy", "log.service"])), trusted_leaves({"n": 3, "t": "x"}, ["n"])
    ([1, 2], frozenset())
    >>> trusted_leaves(state, ["polcy"])
    Traceback (most recent call last):
    ...
    judge.decisions.questions.DecisionError: Guard trusted names field 'polcy', which the state does not have; its fields are ['log', 'log.msg', 'log.service', 'policy', 'text'].
    """
    if not fields:
        return frozenset()
    if not isinstance(state, Mapping):
        raise DecisionError(f"Guard trusted names fields {list(fields)[:10]}, but the state is a "
                            f"{type(state).__name__}, not a JSON object; send the trusted text as its own field.")
    strings = leaves(state)
    out = set()
    for f in fields:
        path = (f,) if f in state else tuple(f.split("."))
        node: Any = state
        for k in path:
            node = node.get(k, _MISSING) if isinstance(node, Mapping) else _MISSING
        if node is _MISSING:  # the fields listed only here: a request that names real ones pays nothing for it
            known = sorted({".".join(map(str, p[:i])) for p, _ in strings for i in range(1, len(p) + 1)
                            if all(isinstance(k, str) for k in p[:i])})
            raise DecisionError(f"Guard trusted names field {f!r}, which the state does not have; its fields are "
                                f"{known[:30]}.")
        out |= {li for li, (p, _) in enumerate(strings) if p[:len(path)] == path}
    return frozenset(out)
