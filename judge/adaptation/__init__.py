"""From zero-shot to tuned: what ``Classifier.fit`` learns from labelled texts.

In the order data flows:

* :mod:`~judge.adaptation.features` — features of the frozen model: the hidden state at the answer
  slot (:func:`answer_states`), mean-pooled text embeddings (:func:`text_embeddings`, the baseline's).
* :mod:`~judge.adaptation.head` — :class:`LinearHead`: multinomial logistic regression on feature
  blocks (the answer-slot states, a sentence embedding) with the exact zero-shot scores and the
  embedder's label similarity as offsets (0 examples = zero-shot), L2 and the set of blocks by
  cross-validation (:func:`fit_head`, :func:`choose_features`).
* :mod:`~judge.adaptation.tuning` — :func:`tune_embedder`: the sentence embedder tuned
  contrastively on the labelled texts, one more candidate of the head (``fit(..., tune_embedder=...)``),
  chosen per fold by :mod:`~judge.adaptation.choosing`.
* :mod:`~judge.adaptation.selftrain` — :func:`self_train`: unlabelled texts put to work
  (``fit(..., unlabelled=...)``): the head's confident answers on them, class-balanced, join its
  training set.
* :mod:`~judge.adaptation.lora` — :class:`LoraAdapter`: LoRA adapters (``peft``, the ``adapt``
  extra) trained on the exact label log-likelihood the engine scores, normalised over the K labels
  (``Engine.logprob_tensors``), early-stopped on held-out texts; scored by the engine on the merged
  model, so exactness holds.
* :mod:`~judge.adaptation.demos` — :class:`Demonstrations`: the k nearest training texts,
  answered, written into each prompt.
* :mod:`~judge.adaptation.fit` — :func:`fit_adaptation`: validation first, then features and fit.

Each fitted state has ``kind``, ``decision_function(clf, texts, base_scores)``, ``config()`` and
``arrays()`` (saved by :mod:`judge.persistence`); :func:`from_saved` rebuilds one.

What it deliberately does not do: calibrate (``Classifier.calibrate`` does, afterwards, on texts
the fit never saw) or score labels itself (the engine does).

Examples
--------
>>> from judge import Classifier
>>> from judge.testing import tiny_pair
>>> model, tok = tiny_pair()
>>> clf = Classifier(["yes", "no"], model, tokenizer=tok)
>>> answer_states(clf, ["Is it?"]).shape
(1, 64)
"""

from judge.adaptation.choosing import choose_features, fit_head_tuned
from judge.adaptation.demos import Demonstrations, fit_demos
from judge.adaptation.features import (
    answer_states,
    states_of_prompts,
    text_embeddings,
    text_features,
)
from judge.adaptation.fit import (
    METHODS,
    OPTIONS,
    auto_candidates,
    check_fit_args,
    fit_adaptation,
    fit_head_choosing,
    per_class_indices,
)
from judge.adaptation.head import (
    L2_GRID,
    LinearHead,
    check_features,
    choose_l2,
    cv_folds,
    fit_head,
)
from judge.adaptation.lora import LoraAdapter, train_lora
from judge.adaptation.saved import from_saved
from judge.adaptation.selftrain import SELF_TRAIN_DEFAULTS, pseudo_labels, self_train
from judge.adaptation.tuning import TUNE_DEFAULTS, TunedEncoder, tune_embedder

__all__ = ["L2_GRID", "METHODS", "OPTIONS", "SELF_TRAIN_DEFAULTS", "TUNE_DEFAULTS", "Demonstrations", "LinearHead",
           "LoraAdapter", "TunedEncoder", "answer_states", "auto_candidates", "check_features", "check_fit_args",
           "choose_features", "choose_l2", "cv_folds", "fit_adaptation", "fit_demos", "fit_head",
           "fit_head_choosing", "fit_head_tuned", "from_saved", "per_class_indices", "pseudo_labels", "self_train",
           "states_of_prompts", "text_embeddings", "text_features", "train_lora", "tune_embedder"]
