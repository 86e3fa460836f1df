"""The arithmetic of multi-label answers, apart from any model: targets, per-label scaling and thresholds, a head.

* :func:`as_indicator`: label lists or an indicator matrix, as an (n, K) 0/1 matrix;
* :func:`calibrate_multilabel`: a Platt scaling per label shrunk toward the pooled one (one scikit-learn
  logistic regression) and a threshold per label (:func:`per_label_thresholds`);
* :func:`fit_multilabel`: one-vs-rest logistic regression, C by cross-validated micro-F1;
* :class:`MultiLabelState`, :class:`MultiLabelHead`, :class:`MultiLabelFit`: what is fitted and saved;
* :func:`multilabel_f1`: micro-/macro-F1, subset accuracy, the share of empty answers.

What it deliberately does not do: read a model (:mod:`judge.multilabel` does).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

__all__ = ["MultiLabelFit", "MultiLabelHead", "MultiLabelState", "as_indicator", "calibrate_multilabel",
           "fit_multilabel", "multilabel_f1", "per_label_thresholds", "sigmoid"]

def sigmoid(z):
    """The logistic function, float64: ``1 / (1 + exp(-z))`` computed as ``(1 + tanh(z / 2)) / 2``.

    Examples
    --------
    >>> float(sigmoid(0.0))
    0.5
    """
    return 0.5 * (1.0 + np.tanh(0.5 * np.asarray(z, dtype=np.float64)))


def as_indicator(y, classes) -> np.ndarray:
    """Multi-label targets as an indicator matrix (n, K) of 0/1 in ``classes`` order.

    Parameters
    ----------
    y : sequence of n label lists, or array-like (n, K) of 0/1 (as ``MultiLabelBinarizer`` makes)
    classes : sequence of K labels

    Examples
    --------
    >>> as_indicator([["a"], ["a", "b"], []], ["a", "b"]).tolist()
    [[1, 0], [1, 1], [0, 0]]
    >>> as_indicator([["c"]], ["a", "b"])
    Traceback (most recent call last):
    ...
    ValueError: y[0] has a label that is not one of the classifier's labels: 'c'; its labels are ['a', 'b'].
    """
    classes = list(classes)
    K = len(classes)
    if len(getattr(y, "shape", ())) == 2:  # an ndarray, a scipy sparse matrix, a DataFrame
        Y = np.asarray(y.toarray() if hasattr(y, "toarray") else y)
        if Y.shape[1] != K:
            raise ValueError(f"An indicator matrix y must have one column per label ({K}), got shape {Y.shape}; "
                             f"its columns are the classifier's labels in classes_ order.")
        if not np.isin(Y, (0, 1)).all():
            raise ValueError("An indicator matrix y must hold only 0 and 1 (or False/True).")
        return Y.astype(np.int64)
    if isinstance(y, (str, bytes)):
        raise TypeError(f"Multi-label y must be a list of label lists (one per text) or an (n, K) 0/1 matrix, got "
                        f"a string {y!r:.40}.")
    index = {c: j for j, c in enumerate(classes)}
    rows = list(y)
    Y = np.zeros((len(rows), K), dtype=np.int64)
    for i, labels in enumerate(rows):
        if isinstance(labels, (str, bytes)) or not hasattr(labels, "__iter__"):
            raise TypeError(f"y[{i}] must be a list of labels (multi_label=True), got {type(labels).__name__} "
                            f"{labels!r:.40}; wrap one label as [label], none as [].")
        for lab in labels:
            j = index.get(lab)
            if j is None:
                raise ValueError(f"y[{i}] has a label that is not one of the classifier's labels: {lab!r}; "
                                 f"its labels are {classes[:10]}{' ...' if K > 10 else ''}.")
            Y[i, j] = 1
    return Y


def multilabel_f1(Y, P) -> dict:
    """Micro-F1, macro-F1, subset accuracy and the share of rows with no label: the multi-label report.

    Parameters
    ----------
    Y, P : array-like (n, K) of 0/1
        Gold and predicted indicator matrices.

    Examples
    --------
    >>> r = multilabel_f1([[1, 0], [1, 1]], [[1, 0], [1, 0]])
    >>> round(r["micro_f1"], 3), r["subset_accuracy"], r["empty_share"]
    (0.8, 0.5, 0.0)
    """
    from sklearn.metrics import accuracy_score, f1_score

    Y, P = np.asarray(Y), np.asarray(P)
    return {"micro_f1": float(f1_score(Y, P, average="micro", zero_division=0)),
            "macro_f1": float(f1_score(Y, P, average="macro", zero_division=0)),
            "subset_accuracy": float(accuracy_score(Y, P)),
            "empty_share": float((P.sum(axis=1) == 0).mean())}


@dataclass(frozen=True)
class MultiLabelState:
    """What ``calibrate`` (and ``fit``) fitted for a multi-label classifier: per-label Platt scaling and thresholds.

    Attributes
    ----------
    a, b : ndarray (K,)
        Each label's probability is ``sigmoid(a * logit + b)``.
    threshold : ndarray (K,)
        A label is given where its probability is at least its threshold.

    Examples
    --------
    >>> s = MultiLabelState(np.ones(2), np.zeros(2), np.array([0.5, 0.9]))
    >>> s.proba(np.array([[0.0, 3.0]])).round(3).tolist(), s.predict(np.array([[0.0, 3.0]])).tolist()
    ([[0.5, 0.953]], [[1, 1]])
    """

    a: np.ndarray
    b: np.ndarray
    threshold: np.ndarray

    def proba(self, logits) -> np.ndarray:
        """Calibrated probabilities (n, K) of raw logits (n, K)."""
        return sigmoid(self.a * np.asarray(logits) + self.b)

    def predict(self, logits) -> np.ndarray:
        """The indicator matrix (n, K) of the labels given."""
        return (self.proba(logits) >= self.threshold).astype(np.int64)

    def to_arrays(self) -> dict:
        """Its arrays by name (what persistence writes)."""
        return {"a": self.a, "b": self.b, "threshold": self.threshold}


def _platt(z, Y, *, C=1.0):
    """Per-label Platt scaling shrunk toward the pooled one: one logistic regression on
    [z, one-hot label, z * one-hot label], whose L2 penalty pulls the per-label parts to 0."""
    from scipy import sparse
    from sklearn.linear_model import LogisticRegression

    n, K = z.shape
    rows = np.arange(n * K)
    lab = np.tile(np.arange(K), n)
    zf = z.ravel()
    onehot = sparse.csr_matrix((np.ones(n * K), (rows, lab)), shape=(n * K, K))
    zhot = sparse.csr_matrix((zf, (rows, lab)), shape=(n * K, K))
    X = sparse.hstack([sparse.csr_matrix(zf[:, None]), onehot, zhot]).tocsr()
    lr = LogisticRegression(C=C, max_iter=5000).fit(X, Y.ravel())
    coef = lr.coef_[0]
    return coef[0] + coef[1 + K:], lr.intercept_[0] + coef[1:1 + K]


def per_label_thresholds(p, Y, *, target_precision=None, min_positives=3) -> np.ndarray:
    """A threshold per label (K,): best F1 (or the lowest reaching ``target_precision``) where the label has at least
    ``min_positives`` positives, else the pooled threshold that does so over every label.

    Parameters
    ----------
    p : ndarray (n, K)
        Probabilities.
    Y : ndarray (n, K) of 0/1
    target_precision : float in (0, 1), optional
    min_positives : int

    Examples
    --------
    >>> p = np.array([[0.9], [0.8], [0.3], [0.1]]); Y = np.array([[1], [1], [0], [0]])
    >>> per_label_thresholds(p, Y).round(2).tolist()
    [0.55]
    """

    def best(pk, yk):
        order = np.argsort(-pk, kind="stable")
        ps, ys = pk[order], yk[order]
        tp = np.cumsum(ys)
        k = np.arange(1, len(ps) + 1)
        prec, rec = tp / k, tp / max(ys.sum(), 1)
        # a cut is only valid between distinct probabilities
        valid = np.r_[ps[1:] < ps[:-1], True]
        if target_precision is not None:
            ok = np.flatnonzero(valid & (prec >= target_precision))
            if not len(ok):
                return 1.0 + 1e-12
            return float(ps[ok[-1]])
        f1 = np.where(valid, 2 * prec * rec / np.maximum(prec + rec, 1e-12), -1.0)
        j = int(np.argmax(f1))
        nxt = ps[j + 1] if j + 1 < len(ps) else 0.0
        return float((ps[j] + nxt) / 2)

    pooled = best(p.ravel(), Y.ravel())
    return np.array([best(p[:, k], Y[:, k]) if Y[:, k].sum() >= min_positives else pooled
                     for k in range(Y.shape[1])])


def calibrate_multilabel(logits, Y, *, target_precision=None, C=1.0) -> MultiLabelState:
    """Fit per-label Platt scaling (shrunk toward the pooled one) and per-label thresholds.

    Parameters
    ----------
    logits : ndarray (n, K)
        The raw logits of validation texts (:func:`zero_shot_logits`, or a fitted head's).
    Y : ndarray (n, K) of 0/1
    target_precision : float in (0, 1), optional
        Each threshold is the lowest whose precision on these texts reaches it (else best F1).
    C : float
        The inverse strength of the pull of the per-label scalings toward the pooled one.

    Examples
    --------
    >>> rng = np.random.default_rng(0)
    >>> Y = rng.integers(0, 2, (400, 2)); z = 4 * Y - 2 + rng.normal(size=(400, 2))
    >>> s = calibrate_multilabel(z, Y)
    >>> bool(((s.predict(z) == Y).mean()) > 0.9)
    True
    """
    z = np.asarray(logits, dtype=np.float64)
    Y = np.asarray(Y, dtype=np.int64)
    if z.shape != Y.shape:
        raise ValueError(f"logits and Y must have the same shape (n, K), got {z.shape} and {Y.shape}.")
    if Y.min() == Y.max():
        raise ValueError("calibrate(multi_label=True) needs both given and absent labels among the texts' targets; "
                         f"every target here is {int(Y.flat[0]) if Y.size else 'missing'}.")
    if target_precision is not None and not 0.0 < float(target_precision) < 1.0:
        raise ValueError(f"target_precision must be in (0, 1), got {target_precision!r}.")
    a, b = _platt(z, Y, C=C)
    p = sigmoid(a * z + b)
    return MultiLabelState(np.asarray(a, dtype=np.float64), np.asarray(b, dtype=np.float64),
                           per_label_thresholds(p, Y, target_precision=target_precision))


@dataclass(frozen=True)
class MultiLabelHead:
    """What ``fit(multi_label)`` learned: a logistic regression per label on [embedder vectors, zero-shot logits].

    ``coef`` (K, d + K) and ``intercept`` (K,); ``mean``/``scale`` standardise the inputs. Its logits
    replace the zero-shot ones.

    Examples
    --------
    >>> head = MultiLabelHead(np.eye(2), np.zeros(2), np.zeros(2), np.ones(2))
    >>> head.logits(np.array([[1.0, -1.0]])).tolist()
    [[1.0, -1.0]]
    """

    coef: np.ndarray
    intercept: np.ndarray
    mean: np.ndarray
    scale: np.ndarray
    kind: str = "multilabel_head"

    def logits(self, X) -> np.ndarray:
        """The fitted logits (n, K) of inputs (n, d + K)."""
        return ((np.asarray(X) - self.mean) / self.scale) @ self.coef.T + self.intercept

    def to_arrays(self) -> dict:
        """Its arrays by name (what persistence writes)."""
        return {"coef": self.coef, "intercept": self.intercept, "mean": self.mean, "scale": self.scale}


def fit_multilabel(X, Y, *, Cs=(0.01, 0.1, 1.0, 10.0), cv=3, random_state=0) -> MultiLabelHead:
    """One-vs-rest logistic regression (scikit-learn) on inputs X (n, d), C chosen by cross-validated micro-F1.

    Labels with no positive (or no negative) text get a constant logit (-8 or +8).

    Examples
    --------
    >>> rng = np.random.default_rng(0)
    >>> X = rng.normal(size=(60, 3)); Y = (X[:, :2] > 0).astype(int)
    >>> head = fit_multilabel(X, Y)
    >>> bool(((head.logits(X) > 0) == Y).mean() > 0.9)
    True
    """
    from sklearn.linear_model import LogisticRegression
    from sklearn.metrics import f1_score
    from sklearn.model_selection import KFold

    X = np.asarray(X, dtype=np.float64)
    Y = np.asarray(Y, dtype=np.int64)
    mean, scale = X.mean(axis=0), X.std(axis=0)
    scale = np.where(scale > 1e-12, scale, 1.0)
    Xs = (X - mean) / scale
    n, K = Y.shape
    live = [k for k in range(K) if 0 < Y[:, k].sum() < n]

    def train(Xt, Yt, C):
        coef, icpt = np.zeros((K, X.shape[1])), np.where(Yt.mean(axis=0) > 0.5, 8.0, -8.0)
        for k in live:
            if 0 < Yt[:, k].sum() < len(Yt):
                lr = LogisticRegression(C=C, max_iter=2000).fit(Xt, Yt[:, k])
                coef[k], icpt[k] = lr.coef_[0], lr.intercept_[0]
        return coef, icpt

    best_C, best = Cs[0], -1.0
    if len(Cs) > 1 and n >= 2 * cv:
        folds = list(KFold(cv, shuffle=True, random_state=random_state).split(Xs))
        for C in Cs:
            P = np.zeros_like(Y)
            for tr, te in folds:
                coef, icpt = train(Xs[tr], Y[tr], C)
                P[te] = (Xs[te] @ coef.T + icpt) > 0
            s = f1_score(Y, P, average="micro", zero_division=0)
            if s > best:
                best_C, best = C, s
    coef, icpt = train(Xs, Y, best_C)
    return MultiLabelHead(coef, icpt, mean, scale)


@dataclass(frozen=True)
class MultiLabelFit:
    """A multi-label classifier's fitted state (``Classifier.multilabel_``): a head from ``fit``, a calibration.

    Attributes
    ----------
    head : MultiLabelHead or None
        Its logits replace the zero-shot ones.
    state : MultiLabelState or None
        Per-label Platt scaling and thresholds from ``calibrate``.

    Examples
    --------
    >>> MultiLabelFit(None, None).config()
    {'head': False, 'state': False}
    """

    head: MultiLabelHead | None = None
    state: MultiLabelState | None = None

    def config(self) -> dict:
        """What persistence writes to JSON (the arrays go to safetensors)."""
        return {"head": self.head is not None, "state": self.state is not None}

    def arrays(self) -> dict:
        """Every array, by name (prefixed by its part)."""
        out = {}
        for part, obj in (("head", self.head), ("state", self.state)):
            if obj is not None:
                out.update({f"{part}.{k}": np.ascontiguousarray(v, np.float64) for k, v in obj.to_arrays().items()})
        return out

    @classmethod
    def from_saved(cls, config, arrays, n_labels) -> MultiLabelFit:
        """Rebuild from what :meth:`config` and :meth:`arrays` wrote, the shapes checked against ``n_labels``."""
        def part(name, kind, keys):
            if not config.get(name):
                return None
            missing = [k for k in keys if f"{name}.{k}" not in arrays]
            if missing:
                raise ValueError(f"the multi-label {name} lacks the arrays {missing}.")
            got = {k: np.asarray(arrays[f"{name}.{k}"], np.float64) for k in keys}
            for k, v in got.items():
                if k in ("a", "b", "threshold", "intercept") and v.shape != (n_labels,):
                    raise ValueError(f"the multi-label {name}.{k} has shape {v.shape}, not ({n_labels},).")
            return kind(**got)

        return cls(part("head", MultiLabelHead, ("coef", "intercept", "mean", "scale")),
                   part("state", MultiLabelState, ("a", "b", "threshold")))


