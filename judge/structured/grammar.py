"""JSON schema -> Lark grammar for llguidance, with one virtual token per big string enum.

:func:`build_grammar` walks a schema in the supported subset (see :mod:`judge.structured`)
and writes a Lark grammar. Every string enum with at least ``enum_threshold`` values is
replaced by a *virtual token* ``<[V + i]>`` (an id past the model's vocabulary of size
``V``) and described by an :class:`EnumSlot`; the decoder hands such slots to a trie
automaton (:mod:`judge.structured.decode`). Smaller enums stay in the grammar as
alternatives.

What it deliberately does not do: talk to llguidance or a tokenizer (it is pure text), or
accept keywords outside the subset (they raise ``ValueError`` naming the supported ones).
"""

from __future__ import annotations

import json
from dataclasses import dataclass

__all__ = ["EnumSlot", "build_grammar"]

_IGNORED = {"title", "description", "default", "examples", "$schema", "$id", "$comment"}
_ALLOWED = {
    "object": {"type", "properties", "required", "additionalProperties"},
    "array": {"type", "items", "minItems", "maxItems"},
    "string": {"type", "minLength", "maxLength"},
    "integer": {"type"},
    "number": {"type"},
    "boolean": {"type"},
    "null": {"type"},
}
_STRING_CHAR = r'([^"\\\x00-\x1f\x7f]|\\["\\/bfnrt]|\\u[0-9a-fA-F]{4})'


def _lark_literal(text: str) -> str:
    return json.dumps(text, ensure_ascii=False)


@dataclass(frozen=True)
class EnumSlot:
    """One trie-handled enum occurrence in the grammar.

    Attributes
    ----------
    path : str
        JSON-pointer-like path of the field, e.g. ``"/tool"`` or ``"/tags/*"``.
    values : tuple of str
        The enum's values, in schema order.
    lead : str
        Text before the value inside the slot (``""`` or ``" "``).

    Examples
    --------
    >>> EnumSlot("/tool", ("get", "set"), " ").labels
    [' "get"', ' "set"']
    """

    path: str
    values: tuple
    lead: str

    @property
    def labels(self) -> list[str]:
        """The texts the automaton accepts: ``lead`` + each value as a JSON string."""
        return [self.lead + json.dumps(v, ensure_ascii=False) for v in self.values]


class _GrammarBuilder:
    def __init__(self, threshold, max_string_length, max_number_digits, max_items):
        self.threshold = threshold
        self.max_string_length = max_string_length
        self.max_number_digits = max_number_digits
        self.max_items = max_items
        self.rules: list[str] = []
        self.lexemes: dict[str, str] = {}
        self.slots: list[EnumSlot] = []
        self._slot_index: dict[tuple, int] = {}

    def rule(self, body: str) -> str:
        name = f"r{len(self.rules)}"
        self.rules.append(f"{name}: {body}")
        return name

    def lexeme(self, regex: str) -> str:
        if regex not in self.lexemes:
            self.lexemes[regex] = f"L{len(self.lexemes)}"
        return self.lexemes[regex]

    def value(self, schema, path: str, lead: str) -> str:
        """Lark expression for ``lead`` followed by a value of ``schema``."""
        if not isinstance(schema, dict):
            raise ValueError(f"Invalid schema at {path or '/'}: expected an object, got {schema!r}; "
                             f"use e.g. {{'type': 'string'}}.")
        keys = set(schema) - _IGNORED
        if "$ref" in schema:
            raise ValueError(f"Unsupported keyword '$ref' at {path or '/'}: judge.structured handles "
                             f"$ref-free schemas only; inline the referenced schema.")
        pre = f"{_lark_literal(lead)} " if lead else ""
        if "const" in schema:
            return pre + _lark_literal(json.dumps(schema["const"], ensure_ascii=False))
        if "enum" in schema:
            values = list(schema["enum"])
            if not values:
                raise ValueError(f"Empty enum at {path or '/'}; give at least one value.")
            if len(values) >= self.threshold and all(isinstance(v, str) for v in values):
                key = (path, tuple(values), lead)
                if key not in self._slot_index:
                    self._slot_index[key] = len(self.slots)
                    self.slots.append(EnumSlot(path, tuple(values), lead))
                return f"<[SLOT{self._slot_index[key]}]>"
            alts = " | ".join(_lark_literal(json.dumps(v, ensure_ascii=False)) for v in values)
            return pre + f"({alts})"
        t = schema.get("type")
        if t not in _ALLOWED:
            raise ValueError(f"Unsupported type {t!r} at {path or '/'}: valid types are "
                             f"{sorted(_ALLOWED)} (or use enum/const).")
        extra = keys - _ALLOWED[t] - {"enum", "const"}
        if extra:
            raise ValueError(f"Unsupported keyword(s) {sorted(extra)} for type {t!r} at {path or '/'}; "
                             f"supported: {sorted(_ALLOWED[t] - {'type'})}.")
        if t == "string":
            lo = int(schema.get("minLength", 0))
            hi = int(schema.get("maxLength", max(lo, self.max_string_length)))
            if hi < lo:
                raise ValueError(f"maxLength {hi} < minLength {lo} at {path or '/'}; no string fits.")
            return pre + self.lexeme(f'"{_STRING_CHAR}{{{lo},{hi}}}"')
        if t == "integer":
            return pre + self.lexeme(f"-?(0|[1-9][0-9]{{0,{self.max_number_digits - 1}}})")
        if t == "number":
            d = self.max_number_digits
            return pre + self.lexeme(f"-?(0|[1-9][0-9]{{0,{d - 1}}})(\\.[0-9]{{1,{d}}})?([eE][+-]?[0-9]{{1,2}})?")
        if t == "boolean":
            return pre + '("true" | "false")'
        if t == "null":
            return pre + '"null"'
        if t == "object":
            props = schema.get("properties", {})
            missing = set(schema.get("required", [])) - set(props)
            if missing:
                raise ValueError(f"Required properties {sorted(missing)} at {path or '/'} have no schema in "
                                 f"'properties'; add them there.")
            parts = []
            for i, (k, sub) in enumerate(props.items()):
                sep = "" if i == 0 else '", " '
                parts.append(f"{sep}{_lark_literal(json.dumps(k, ensure_ascii=False) + ':')} "
                             f"{self.value(sub, f'{path}/{k}', ' ')}")
            return pre + self.rule('"{" ' + " ".join(parts) + ' "}"')
        # array
        items = schema.get("items", {})
        lo = int(schema.get("minItems", 0))
        hi = int(schema.get("maxItems", max(lo, self.max_items)))
        if hi < lo:
            raise ValueError(f"maxItems {hi} < minItems {lo} at {path or '/'}; no array fits.")
        if hi == 0:
            return pre + '"[" "]"'
        first = self.value(items, f"{path}/*", "")
        rest = self.value(items, f"{path}/*", " ")
        more = f'("," {rest}){{{max(lo - 1, 0)},{hi - 1}}}'
        body = f'"[" {first} {more} "]"' if lo >= 1 else f'"[" ({first} {more})? "]"'
        return pre + self.rule(body)

    def grammar(self, root: str, vocab_size: int) -> str:
        lines = [f"start: {root}", *self.rules]
        lines += [f"{name}: /{rx.replace('/', chr(92) + '/')}/" for rx, name in self.lexemes.items()]
        text = "\n".join(lines) + "\n"
        for i in range(len(self.slots)):
            text = text.replace(f"<[SLOT{i}]>", f"<[{vocab_size + i}]>")
        return text


def build_grammar(schema, vocab_size: int, *, enum_threshold: int = 64, max_string_length: int = 64,
                  max_number_digits: int = 12, max_items: int = 8) -> tuple[str, list[EnumSlot]]:
    """The Lark grammar of ``schema``, big string enums replaced by virtual tokens.

    Parameters
    ----------
    schema : dict
        A JSON schema in the supported subset (see :mod:`judge.structured`).
    vocab_size : int
        The tokenizer's vocabulary size ``V``; slot ``i`` becomes the token ``<[V + i]>``.
    enum_threshold : int
        String enums with at least this many values become slots.
    max_string_length, max_number_digits, max_items : int
        Caps for strings without ``maxLength``, numbers, arrays without ``maxItems``.

    Returns
    -------
    grammar : str
        Lark text for ``llguidance.LLMatcher.grammar_from_lark``.
    slots : list of EnumSlot
        One per distinct (path, values, lead) occurrence, in the order of their virtual tokens.

    Raises
    ------
    ValueError
        A keyword or type outside the supported subset, or bounds no value can meet.

    Examples
    --------
    >>> text, slots = build_grammar({"type": "object", "properties": {
    ...     "tool": {"enum": ["get", "set"]}, "ok": {"type": "boolean"}}}, 100, enum_threshold=2)
    >>> print(text, end="")
    start: r0
    r0: "{" "\\"tool\\":" <[100]> ", " "\\"ok\\":" " " ("true" | "false") "}"
    >>> slots[0].path, slots[0].labels
    ('/tool', [' "get"', ' "set"'])
    """
    if enum_threshold < 1:
        raise ValueError(f"enum_threshold must be >= 1, got {enum_threshold}.")
    b = _GrammarBuilder(enum_threshold, max_string_length, max_number_digits, max_items)
    root = b.value(schema, "", "")
    return b.grammar(root, vocab_size), list(b.slots)
