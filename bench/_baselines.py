"""The baselines every learning curve is read beside, and the metrics of a curve's point.

* :func:`tfidf_lr` — TF-IDF (word 1-2 grams) + logistic regression, C by cross-validation on the
  training texts;
* :func:`embed_lr` — logistic regression on text embeddings (standardised), C by cross-validation:
  with the packaged all-MiniLM-L6-v2's embeddings, the "MiniLM + LR" baseline;
* :func:`setfit_peer` — SetFit itself (``setfit``, when installed: not a dependency) from the packaged
  all-MiniLM-L6-v2: its cosine-similarity pairs, then its logistic head;
* :func:`metrics` — accuracy (mean over draws) with a bootstrap interval, ECE beside its noise floor, NLL.

What it deliberately does not do: compute features (bench/_fit_cache.py) or choose anything.
"""

from __future__ import annotations

__all__ = ["tfidf_lr", "embed_lr", "setfit_peer", "metrics"]


def _cv(y, cv=5, seed=0):
    import numpy as np
    from sklearn.model_selection import KFold, StratifiedKFold

    counts = np.bincount(y)
    counts = counts[counts > 0]
    k = min(cv, len(y))
    if counts.min() >= 2:
        return StratifiedKFold(min(k, int(counts.min())), shuffle=True, random_state=seed)
    return KFold(k, shuffle=True, random_state=seed)


def tfidf_lr(train_texts, y, test_texts, K):
    """TF-IDF (1-2 grams) + logistic regression, C by cross-validation on the training texts: (n, K) proba."""
    from sklearn.feature_extraction.text import TfidfVectorizer
    from sklearn.linear_model import LogisticRegression
    from sklearn.model_selection import GridSearchCV
    from sklearn.pipeline import make_pipeline

    pipe = make_pipeline(TfidfVectorizer(ngram_range=(1, 2), sublinear_tf=True),
                         LogisticRegression(max_iter=2000))
    gs = GridSearchCV(pipe, {"logisticregression__C": [1.0, 10.0, 100.0, 1000.0]}, cv=_cv(y), scoring="accuracy",
                      error_score=0.0).fit(list(train_texts), y)
    return _full_proba(gs.predict_proba(list(test_texts)), gs.best_estimator_.classes_, K), gs.best_params_


def embed_lr(Xtr, y, Xte, K):
    """Logistic regression on mean-pooled embeddings (standardised), C by cross-validation: (n, K) proba."""
    from sklearn.linear_model import LogisticRegression
    from sklearn.model_selection import GridSearchCV
    from sklearn.pipeline import make_pipeline
    from sklearn.preprocessing import StandardScaler

    pipe = make_pipeline(StandardScaler(), LogisticRegression(max_iter=2000))
    gs = GridSearchCV(pipe, {"logisticregression__C": [0.001, 0.01, 0.1, 1.0]}, cv=_cv(y), scoring="accuracy",
                      error_score=0.0).fit(Xtr, y)
    return _full_proba(gs.predict_proba(Xte), gs.best_estimator_.classes_, K), gs.best_params_


def setfit_peer(train_texts, y, test_texts, K, *, iterations=20, seed=0):
    """SetFit (its trainer, pairs and head) from the packaged MiniLM: (n, K) proba of ``test_texts``.

    Raises ``ModuleNotFoundError`` when ``setfit`` (or its ``datasets``) is not importable.
    """
    import tempfile

    import numpy as np
    from datasets import Dataset
    from setfit import SetFitModel, Trainer, TrainingArguments

    from judge.encoders import embedder_folder

    model = SetFitModel.from_pretrained(str(embedder_folder()))
    with tempfile.TemporaryDirectory() as out:  # the trainer's checkpoints: not in the work tree
        args = TrainingArguments(output_dir=out, batch_size=16, num_iterations=iterations, num_epochs=1, seed=seed,
                                 report_to="none", show_progress_bar=False)
        Trainer(model=model, args=args,
                train_dataset=Dataset.from_dict({"text": list(train_texts), "label": [int(v) for v in y]})).train()
    p = np.asarray(model.predict_proba(list(test_texts)), np.float64)
    return _full_proba(p, np.unique(np.asarray(y)), K)


def _full_proba(p, classes, K):
    import numpy as np

    out = np.zeros((len(p), K))
    out[:, classes] = p
    return out


# ----------------------------------------------------------------------------- metrics

def metrics(y, probas, seconds_fit=None, seconds_per_text=None):
    """Accuracy (mean over draws) with a bootstrap interval over test texts, ECE / floor of the first draw."""
    import numpy as np

    from judge.calibration import (
        ece_noise_floor,
        expected_calibration_error,
        negative_log_likelihood,
    )

    correct = np.mean([p.argmax(1) == y for p in probas], axis=0)
    rng = np.random.default_rng(0)
    boots = [correct[rng.integers(0, len(y), len(y))].mean() for _ in range(1000)]
    p0 = probas[0]
    floor = ece_noise_floor(p0)[0]
    ece = expected_calibration_error(y, p0)
    return {"accuracy": float(correct.mean()), "accuracy_ci": [float(np.quantile(boots, 0.025)),
                                                                 float(np.quantile(boots, 0.975))],
            "draws": len(probas), "accuracy_per_draw": [float((p.argmax(1) == y).mean()) for p in probas],
            "ece": float(ece), "ece_floor": float(floor), "ece_over_floor": float(ece / floor),
            "nll": float(negative_log_likelihood(y, p0)), "fit_seconds": seconds_fit,
            "predict_texts_per_s": None if not seconds_per_text else float(1.0 / seconds_per_text),
            "n_test": int(len(y)), "accuracy_interval_note": "bootstrap over test texts of the per-text mean "
                                                             "correctness over draws"}


# ----------------------------------------------------------------------------- the curve
