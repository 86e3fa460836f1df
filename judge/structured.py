"""Structured generation for a JSON schema: llguidance for the structure, the trie for big enums.

The schema is compiled into a Lark grammar for llguidance in which every
string enum with at least ``enum_threshold`` values is replaced by one
*virtual token* (an id past the model's vocabulary, ``<[V + i]>``). When the
grammar reaches a virtual token, control passes to a
:class:`~judge.automaton.trie.TrieAutomaton` built over the JSON texts of that field's
values (any tokenization, exact); when the automaton completes a value, the
virtual token is consumed by llguidance and the grammar continues. Small
enums stay in the grammar. Every output therefore parses and validates
against the schema (unless ``max_new_tokens`` cuts it short; the result says so).

For each trie-handled field the result can also carry the **distribution over
that field's values** at the point where the model chose it: ``log P(value |
everything generated before it)`` for every value, each spelled by its
canonical tokens (scored through the label trie in one extra forward pass, as
:class:`judge.Classifier` scores labels), normalized over the values.

Supported schema subset (``$ref``-free): ``type`` one of ``object``
(``properties``; every property is generated, in the schema's order;
``required`` and ``additionalProperties: false`` are then always satisfied),
``array`` (``items``, ``minItems``, ``maxItems``), ``string`` (``minLength``,
``maxLength``), ``integer``, ``number``, ``boolean``, ``null``; ``enum`` (any
JSON scalars; only string enums go to the trie) and ``const``. ``title``,
``description``, ``default``, ``examples`` and ``$schema`` are ignored; any
other keyword raises ``ValueError``.

Output format: ``{"a": 1, "b": [1, 2]}`` (one space after ``:`` and ``,``).
Tokens never straddle the boundaries of a trie-handled value (its leading
space, quotes and text are spelled by tokens of its own), which llguidance
alone would allow; the language (the set of texts) is the same.

Unbounded strings, numbers and arrays are capped (``max_string_length``,
``max_number_digits``, ``max_items``) so that generation always ends; the
caps only shrink the set of outputs, each still valid.

What it deliberately does not do: ``$ref``, ``anyOf``/``oneOf``/``allOf``,
``pattern``, numeric bounds, optional-property choice; or sample (it uses
``model.generate``, so greedy, sampling and beams all work as usual).

Requires ``llguidance`` (``pip install llguidance``).
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass, field

import numpy as np

from judge.automaton.trie import set_token_bits

__all__ = ["StructuredSchema", "StructuredLogitsProcessor", "StructuredResult", "FieldChoice",
           "generate_structured", "value_distribution"]

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
class _Slot:
    """One trie-handled enum occurrence in the grammar."""

    path: str  # JSON-pointer-like path of the field, e.g. "/tool" or "/tags/*"
    values: tuple  # the enum's values (str)
    lead: str  # text before the value inside the slot ("" or " ")

    @property
    def labels(self) -> list[str]:
        return [self.lead + json.dumps(v, ensure_ascii=False) for v in self.values]


class _GrammarBuilder:
    def __init__(self, threshold, max_string_length, max_number_digits, max_items):
        self.threshold = threshold
        self.max_string_length = max_string_length
        self.max_number_digits = max_number_digits
        self.max_items = max_items
        self.rules: list[str] = []
        self.lexemes: dict[str, str] = {}
        self.slots: list[_Slot] = []
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
                    self.slots.append(_Slot(path, tuple(values), lead))
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


class StructuredSchema:
    """A JSON schema compiled for one tokenizer: the grammar, and one automaton per big enum.

    Parameters
    ----------
    schema : dict
        A JSON schema in the supported subset (see the module docstring).
    tokenizer : transformers.PreTrainedTokenizerFast
    enum_threshold : int, default 64
        String enums with at least this many values go to the trie automaton;
        smaller ones stay in the grammar.
    max_string_length, max_number_digits, max_items : int
        Caps for strings without ``maxLength``, numbers, arrays without ``maxItems``.
    eos_token_id : int, optional
        The token that ends the output (default: the tokenizer's EOS).

    Attributes
    ----------
    grammar : str
        The Lark grammar given to llguidance.
    slots : list
        One entry per trie-handled enum occurrence (``path``, ``values``).
    automata : list of judge.automaton.trie.TrieAutomaton
    compile_ms : dict
        ``grammar`` (schema -> Lark + llguidance matcher) and ``automata`` times.

    Examples
    --------
    >>> s = StructuredSchema({"type": "object", "properties": {                 # doctest: +SKIP
    ...     "tool": {"enum": tool_names}, "n": {"type": "integer"}}}, tokenizer)
    >>> len(s.slots), s.slots[0].path                                           # doctest: +SKIP
    (1, '/tool')
    """

    def __init__(self, schema, tokenizer, *, enum_threshold: int = 64, max_string_length: int = 64,
                 max_number_digits: int = 12, max_items: int = 8, eos_token_id: int | None = None):
        import llguidance

        from judge.automaton.trie import TrieAutomaton
        from judge.automaton.vocab import Vocabulary

        if enum_threshold < 1:
            raise ValueError(f"enum_threshold must be >= 1, got {enum_threshold}.")
        self.schema = schema
        self.tokenizer = tokenizer
        self.vocab = Vocabulary.from_tokenizer(tokenizer)
        self.vocab_size = self.vocab.size
        eos = tokenizer.eos_token_id if eos_token_id is None else eos_token_id
        if eos is None:
            raise ValueError("The tokenizer has no EOS token; pass eos_token_id=... to StructuredSchema.")
        self.eos_token_id = int(eos)
        self.lltokenizer = _lltokenizer(tokenizer, self.vocab_size + 4096, self.eos_token_id)
        self.vocab.byte_trie()
        t0 = time.perf_counter()  # per-tokenizer setup above is cached and not counted
        b = _GrammarBuilder(enum_threshold, max_string_length, max_number_digits, max_items)
        root = b.value(schema, "", "")
        self.slots = b.slots
        self.grammar = b.grammar(root, self.vocab_size)
        if len(self.slots) > 4096:
            raise ValueError(f"{len(self.slots)} trie-handled enum occurrences; at most 4096 are supported.")
        self._llgrammar = llguidance.LLMatcher.grammar_from_lark(self.grammar)
        m = self.new_matcher()
        if m.is_error():
            raise ValueError(f"llguidance rejected the compiled grammar: {m.get_error()}")
        t1 = time.perf_counter()
        self.automata = [TrieAutomaton.build(s.labels, self.vocab) for s in self.slots]
        t2 = time.perf_counter()
        self.compile_ms = {"grammar": (t1 - t0) * 1e3, "automata": (t2 - t1) * 1e3}
        self._words = (self.vocab_size + 4096 + 31) // 32
        self._root_rows = []
        for a in self.automata:
            row = np.zeros((1, self._words), np.int32)
            a.fill_bitmask(np.zeros(1, np.int64), row[:, : (self.vocab_size + 31) // 32])
            self._root_rows.append(row[0])

    def new_matcher(self):
        """A fresh llguidance matcher at the start of the output."""
        import llguidance

        return llguidance.LLMatcher(self.lltokenizer, self._llgrammar, log_level=0)


_LLTOK_CACHE: dict = {}


def _lltokenizer(tokenizer, n_vocab, eos):
    import llguidance.hf

    key = (id(tokenizer), n_vocab, eos)
    if key not in _LLTOK_CACHE:
        _LLTOK_CACHE[key] = (tokenizer, llguidance.hf.from_tokenizer(tokenizer, n_vocab=n_vocab, eos_token=eos))
    return _LLTOK_CACHE[key][1]


class _State:
    """Decode state of one sequence: the grammar matcher, and the automaton node when inside a slot."""

    __slots__ = ("matcher", "slot", "node", "events", "dead", "done", "row", "row_slots")

    def __init__(self, matcher):
        self.matcher = matcher
        self.slot = -1  # >= 0: inside trie slot ``slot`` at automaton ``node``
        self.node = 0
        self.events: tuple = ()  # (slot, start position, end position, value index) per finished value
        self.dead = False
        self.done = False
        self.row = None  # cached allowed-token row (words) for this state
        self.row_slots: tuple = ()

    def copy(self):
        s = _State(self.matcher.deep_copy())
        s.slot, s.node, s.events, s.dead, s.done = self.slot, self.node, self.events, self.dead, self.done
        return s


class StructuredLogitsProcessor:
    """Keep generation inside a :class:`StructuredSchema` (transformers ``LogitsProcessor``).

    A pure function of ``(input_ids, scores)`` given where the prompt ends:
    each row's state is rebuilt from its generated tokens (memoized one step
    back), so any batch and beam search work.

    Parameters
    ----------
    compiled : StructuredSchema
    prompt_length : int
        Width of the (padded) prompt given to ``generate``.

    Attributes
    ----------
    dispatch_ns : dict of str to list of int
        Time spent switching, per event, for the benchmark: ``"mask"`` (OR-ing
        the automaton's first tokens into llguidance's mask where a slot may
        start), ``"enter"`` (consuming the virtual token), ``"leave"``
        (handing back to the grammar at the closing quote).
    """

    def __init__(self, compiled: StructuredSchema, prompt_length: int):
        if int(prompt_length) < 0:
            raise ValueError(f"prompt_length must be >= 0, got {prompt_length}.")
        self.c = compiled
        self.prompt_length = int(prompt_length)
        self._memo: dict[tuple, _State] = {(): _State(compiled.new_matcher())}
        self.dispatch_ns: dict[str, list[int]] = {"mask": [], "enter": [], "leave": []}
        self._V = compiled.vocab_size
        self._node = np.zeros(1, np.int64)

    # --- state -----------------------------------------------------------
    def state(self, generated) -> _State:
        """The decode state after ``generated`` tokens (memoized)."""
        key = tuple(int(t) for t in generated)
        st = self._memo.get(key)
        if st is None:
            prev = self.state(key[:-1])
            st = self._advance(prev, key[-1], len(key) - 1)
            self._memo[key] = st
        return st

    def _advance(self, prev: _State, t: int, pos: int) -> _State:
        st = prev.copy()
        if st.dead or st.done:
            st.done = st.done and t == self.c.eos_token_id
            st.dead = not st.done
            return st
        if st.slot >= 0:  # inside a trie slot
            a = self.c.automata[st.slot]
            st.node = a.next(st.node, t)
            if st.node < 0 or t >= self._V:
                st.dead = True
            else:
                self._maybe_leave(st, pos)
            return st
        if prev.row is None:
            self._row(prev)
        for i in prev.row_slots:  # a slot may start here: is ``t`` the start of one of its values?
            a = self.c.automata[i]
            n = a.next(a.root, t)
            if n >= 0:
                t0 = time.perf_counter_ns()
                ok = st.matcher.consume_token(self._V + i)
                st.slot, st.node = i, n
                st.events = st.events + ((i, pos, -1, -1),)
                self.dispatch_ns["enter"].append(time.perf_counter_ns() - t0)
                if not ok:
                    st.dead = True
                else:
                    self._maybe_leave(st, pos)
                return st
        if t == self.c.eos_token_id and st.matcher.is_accepting():
            st.done = True
            return st
        st.dead = not st.matcher.consume_token(t)
        return st

    def _maybe_leave(self, st: _State, pos: int) -> None:
        a = self.c.automata[st.slot]
        lab = a.label_at(st.node)
        if lab is not None:  # a JSON string ends at its closing quote: nothing can follow inside
            t0 = time.perf_counter_ns()
            i, start, _, _ = st.events[-1]
            st.events = st.events[:-1] + ((i, start, pos + 1, lab),)
            st.slot, st.node = -1, 0
            self.dispatch_ns["leave"].append(time.perf_counter_ns() - t0)

    def _row(self, st: _State) -> np.ndarray:
        """Allowed tokens at ``st`` as packed words over V + n_slots (cached on the state)."""
        if st.row is not None:
            return st.row
        V = self._V
        if st.slot >= 0 and not (st.dead or st.done):  # inside a value: the automaton's row
            row = np.empty((1, self.c._words), np.int32)
            self._node[0] = st.node
            self.c.automata[st.slot].fill_bitmask(self._node, row[:, : (V + 31) // 32])
            row[0, (V + 31) // 32:] = 0
            st.row = row[0]
            return st.row
        row = np.zeros((1, self.c._words), np.int32)
        if st.dead:
            pass
        elif st.done:
            e = self.c.eos_token_id
            set_token_bits(row[0], [e])
        else:
            st.matcher.unsafe_compute_mask_ptr(row.ctypes.data, row.nbytes)
            slots = []
            for i in range(len(self.c.slots)):
                k = V + i
                if (row[0, k >> 5] >> (k & 31)) & 1:
                    slots.append(i)
            if slots:
                t0 = time.perf_counter_ns()
                for i in slots:
                    row[0] |= self.c._root_rows[i]
                self.dispatch_ns["mask"].append(time.perf_counter_ns() - t0)
            st.row_slots = tuple(slots)
        st.row = row[0]
        return st.row

    def allowed(self, generated) -> np.ndarray:
        """Token ids (< vocab size) allowed after ``generated``, sorted."""
        row = self._row(self.state(generated))
        bits = np.unpackbits(row.view(np.uint8), bitorder="little")[: self._V]
        return np.flatnonzero(bits)

    def __call__(self, input_ids, scores):
        import torch

        B, W = scores.shape
        gen = input_ids[:, self.prompt_length:].tolist()
        states = [self.state(g) for g in gen]
        keep = {tuple(g) for g in gen}
        self._memo = {k: v for k, v in self._memo.items() if k in keep or len(k) == 0}
        rows = np.stack([self._row(s) for s in states])
        allowed = np.unpackbits(rows.view(np.uint8), axis=1, bitorder="little")[:, : self._V].astype(bool)
        for r, s in enumerate(states):
            if s.dead or not allowed[r].any():  # off the grammar (or stuck): end the row
                allowed[r] = False
                allowed[r, self.c.eos_token_id] = True
        if W > self._V:
            allowed = np.concatenate([allowed, np.zeros((B, W - self._V), bool)], axis=1)
        elif W < self._V:
            allowed = allowed[:, :W]
        mask = torch.from_numpy(allowed).to(scores.device)
        return scores.masked_fill(~mask, float("-inf"))


@dataclass
class FieldChoice:
    """One trie-handled enum value of the output.

    Attributes
    ----------
    path : str
        Where the field is (``/tool``, ``/tags/*``).
    value : str
        The value chosen.
    values : tuple of str
        The field's values (the enum, in schema order).
    proba : ndarray of float64, shape (len(values),) or None
        Distribution over ``values`` at the point where the model chose the
        value (canonical tokens; see the module docstring); None unless requested.
    """

    path: str
    value: str
    values: tuple
    proba: np.ndarray | None = None


@dataclass
class StructuredResult:
    """A generated JSON document.

    Attributes
    ----------
    text : str
    value : object or None
        ``json.loads(text)``; None if generation was cut short (``complete`` is False).
    complete : bool
        The grammar reached its end (and the EOS token) within ``max_new_tokens``.
    fields : list of FieldChoice
    token_ids : list of int
        Generated tokens (EOS excluded).
    """

    text: str
    value: object
    complete: bool
    fields: list = field(default_factory=list)
    token_ids: list = field(default_factory=list)


def generate_structured(model, tokenizer, schema, prompt: str, *, compiled: StructuredSchema | None = None,
                        max_new_tokens: int = 256, return_distributions: bool = False,
                        **generate_kwargs) -> StructuredResult:
    """Generate one JSON document for ``schema`` after ``prompt`` with ``model.generate``.

    Parameters
    ----------
    model : transformers.PreTrainedModel (causal LM)
    tokenizer : transformers.PreTrainedTokenizerFast
    schema : dict
        JSON schema (supported subset: see the module docstring).
    prompt : str
        Text before the JSON (apply a chat template yourself if wanted).
    compiled : StructuredSchema, optional
        Reuse a compiled schema (compile once, generate many times).
    max_new_tokens : int
    return_distributions : bool
        Also compute each trie field's distribution over its values (one
        extra forward pass per field).
    **generate_kwargs
        Passed to ``model.generate`` (``do_sample``, ``temperature``, ...).

    Returns
    -------
    StructuredResult
    """
    import torch

    c = compiled if compiled is not None else StructuredSchema(schema, tokenizer)
    prompt_ids = tokenizer.encode(prompt, add_special_tokens=False) if prompt else []
    if not prompt_ids and tokenizer.bos_token_id is not None:
        prompt_ids = [tokenizer.bos_token_id]
    if not prompt_ids:
        raise ValueError("The prompt is empty and the tokenizer has no BOS token; pass a non-empty prompt.")
    ids = torch.tensor([prompt_ids], device=model.device)
    proc = StructuredLogitsProcessor(c, ids.shape[1])
    kwargs = {"do_sample": False, **generate_kwargs}
    pad = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else c.eos_token_id
    with torch.inference_mode():
        out = model.generate(ids, attention_mask=torch.ones_like(ids), logits_processor=[proc],
                             max_new_tokens=max_new_tokens, eos_token_id=c.eos_token_id,
                             pad_token_id=pad, **kwargs)
    gen = out[0, ids.shape[1]:].tolist()
    st = proc.state(gen)
    if gen and gen[-1] == c.eos_token_id:
        gen = gen[:-1]
    text = tokenizer.decode(gen, skip_special_tokens=False)
    complete = st.done and not st.dead
    value = json.loads(text) if complete else None
    fields = []
    for slot_i, start, _end, lab in st.events:
        if lab < 0:
            continue
        slot = c.slots[slot_i]
        fc = FieldChoice(slot.path, slot.values[lab], slot.values)
        if return_distributions:
            fc.proba = value_distribution(model, tokenizer, prompt_ids + gen[:start], slot.labels)
        fields.append(fc)
    return StructuredResult(text, value, complete, fields, gen)


def value_distribution(model, tokenizer, context_ids, labels) -> np.ndarray:
    """Distribution over ``labels`` right after ``context_ids``, each spelled canonically.

    ``softmax_k log P(tokens(labels[k]) | context)``, all labels scored in one
    tree-masked forward pass over their token trie (``judge.scoring``).

    Parameters
    ----------
    context_ids : list of int, length >= 1
    labels : list of str, length K

    Returns
    -------
    ndarray of float64, shape (K,)
    """
    from judge.scoring import PrefixCache, TokenTrie, label_scores, score_batch

    if len(context_ids) < 1:
        raise ValueError("value_distribution needs at least one context token.")
    seqs = [tokenizer.encode(lab, add_special_tokens=False) for lab in labels]
    trie = TokenTrie.build(seqs)
    prefix = PrefixCache(model, list(context_ids[:-1]))
    node_lp = score_batch(model, prefix, [[int(context_ids[-1])]], trie)
    s = label_scores(node_lp, trie)[0]
    s = s - s.max()
    p = np.exp(s)
    return p / p.sum()
