"""Features of the frozen model for a fitted head: the hidden state at the answer slot, and text embeddings.

* :func:`answer_states` — the last layer's hidden state (after the final norm: what the LM head
  reads) at the answer slot of each text's prompt, i.e. at the prompt's last token, where the
  label's first token is predicted. The prompts are the classifier's own token items
  (:func:`judge.label_paths.prompt_items`: tokenized whole, by the engine), so the head sees exactly
  the prompt the labels are scored after. The scorer's ``hidden_states``
  (:class:`judge.engine.protocol.HiddenStates`): one plain forward pass of the decoder per batch, no
  label tree: on SmolLM2-135M about a quarter of the cost of exact scoring over Banking77's 77
  labels. The instructions' keys/values (the compiled ``root_ids``) are computed once per model
  and reused, as the engine does for scoring.
* :func:`text_embeddings` — the mean of the last layer over the tokens of the text alone (no
  prompt): the SetFit-style embedding the baselines' logistic regression uses.

Both go through the scorer's ``hidden_states``, which runs the engine's one forward loop over the
decoder (:func:`judge.engine.states.states_of_prompts`; :mod:`judge.encoders` holds the other text
encoders: TF-IDF, a sentence embedder).

What it deliberately does not do: score labels (the engine does) or tokenize (the engine's
``encode`` and ``prompt_items`` do).
"""

from __future__ import annotations

import numpy as np

from judge.engine.states import states_of_prompts

__all__ = ["answer_states", "text_embeddings", "text_features", "states_of_prompts"]


def answer_states(clf, texts, *, batch_size: int | None = None) -> np.ndarray:
    """Hidden state at the answer slot of each text's prompt: (n, d) float64.

    The prompt is the classifier's (``clf.compiled_``), tokenized whole by its engine; the state
    is the one the label's first token is predicted from. It is the state of the classifier's
    one prompt as written: no think-then-answer reasoning before the answer cue and no rotated
    label lists, so ``Classifier.fit`` refuses classifiers with ``think=True`` or effective
    ``rotations`` (their scores would come from other prompts than these states).

    Parameters
    ----------
    clf : judge.Classifier
    texts : sequence of str, length n
    batch_size : int, optional
        Texts per forward pass; None: the classifier's own setting (``clf.batch_size``, or 1 when
        ``clf.batch_invariant``: then each state is computed alone and does not depend on which
        texts share its batch).

    Returns
    -------
    ndarray of float64, shape (n, d)

    Examples
    --------
    >>> from judge import Classifier
    >>> from judge.testing import tiny_pair
    >>> model, tok = tiny_pair()
    >>> answer_states(Classifier(["yes", "no"], model, tokenizer=tok), ["Is it?", "Sure."]).shape
    (2, 64)
    """
    from judge._checks import check_texts
    from judge.label_paths import local_model, prompt_items, states_scorer

    texts = check_texts(texts)
    if batch_size is None:
        batch_size = 1 if clf.batch_invariant else clf.batch_size
    c = clf.compiled_
    scorer = states_scorer(c.engine, "The answer-slot hidden states")
    if not texts:
        model = local_model(c.engine, "The answer-slot hidden states").model_
        return np.zeros((0, int(model.config.get_text_config().hidden_size)))
    return scorer.hidden_states(prompt_items(c, texts), root=c.root_ids, batch_size=batch_size)


def text_embeddings(clf, texts, *, batch_size: int = 32) -> np.ndarray:
    """Mean of the last layer over each text's own tokens, without any prompt: (n, d) float64.

    The embedding a SetFit-style logistic-regression baseline uses (no contrastive tuning).
    Texts are tokenized by the classifier's engine (as user text); the states come from its
    ``hidden_states`` with ``pooling="mean"``.

    Examples
    --------
    >>> from judge import Classifier
    >>> from judge.testing import tiny_pair
    >>> model, tok = tiny_pair()
    >>> text_embeddings(Classifier(["yes", "no"], model, tokenizer=tok), ["Is it?"]).shape
    (1, 64)
    """
    from judge._checks import check_texts
    from judge.engine.protocol import Item
    from judge.label_paths import local_model, states_scorer

    texts = check_texts(texts)
    eng = local_model(clf.compiled_.engine, "Text embeddings from the model's states")
    if not texts:
        return np.zeros((0, int(eng.model_.config.get_text_config().hidden_size)))
    seqs = [eng.encode([(t, True)]) or [eng.end_id_] for t in texts]
    return states_scorer(eng, "Text embeddings from the model's states").hidden_states(
        [Item(s, []) for s in seqs], batch_size=batch_size, pooling="mean")


def text_features(clf, texts, blocks, *, embedder=None) -> dict:
    """The feature blocks a head reads, per name: ``hidden`` (answer-slot states), ``embed`` (sentence embedding).

    Parameters
    ----------
    clf : judge.Classifier
    texts : sequence of str, length n
    blocks : sequence of str
        Names from ``judge.adaptation.head.BLOCKS``.
    embedder : str, dict or encoder, optional
        The sentence encoder of the ``embed`` block (:func:`judge.encoders.get_encoder`).

    Returns
    -------
    dict of str -> ndarray of float64, shape (n, d_block)

    Examples
    --------
    >>> from judge import Classifier
    >>> from judge.testing import tiny_pair
    >>> model, tok = tiny_pair()
    >>> f = text_features(Classifier(["yes", "no"], model, tokenizer=tok), ["Is it?"], ["hidden", "embed"],
    ...                   embedder="minilm")
    >>> f["hidden"].shape, f["embed"].shape
    ((1, 64), (1, 384))
    """
    out = {}
    for b in blocks:
        if b == "hidden":
            out[b] = answer_states(clf, texts)
        elif b == "embed":
            from judge.encoders import get_encoder

            if embedder is None:
                raise ValueError("the embed block needs a sentence encoder; pass embedder= (e.g. 'minilm').")
            out[b] = np.asarray(get_encoder(embedder)(list(texts)), np.float64)
        else:
            raise ValueError(f"Unknown feature block {b!r}; valid blocks are ('hidden', 'embed').")
    return out
