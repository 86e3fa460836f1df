"""The one reference scorer: brute force that shares no code with the engine.

:class:`Reference` answers the same :class:`~judge.engine.protocol.Scorer` calls as
:class:`judge.engine.Engine` (``score``, ``score_items``, ``encode``, ``option_ids``, and the
``HiddenStates`` capability) in the simplest way that can be right:

* a prompt is tokenized as one string in its own way: the template's control tokens are
  cut out (they are the only special tokens), every stretch between them is tokenized with
  ``split_special_tokens=True`` so user text stays text;
* an option is scored by tokenizing ``prompt + option`` whole; its tokens are those after
  the longest common prefix with the prompt's tokens;
* ``end_token="auto"`` appends the end token to an option whose tokens are a prefix of
  another option's (the engine's policy, recomputed on this tokenization);
* one plain causal forward pass per option over the whole sequence — no cache, no custom
  mask — and a float64 log-softmax summed over the option's tokens;
* a prompt's hidden state: one plain pass of the decoder (``model.get_decoder()``) over the
  prompt alone, its output at the last token (or its mean over the tokens).

So every exactness test reads ``assert_allclose(Engine(m, t).score(q), Reference(m, t).score(q))``.
``reference_logprobs``, ``reference_logprobs_ids`` and ``classifier_reference`` are the same
brute force for a plain prompt string, token ids, and a classifier's labels.

What it deliberately does not do: import anything of ``judge.engine``, ``judge.prompts``,
``judge.classifier`` or ``judge.compiled``, cache, batch, or run fast.
"""

from __future__ import annotations

import re

import numpy as np

__all__ = ["Reference", "reference_logprobs", "reference_logprobs_ids", "classifier_reference"]


def _forward_logprobs(model, ids: list[int], start: int) -> float:
    """Sum of log p(ids[i] | ids[:i]) for i in [start, len(ids)), one plain forward pass."""
    import torch

    if start < 1:
        raise ValueError("the reference needs at least one prompt token before the continuation")
    if start >= len(ids):
        return 0.0
    device = next(model.parameters()).device
    x = torch.tensor([ids], dtype=torch.long, device=device)
    with torch.no_grad():
        logits = model(input_ids=x, use_cache=False).logits[0]
    lp = torch.log_softmax(logits.to(torch.float64), dim=-1)
    tgt = x[0, start:]
    return float(lp[start - 1 : -1].gather(1, tgt[:, None]).sum().item())


def _common_prefix_len(a, b) -> int:
    n = 0
    for x, y in zip(a, b):
        if x != y:
            break
        n += 1
    return n


class Reference:
    """Brute-force scorer with the signature of :class:`judge.engine.Engine` (see the module docstring).

    Parameters
    ----------
    model : transformers.PreTrainedModel
    tokenizer : transformers.PreTrainedTokenizerBase
    end_token : {"auto", True, False}
        As the engine's: append the end token to options that are a prefix of another
        (``"auto"``), to every option (True) or never (False).
    end_id : int, optional
        The end-of-answer token (default: the tokenizer's EOS).

    Attributes
    ----------
    last_usage_ : dict
        ``{"input_tokens": int}``: tokens run through the model by the last call.

    Examples
    --------
    >>> from judge.testing import tiny_pair
    >>> ref = Reference(*tiny_pair())
    >>> from types import SimpleNamespace as Q
    >>> [s.shape for s in ref.score([Q(pieces=(("Sky colour:", False),), options=(" blue", " green"))])]
    [(2,)]
    """

    def __init__(self, model, tokenizer, *, end_token="auto", end_id=None):
        if end_token not in ("auto", True, False):
            raise ValueError(f"end_token must be 'auto', True or False, got {end_token!r}.")
        self.model_ = model
        self.dtype_ = next(model.parameters()).dtype
        self.tokenizer_ = tokenizer
        self.end_token = end_token
        self.end_id_ = int(tokenizer.eos_token_id if end_id is None else end_id)
        self.last_usage_ = {"input_tokens": 0}
        specials = sorted({t for t in getattr(tokenizer, "all_special_tokens", []) if t}, key=len, reverse=True)
        added = sorted({str(t.content) for t in getattr(tokenizer, "added_tokens_decoder", {}).values()
                        if str(t.content)}, key=len, reverse=True)
        marks = sorted(set(specials) | set(added), key=len, reverse=True)
        self._pattern = re.compile("(" + "|".join(map(re.escape, marks)) + ")") if marks else None

    def setup(self) -> Reference:
        """Nothing to load (the model is given); returns self."""
        return self

    def close(self) -> None:
        """Nothing to release: the model and tokenizer were given and stay the caller's."""

    def __enter__(self):
        return self

    def __exit__(self, *exc) -> bool:
        self.close()
        return False

    # ------------------------------------------------------------------ tokenization
    def encode(self, pieces, *, add_special_tokens: bool = False) -> list[int]:
        """The prompt's token ids: control tokens only where the template wrote them.

        Examples
        --------
        >>> from judge.testing import tiny_pair
        >>> ref = Reference(*tiny_pair())
        >>> ref.encode([("<|im_start|>user\\n", False), ("<|im_end|>", True)])[0] == ref.tokenizer_.convert_tokens_to_ids("<|im_start|>")
        True
        """
        tok = self.tokenizer_
        runs: list[tuple[str, bool]] = []  # (text, is a template control token)
        for text, user in pieces:
            parts = [text] if user or self._pattern is None else self._pattern.split(text)
            for j, part in enumerate(parts):
                special = not user and self._pattern is not None and j % 2 == 1
                if not part:
                    continue
                if not special and runs and not runs[-1][1]:
                    runs[-1] = (runs[-1][0] + part, False)
                else:
                    runs.append((part, special))
        ids: list[int] = []
        if add_special_tokens:
            ids += list(tok("", add_special_tokens=True)["input_ids"])
        for text, special in runs:
            if special:
                ids.append(int(tok.convert_tokens_to_ids(text)))
            else:
                ids += list(tok(text, add_special_tokens=False, split_special_tokens=True)["input_ids"])
        return ids

    def _continuations(self, prompt_ids, pieces, options, policy, add_special_tokens=False):
        seqs = []
        for o in options:
            full = self.encode([*pieces, (o, False)], add_special_tokens=add_special_tokens)
            n = _common_prefix_len(prompt_ids, full)
            seqs.append(list(full[n:]) if n == len(prompt_ids) else None)
            if seqs[-1] is None:  # the option merged with the prompt's end: score from the first difference
                seqs[-1] = (n, list(full))
        return self._apply_end(seqs, policy)

    def _apply_end(self, seqs, policy):
        plain = [s if isinstance(s, list) else s[1][s[0]:] for s in seqs]
        if policy is True:
            add = [True] * len(seqs)
        elif policy == "auto":
            prefixes = {tuple(x[:j]) for x in plain for j in range(1, len(x))}
            add = [tuple(x) in prefixes for x in plain]
        else:
            add = [False] * len(seqs)
        out = []
        for s, a in zip(seqs, add):
            end = [self.end_id_] if a else []
            out.append(s + end if isinstance(s, list) else (s[0], s[1] + end))
        return out

    def option_ids(self, context: str, options, *, end_token=None, what: str = "Option") -> list[list[int]]:
        """Token ids of each option after ``context`` (tokenized whole with it; end token by the policy).

        Examples
        --------
        >>> from judge.testing import tiny_pair
        >>> ref = Reference(*tiny_pair())
        >>> len(ref.option_ids("Answer:", [" yes", " yes please"])[0])   # " yes" is a prefix: + end token
        2
        """
        policy = self.end_token if end_token is None else end_token
        pieces = [(context, False)]
        base = self.encode(pieces)
        seqs = self._continuations(base, pieces, options, policy)
        return [s if isinstance(s, list) else s[1][s[0]:] for s in seqs]

    # ------------------------------------------------------------------ scoring
    def score(self, queries, *, root=None, first_token: bool = False, batch_size: int = 8) -> list[np.ndarray]:
        """log P(option | prompt) of every option of every query, by brute force.

        ``queries`` are :class:`judge.engine.Query` objects (anything with ``pieces`` and
        ``options``). ``root`` and ``batch_size`` are accepted for the engine's signature and
        ignored: every sequence runs whole. Returns a list of float64 arrays of shape (K_q,).
        """
        out, fed = [], 0
        for q in queries:
            pieces = [(str(t), bool(u)) for t, u in q.pieces]
            p_ids = self.encode(pieces)
            for s in self._continuations(p_ids, pieces, q.options, self.end_token):
                start, ids = (len(p_ids), p_ids + s) if isinstance(s, list) else s
                if first_token:
                    ids = ids[: start + 1]
                out.append((len(out), _forward_logprobs(self.model_, ids, start)))
                fed += len(ids)
        self.last_usage_ = {"input_tokens": fed}
        flat = [v for _, v in out]
        res, at = [], 0
        for q in queries:
            res.append(np.asarray(flat[at: at + len(q.options)], np.float64))
            at += len(q.options)
        return res

    def score_items(self, items, *, root=(), batch_size: int = 8, progress=None, pack: int = 1) -> list[np.ndarray]:
        """Token-level :meth:`score`: each item's ``ids`` followed by each option's tokens, run whole.

        Examples
        --------
        >>> from judge.testing import tiny_pair
        >>> from types import SimpleNamespace as It
        >>> ref = Reference(*tiny_pair())
        >>> ref.score_items([It(ids=[1, 2, 3], options=[[7], [8, 9]], first_only=False)])[0].shape
        (2,)
        """
        res, fed = [], 0
        for it in items:
            vals = []
            for seq in it.options:
                seq = list(seq)[:1] if getattr(it, "first_only", False) else list(seq)
                vals.append(_forward_logprobs(self.model_, list(it.ids) + seq, len(it.ids)))
                fed += len(it.ids) + len(seq)
            res.append(np.asarray(vals, np.float64))
        self.last_usage_ = {"input_tokens": fed}
        return res

    def hidden_states(self, items, *, root=(), pooling: str = "last", batch_size: int = 16) -> np.ndarray:
        """Each item's prompt state from one plain decoder pass over its ``ids`` alone: (n, d) float64.

        ``pooling``: the last token's (``"last"``) or the mean over the prompt (``"mean"``); ``root`` and
        ``batch_size`` are accepted and ignored (no cache, no batch).

        Examples
        --------
        >>> from judge.testing import tiny_pair
        >>> from types import SimpleNamespace as It
        >>> Reference(*tiny_pair()).hidden_states([It(ids=[1, 2, 3], options=[[7]])]).shape
        (1, 64)
        """
        import torch

        if pooling not in ("last", "mean"):
            raise ValueError(f"pooling must be 'last' or 'mean', got {pooling!r}.")
        device = next(self.model_.parameters()).device
        out = []
        for it in items:
            with torch.no_grad():
                h = self.model_.get_decoder()(input_ids=torch.tensor([list(it.ids)], device=device)).last_hidden_state[0]
            out.append((h[-1] if pooling == "last" else h.mean(0)).double().cpu().numpy())
        return np.stack(out) if out else np.zeros((0, int(self.model_.config.get_text_config().hidden_size)))

    def score_items_states(self, items, *, root=(), batch_size: int = 8, pack: int = 1, progress=None) -> tuple:
        """(:meth:`score_items`, :meth:`hidden_states`), each by its own plain passes."""
        items = list(items)
        return self.score_items(items), self.hidden_states(items)


def reference_logprobs_ids(model, prompt_ids, continuation_ids) -> np.ndarray:
    """Brute-force log p(continuation | prompt) for each continuation, from token ids.

    ``continuation_ids`` is a list of id lists (an empty one scores 0.0). One full causal
    forward pass per continuation over ``prompt_ids + continuation``, no cache and no
    custom mask; log-softmax in float64. Returns float64 of shape (K,).

    Examples
    --------
    >>> from judge.testing import tiny_pair
    >>> reference_logprobs_ids(tiny_pair()[0], [1, 2], [[3], []]).shape
    (2,)
    """
    prompt_ids = [int(t) for t in prompt_ids]
    return np.array(
        [_forward_logprobs(model, prompt_ids + [int(t) for t in c], len(prompt_ids)) for c in continuation_ids],
        dtype=np.float64,
    )


def reference_logprobs(model, tokenizer, prompt: str, continuations: list[str], *,
                       add_special_tokens: bool = False) -> np.ndarray:
    """Brute-force log p(continuation | prompt) for each continuation string (float64, (K,)).

    For each continuation, ``prompt + continuation`` is tokenized as one string with a
    plain tokenizer call. The boundary is where the prompt's own tokens end: the tokens
    of ``tokenizer(prompt)`` must be a prefix of the joint tokenization. When they are
    not (the tokenizer merges across the seam), the boundary is the longest common
    prefix of the two token lists, so the score covers every token from the first one
    that differs, i.e. it also includes the probability of the re-tokenized prompt tail.
    Then one full causal forward pass, no cache, no custom mask, and the continuation
    tokens' log-softmax in float64, summed.

    Examples
    --------
    >>> from judge.testing import tiny_pair
    >>> model, tok = tiny_pair()
    >>> reference_logprobs(model, tok, "Sky colour:", [" blue", " green"]).shape
    (2,)
    """
    p = list(tokenizer(prompt, add_special_tokens=add_special_tokens)["input_ids"])
    out = []
    for c in continuations:
        ids = list(tokenizer(prompt + c, add_special_tokens=add_special_tokens)["input_ids"])
        out.append(_forward_logprobs(model, ids, _common_prefix_len(p, ids)))
    return np.asarray(out, dtype=np.float64)


def classifier_reference(clf, text: str) -> np.ndarray:
    """Brute-force scores of a Classifier's labels for ``text``: (K,) float64, in ``clf.classes_`` order.

    Uses only what the classifier shows (``render_prompt``, ``surfaces_``, which labels are scored
    with the end token) and tokenizes ``render_prompt(text) + label (+ the end token's text)`` itself
    through :func:`reference_logprobs`; nothing of the engine is imported.

    Examples
    --------
    >>> from judge import Classifier
    >>> from judge.testing import tiny_pair
    >>> model, tok = tiny_pair()
    >>> clf = Classifier(["card_arrival", "exchange_rate"], model, tokenizer=tok, method="exact")
    >>> np.allclose(classifier_reference(clf, "Where is my card?"),
    ...             clf.decision_function(["Where is my card?"])[0], atol=1e-4)
    True
    """
    tok = clf.tokenizer_
    end_id = clf.engine_.end_id_
    end = tok.convert_ids_to_tokens(end_id)
    conts = [s + (end if seq[-1] == end_id else "") for s, seq in zip(clf.surfaces_, clf.scored_token_ids_)]
    return reference_logprobs(clf.model_, tok, clf.render_prompt(text), conts)
