"""What a compiled classifier shows: its prompt, label surfaces, token ids, automaton and fingerprint.

A mixin of `judge.Classifier` (as its calibrated half, :mod:`judge.calibrated`): read-only
views of the compiled label set (``compiled_``, :class:`judge.compiled.CompiledLabels`), for
inspecting what the model is asked and what it is scored on, and the fingerprint that keys cached
scores.

What it deliberately does not do: compile or score (the classifier and :mod:`judge.compiled` do).
"""

from __future__ import annotations

import os

from judge._checks import check_texts
from judge.labels import label_indices

__all__ = ["InspectionMixin"]


class InspectionMixin:
    """Read-only views of `judge.Classifier`'s compiled label set (it needs ``compiled_`` and ``labels``).

    Examples
    --------
    >>> from judge import Classifier
    >>> issubclass(Classifier, InspectionMixin)
    True
    """

    @property
    def model_(self):
        """The loaded model (after first use or :meth:`setup`): a transformers ``PreTrainedModel``."""
        return self.compiled_.engine.model_

    @property
    def tokenizer_(self):
        """The loaded tokenizer (after first use or :meth:`setup`)."""
        return self.compiled_.engine.tokenizer_

    @property
    def method_(self) -> str:
        """The scoring path in use: ``"first_token"``, ``"exact"``, ``"search"`` or ``"decode"``."""
        return self.compiled_.method

    def __repr__(self):
        m = self.model
        m = repr(os.fspath(m)) if isinstance(m, (str, os.PathLike)) else \
            "'smollm2-135m-instruct'" if m is None else f"<{type(m).__name__}>"
        state = "".join([", calibrated" if self.calibration_ is not None else "",
                         f", fitted={self.adaptation_.kind!r}" if self.adaptation_ is not None else "",
                         ", multi_label" if getattr(self, "multi_label", False) else ""])
        return f"{type(self).__name__}(K={len(self.labels)}, model={m}, method={self.method!r}{state})"

    @property
    def automaton_(self):
        """The label :class:`~judge.automaton.trie.TrieAutomaton` (built on first use)."""
        return self.compiled_.label_automaton()

    @property
    def prompt_prefix_(self) -> str:
        """The prompt text before the text (instructions, label list): its keys/values are cached once."""
        return self.compiled_.prefix

    @property
    def surfaces_(self) -> list[str]:
        """What the model writes for each label right after the prompt (names with the answer's lead)."""
        return list(self.compiled_.surfaces)

    @property
    def scored_token_ids_(self) -> list[list[int]] | None:
        """The token sequences scored per label (end token appended where the policy says); None on decode."""
        c = self.compiled_
        return None if c.label_seqs is None else [list(x) for x in c.label_seqs]

    @property
    def label_token_ids(self) -> list[list[int]]:
        """Canonical token ids of each label as written after the prompt: list of K lists."""
        c = self.compiled_
        return c.engine.option_ids(c.tail, c.surfaces, end_token=False)

    def fingerprint(self) -> str:
        """A digest of everything that changes a score: labels as shown, prompt, path, options, model weights.

        Used to key cached scores (``judge evaluate`` resumes only when it matches).

        Examples
        --------
        >>> from judge import Classifier
        >>> from judge.testing import tiny_pair
        >>> model, tok = tiny_pair()
        >>> len(Classifier(["yes", "no"], model, tokenizer=tok).fingerprint())
        64
        """
        from judge.persistence import fingerprint

        return fingerprint(self)

    def render_prompt(self, text: str) -> str:
        """The exact prompt text up to where the answer starts.

        Examples
        --------
        >>> from judge import Classifier
        >>> from judge.testing import tiny_pair
        >>> model, tok = tiny_pair()
        >>> print(Classifier(["yes", "no"], model, tokenizer=tok).render_prompt("Is it?"))
        Classify the text into exactly one of these labels.
        <BLANKLINE>
        Labels:
        (2 labels; not listed)
        <BLANKLINE>
        Text: Is it?
        Label:
        """
        c = self.compiled_
        return "".join(t for t, _ in c.pieces(check_texts([text])[0]))

    def prompt_ids(self, text: str) -> list[int]:
        """Token ids of the prompt for ``text`` (tokenized whole, truncated as scoring would)."""
        from judge.label_paths import prompt_items

        return list(prompt_items(self.compiled_, check_texts([text]))[0].ids)

    def shortlist_recall(self, texts, y) -> float:
        """How often the gold label survives the retrieval shortlist (``shortlist=M``): a fraction in [0, 1].

        Measure it on validation data: a label outside the shortlist can never be predicted.

        Parameters
        ----------
        texts : sequence of str, length n
        y : sequence of labels, length n

        Examples
        --------
        >>> from judge.testing import tiny_pair
        >>> from judge import Classifier
        >>> model, tok = tiny_pair()
        >>> clf = Classifier(["card arrival", "exchange rate", "pin blocked"], model, tokenizer=tok,
        ...                  shortlist=1, shortlist_encoder="tfidf")
        >>> clf.shortlist_recall(["my card arrival is late", "what exchange rate"], ["card arrival", "exchange rate"])
        1.0
        """
        if self.shortlist is None:
            raise ValueError("shortlist_recall needs a shortlist: build the Classifier with shortlist=M.")
        texts = check_texts(texts)
        return self.compiled_.shortlist().recall(texts, label_indices(self.labels, y))
