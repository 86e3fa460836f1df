"""A multinomial logistic head on the frozen model, starting from the zero-shot scores.

The head's logits for a text are ::

    a * s + b + W z        z = (h - mean) / scale

where ``s`` (K,) are the exact zero-shot label log-probabilities (an *offset*: the starting
point), ``h`` (d,) the hidden state at the answer slot (:func:`judge.adaptation.answer_states`),
and ``a`` (a scalar, an inverse temperature on the offset), ``b`` (K,) and ``W`` (K, d) are
fitted. It starts at ``a = 1, b = 0, W = 0``: exactly the zero-shot distribution. The loss is the
summed negative log-likelihood plus ``l2 / 2 * (|W|^2 + |b|^2)`` (``a`` is not penalised), so
the more examples, the further the head may move from zero-shot; ``l2`` is chosen by
cross-validated NLL on the training data only (:func:`choose_l2`).

The fit is L-BFGS in torch (``torch.optim.LBFGS``, float64, strong-Wolfe line search) on that
loss, not scikit-learn's ``LogisticRegression``: scikit-learn's takes no offset (a fixed
per-sample, per-class margin added to the logits, ``init_score`` in the boosting libraries),
and the offset is what makes zero examples equal zero-shot (nor is ``a * s``, one unpenalised
weight on a per-class input, a coefficient its multinomial model has). scikit-learn still makes
the cross-validation folds.
With ``scores=None`` (``features="hidden"``) the same code fits a plain multinomial logistic
regression on the states (no offset; zero examples would be uniform).

What it deliberately does not do: compute features (:mod:`judge.adaptation.features` does) or
calibrate (``Classifier.calibrate`` does, after ``fit``, on data the fit never saw).
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field

import numpy as np

__all__ = ["LinearHead", "fit_head", "choose_l2", "L2_GRID", "check_features"]

#: The L2 strengths cross-validation chooses from (summed-loss form: per example, l2 / n).
L2_GRID = (0.1, 1.0, 10.0, 100.0, 1000.0)
_CV_ITER = 60  # L-BFGS iterations per fold fit (warm-started along the grid): enough to rank strengths


def check_features(name, x, n, width=None) -> np.ndarray:
    """``x`` as float64 (n, width), with a clear error for another shape or NaN / infinite values.

    Examples
    --------
    >>> check_features("states", [[0.0, 1.0]], 1).shape
    (1, 2)
    >>> check_features("states", [[np.nan, 1.0]], 1)
    Traceback (most recent call last):
    ...
    ValueError: states holds 1 NaN or infinite value(s), first in row 0; every feature must be finite (drop or re-score those texts).
    """
    x = np.asarray(x, np.float64)
    if x.ndim != 2 or x.shape[0] != n or (width is not None and x.shape[1] != width):
        want = f"({n}, {width})" if width is not None else f"({n}, d)"
        raise ValueError(f"{name} has shape {x.shape}, expected {want}: one row per text.")
    bad = ~np.isfinite(x)
    if bad.any():
        row = int(np.flatnonzero(bad.any(axis=1))[0])
        raise ValueError(f"{name} holds {int(bad.sum())} NaN or infinite value(s), first in row {row}; every "
                         f"feature must be finite (drop or re-score those texts).")
    return x


def _log_softmax(z):
    m = z.max(axis=1, keepdims=True)
    e = z - np.where(np.isfinite(m), m, 0.0)
    return e - np.log(np.exp(e).sum(axis=1, keepdims=True))


@dataclass(frozen=True, eq=False)
class LinearHead:
    """A fitted head: ``log_softmax(a * scores + bias + ((states - mean) / scale) @ weights.T)``.

    Parameters
    ----------
    weights : ndarray of float64, shape (K, d)
    bias : ndarray of float64, shape (K,)
    offset_scale : float or None
        ``a``; None when the head does not use the zero-shot scores (``features="hidden"``).
    mean, scale : ndarray of float64, shape (d,)
        Standardisation of the states (from the training texts).
    l2 : float
    report : dict
        ``n``, ``l2``, the cross-validation table, seconds.

    Examples
    --------
    >>> head = LinearHead(np.zeros((2, 3)), np.zeros(2), 1.0, np.zeros(3), np.ones(3), 1.0)
    >>> s = np.log([[0.75, 0.25]])
    >>> np.exp(head.log_proba(s, np.ones((1, 3)))).round(2).tolist()    # at its start: zero-shot
    [[0.75, 0.25]]
    """

    weights: np.ndarray
    bias: np.ndarray
    offset_scale: float | None
    mean: np.ndarray
    scale: np.ndarray
    l2: float
    report: dict = field(default_factory=dict)
    kind = "head"

    def __post_init__(self):
        self.validate()

    @property
    def uses_scores(self) -> bool:
        """True when the head starts from the zero-shot scores (they are then computed at predict)."""
        return self.offset_scale is not None

    def validate(self) -> None:
        """Raise ValueError naming the field when shapes disagree or a value is not finite."""
        W, b = np.asarray(self.weights), np.asarray(self.bias)
        if W.ndim != 2 or b.shape != (W.shape[0],):
            raise ValueError(f"head weights have shape {W.shape} and bias {b.shape}; expected (K, d) and (K,).")
        for name in ("mean", "scale"):
            v = np.asarray(getattr(self, name))
            if v.shape != (W.shape[1],):
                raise ValueError(f"head {name} has shape {v.shape}, expected ({W.shape[1]},).")
        if not all(np.all(np.isfinite(np.asarray(getattr(self, k)))) for k in ("weights", "bias", "mean", "scale")):
            raise ValueError("head arrays hold NaN or infinite values; fit again.")
        if np.any(np.asarray(self.scale) <= 0):
            raise ValueError("head scale must be > 0 everywhere; fit again.")
        a = self.offset_scale
        if a is not None and not (isinstance(a, (int, float)) and np.isfinite(a) and a >= 0):
            raise ValueError(f"head offset_scale must be a finite number >= 0 or None, got {a!r}.")

    def log_proba(self, scores, states) -> np.ndarray:
        """Log-probabilities of the K labels: (n, K) float64, rows log-normalised.

        Parameters
        ----------
        scores : ndarray of shape (n, K), or None when ``uses_scores`` is False
        states : ndarray of shape (n, d)
        """
        z = (np.asarray(states, np.float64) - self.mean) / self.scale
        logits = z @ self.weights.T + self.bias
        if self.uses_scores and self.offset_scale > 0:  # -inf (a label a search left out) stays impossible
            logits = logits + self.offset_scale * _centred(np.asarray(scores, np.float64))
        return _log_softmax(logits)

    def decision_function(self, clf, texts, base_scores) -> np.ndarray:
        """What ``Classifier.decision_function`` returns once this head is fitted: (n, K) log-probabilities.

        ``base_scores(texts)`` gives the zero-shot scores (called only when the head uses them).
        """
        from judge.adaptation.features import answer_states

        s = base_scores(texts) if self.uses_scores else None
        return self.log_proba(s, answer_states(clf, texts))

    def arrays(self) -> dict:
        """The arrays to save (safetensors): weights, bias, mean, scale."""
        return {"weights": self.weights, "bias": self.bias, "mean": self.mean, "scale": self.scale}

    def config(self) -> dict:
        """The JSON-safe scalars to save beside :meth:`arrays`."""
        return {"kind": self.kind, "offset_scale": self.offset_scale, "l2": self.l2, "report": self.report}


def _centred(s):
    m = s.max(axis=1, keepdims=True)
    return s - np.where(np.isfinite(m), m, 0.0)


def _fit(Z, S, y, K, l2, theta0=None, callback=None, max_iter=200):
    """L-BFGS (torch, float64) on the penalised summed NLL; returns the parameters [a?, b (K), W (K*d)]."""
    import torch

    n, d = Z.shape
    use_s = S is not None
    off = 1 if use_s else 0
    Zt = torch.as_tensor(Z, dtype=torch.float64)
    St = torch.as_tensor(S, dtype=torch.float64) if use_s else None
    yt = torch.as_tensor(y, dtype=torch.long)
    if theta0 is None:
        theta0 = np.zeros(off + K + K * d)
        if use_s:
            theta0[0] = 1.0
    theta = torch.tensor(theta0, dtype=torch.float64, requires_grad=True)
    opt = torch.optim.LBFGS([theta], lr=1.0, max_iter=max_iter, history_size=10, line_search_fn="strong_wolfe",
                            tolerance_grad=1e-6, tolerance_change=1e-10)

    def closure():
        opt.zero_grad()
        b = theta[off:off + K]
        W = theta[off + K:].view(K, d)
        logits = Zt @ W.T + b
        if use_s:
            logits = logits + theta[0] * St
        val = torch.nn.functional.cross_entropy(logits, yt, reduction="sum") \
            + 0.5 * l2 * (b @ b + (W * W).sum())
        val.backward()
        if callback is not None:
            callback({"l2": l2, "loss": float(val.detach())})
        return val

    with torch.enable_grad():
        opt.step(closure)
    out = theta.detach().numpy().copy()
    if use_s:
        out[0] = max(out[0], 0.0)  # an inverse temperature: never flip the zero-shot order
    return out


def _standardise(H):
    mean = H.mean(axis=0)
    sd = H.std(axis=0)
    floor = 1e-3 * (float(sd.mean()) if sd.mean() > 0 else 1.0)
    return mean, np.maximum(sd, floor)


def _folds(y, cv, random_state):
    from sklearn.model_selection import KFold, StratifiedKFold

    counts = np.bincount(y)
    counts = counts[counts > 0]
    k = min(cv, len(y))
    if counts.min() >= 2:
        return list(StratifiedKFold(min(k, int(counts.min())), shuffle=True, random_state=random_state).split(y, y))
    return list(KFold(k, shuffle=True, random_state=random_state).split(y))


def choose_l2(states, y, n_classes, *, scores=None, grid=L2_GRID, cv=5, random_state=0, callback=None) -> dict:
    """Cross-validated NLL of the head for each L2 strength; the training data only.

    Folds: stratified (``cv`` folds, fewer when a class has fewer examples), or plain shuffled
    folds when some class has a single example. Within a fold the grid runs from the strongest
    penalty down, each fit warm-started from the previous one.

    Parameters
    ----------
    states : ndarray of shape (n, d)
    y : ndarray of int, shape (n,)
    n_classes : int
    scores : ndarray of shape (n, K), optional
    grid : sequence of float
    cv : int
    random_state : int
    callback : callable, optional
        Called after every optimiser step (may raise to stop).

    Returns
    -------
    dict
        ``l2`` (the chosen strength: lowest mean held-out NLL, the stronger one on a tie),
        ``grid``, ``nll`` (mean held-out NLL per strength), ``accuracy``, ``folds``.

    Examples
    --------
    >>> rng = np.random.default_rng(0)
    >>> y = np.repeat([0, 1], 10); H = rng.normal(size=(20, 3)) + 3 * np.eye(3)[y][:, :3]
    >>> r = choose_l2(H, y, 2, cv=3)
    >>> r["l2"] in L2_GRID, len(r["nll"]) == len(L2_GRID)
    (True, True)
    """
    H = np.asarray(states, np.float64)
    y = np.asarray(y)
    folds = _folds(y, cv, random_state)
    grid = sorted(float(g) for g in grid)[::-1]
    nll = np.zeros(len(grid))
    acc = np.zeros(len(grid))
    for tr, te in folds:
        mean, scale = _standardise(H[tr])
        Ztr, Zte = (H[tr] - mean) / scale, (H[te] - mean) / scale
        Str = None if scores is None else _centred(scores[tr])
        Ste = None if scores is None else _centred(scores[te])
        theta = None
        for j, l2 in enumerate(grid):
            theta = _fit(Ztr, Str, y[tr], n_classes, l2, theta, callback, max_iter=_CV_ITER)
            head = _head(theta, n_classes, H.shape[1], scores is not None, np.zeros(H.shape[1]),
                         np.ones(H.shape[1]), l2)
            lp = head.log_proba(Ste, Zte)
            nll[j] += -lp[np.arange(len(te)), y[te]].sum()
            acc[j] += (lp.argmax(1) == y[te]).sum()
    nll, acc = nll / len(y), acc / len(y)
    best = int(np.argmin(np.round(nll, 10)))  # grid runs strongest first: ties keep the stronger
    return {"l2": grid[best], "grid": grid, "nll": nll.tolist(), "accuracy": acc.tolist(), "folds": len(folds)}


def _head(theta, K, d, use_s, mean, scale, l2, report=None):
    off = 1 if use_s else 0
    return LinearHead(theta[off + K:].reshape(K, d).copy(), theta[off:off + K].copy(),
                      float(theta[0]) if use_s else None, mean, scale, float(l2), report or {})


def fit_head(states, y, n_classes, *, scores=None, l2=None, cv=5, grid=L2_GRID, random_state=0,
             callback=None) -> LinearHead:
    """Fit the head on labelled texts' features; ``l2=None`` chooses it by cross-validation.

    Parameters
    ----------
    states : ndarray of shape (n, d)
        Answer-slot hidden states of the training texts.
    y : ndarray of int, shape (n,)
        Label indices in ``[0, n_classes)``.
    n_classes : int
    scores : ndarray of shape (n, K), optional
        The texts' exact zero-shot log-probabilities: the offset (``features="hidden+scores"``).
    l2 : float, optional
        The L2 strength; None: :func:`choose_l2` on these data.
    cv, grid, random_state : cross-validation settings.
    callback : callable, optional
        Called after every optimiser step with a small dict (may raise to stop: nothing is kept).

    Returns
    -------
    LinearHead

    Examples
    --------
    A planted signal in the states, and zero-shot scores that know nothing:

    >>> rng = np.random.default_rng(0)
    >>> y = np.repeat([0, 1, 2], 8)
    >>> H = rng.normal(size=(24, 5)); H[:, :3] += 4 * np.eye(3)[y]
    >>> head = fit_head(H, y, 3, scores=np.zeros((24, 3)), cv=3)
    >>> float((head.log_proba(np.zeros((24, 3)), H).argmax(1) == y).mean())
    1.0
    """
    t0 = time.perf_counter()
    H = check_features("states", states, len(y))
    y = np.asarray(y, np.int64)
    S = None if scores is None else check_features("scores", scores, len(y), n_classes)
    report = {"n": int(len(y))}
    if l2 is None:
        cvr = choose_l2(H, y, n_classes, scores=S, grid=grid, cv=cv, random_state=random_state, callback=callback)
        l2 = cvr["l2"]
        report["cv"] = cvr
    mean, scale = _standardise(H)
    theta = _fit((H - mean) / scale, None if S is None else _centred(S), y, n_classes, float(l2), None, callback)
    report.update(l2=float(l2), seconds=time.perf_counter() - t0)
    return _head(theta, n_classes, H.shape[1], S is not None, mean, scale, l2, report)
