"""Demonstrations: the k training texts nearest to a text, answered, written into its prompt.

Nearest by cosine similarity of the answer-slot states (:func:`judge.adaptation.answer_states`,
one cheap pass). The demonstrations go into the text's own slot, in the prompt's own wording: for
the default completion prompt a text is preceded by ::

    <demo 1>\\nLabel: <its label>\\n\\nText: <demo 2>\\nLabel: <its label>\\n\\nText: <the text>

(the most similar last), then scored exactly like any text (the one scoring stack). The cost:
the instructions' cached prefix no longer covers the demonstrations, so every text feeds k more
texts' tokens, and the hidden-state pass comes on top; ``bench/learning_curve.py demos``
measures both and the accuracy on a 135M model.

What it deliberately does not do: chat prompts (the answer cue there holds control tokens, which
a text slot never carries), or choose k (the caller does, on validation).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

__all__ = ["Demonstrations", "fit_demos", "demo_texts"]


def _unit(x):
    x = np.asarray(x, np.float64)
    return x / np.maximum(np.linalg.norm(x, axis=1, keepdims=True), 1e-12)


def _cue(clf):
    """(cue before a text, answer cue after it, label surfaces) of a completion prompt; error for chat."""
    c = clf.compiled_
    tok = c.engine.tokenizer_
    specials = [s for s in getattr(tok, "all_special_tokens", []) if s and s in c.tail]
    if specials or c.method not in ("exact", "first_token"):
        raise ValueError(
            f"fit(method='demos') writes answered examples into the text slot, which needs a completion prompt "
            f"on the exact or first_token path; this classifier's prompt has control tokens {specials[:3]} after "
            f"the text or runs the {c.method!r} path. Use the default prompt, or fit(method='head').")
    return c.prefix.rsplit("\n", 1)[-1], c.tail, list(c.surfaces)


def demo_texts(clf, texts, demos, neighbours) -> list[str]:
    """Each text with its demonstrations before it, as one text slot: list of n str.

    Parameters
    ----------
    clf : judge.Classifier
    texts : list of str, length n
    demos : Demonstrations
    neighbours : ndarray of int, shape (n, k)
        Indices into ``demos.texts``, least similar first.

    Examples
    --------
    >>> from judge import Classifier
    >>> from judge.testing import tiny_pair
    >>> model, tok = tiny_pair()
    >>> clf = Classifier(["yes", "no"], model, tokenizer=tok)
    >>> d = Demonstrations(("sure",), np.array([0]), np.ones((1, 2)), 1)
    >>> print(demo_texts(clf, ["ok?"], d, np.array([[0]]))[0])
    sure
    Label: yes
    <BLANKLINE>
    Text: ok?
    """
    cue, tail, surfaces = _cue(clf)
    out = []
    for t, row in zip(texts, neighbours):
        parts = [demos.texts[j] + tail + surfaces[int(demos.y[j])] + "\n\n" + cue for j in row]
        out.append("".join(parts) + t)
    return out


@dataclass(frozen=True, eq=False)
class Demonstrations:
    """Labelled texts to show as examples, and their unit-norm answer-slot states.

    Parameters
    ----------
    texts : tuple of str, length m
    y : ndarray of int64, shape (m,)
    states : ndarray of float64, shape (m, d)
    k : int
    report : dict

    Examples
    --------
    >>> Demonstrations(("a", "b"), np.array([0, 1]), np.eye(2), 1).k
    1
    """

    texts: tuple
    y: np.ndarray
    states: np.ndarray
    k: int
    report: dict = field(default_factory=dict)
    kind = "demos"

    def __post_init__(self):
        object.__setattr__(self, "states", _unit(self.states))
        y, s = np.asarray(self.y), self.states
        if s.ndim != 2 or s.shape[0] != len(self.texts) or y.shape != (len(self.texts),):
            raise ValueError(f"demonstrations do not fit: {len(self.texts)} texts, y of shape {y.shape}, states "
                             f"of shape {s.shape}.")
        if not isinstance(self.k, int) or self.k < 1:
            raise ValueError(f"demonstrations k must be an int >= 1, got {self.k!r}.")

    def __repr__(self):
        return f"Demonstrations(m={len(self.texts)}, d={self.states.shape[1]}, k={self.k})"

    def neighbours(self, states) -> np.ndarray:
        """Indices of the ``k`` nearest demonstrations per row, least similar first: (n, min(k, m)) int."""
        sim = _unit(states) @ self.states.T
        k = min(self.k, len(self.texts))
        top = np.argsort(-sim, axis=1, kind="stable")[:, :k]
        return top[:, ::-1]

    def decision_function(self, clf, texts, base_scores) -> np.ndarray:
        """Zero-shot scores of each text with its demonstrations in the prompt: (n, K)."""
        from judge.adaptation.features import answer_states

        if not texts:
            return base_scores(texts)
        return base_scores(demo_texts(clf, texts, self, self.neighbours(answer_states(clf, texts))))

    def arrays(self) -> dict:
        return {"y": np.asarray(self.y, np.int64), "states": self.states}

    def config(self) -> dict:
        return {"kind": self.kind, "k": self.k, "texts": list(self.texts), "report": self.report}


def fit_demos(clf, texts, y, *, k=4, states=None) -> Demonstrations:
    """Keep the labelled texts (and their states) as demonstrations; nothing is trained.

    Examples
    --------
    >>> from judge import Classifier
    >>> from judge.testing import tiny_pair
    >>> model, tok = tiny_pair()
    >>> clf = Classifier(["yes", "no"], model, tokenizer=tok)
    >>> fit_demos(clf, ["sure", "nope"], np.array([0, 1]), k=1).states.shape
    (2, 64)
    """
    from judge.adaptation.features import answer_states
    from judge.adaptation.head import check_features

    _cue(clf)  # a clear error before any pass for prompts demonstrations cannot go into
    if states is None:
        states = answer_states(clf, texts)
    states = check_features("states", states, len(texts))
    return Demonstrations(tuple(texts), np.asarray(y, np.int64), states, int(k), {"n": len(texts)})
