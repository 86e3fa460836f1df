"""Self-training: ``fit(texts, y, unlabelled=more_texts)`` puts a user's unlabelled texts to work.

A user who labels a few texts per class usually has many more of the same kind. :func:`self_train`
takes the head fitted on the labelled texts, reads its answers on the unlabelled ones, keeps the most
confident answers of every class (class-balanced, so a label the head favours cannot take over), and
refits the head on the labelled texts plus those pseudo-labelled ones, for ``rounds`` rounds. No
label of an unlabelled text is ever read: it has none; what it contributes is the head's own answer.

The refit keeps the head's feature set, its embedder (frozen or tuned) and its L2 as chosen on the
labelled texts: cross-validating on pseudo-labels would only measure how well the head agrees with
itself. The settings (:data:`SELF_TRAIN_DEFAULTS`) were chosen on validation splits by the mean gain over
four datasets at 4 labelled texts per class (``python -m bench.self_training``,
bench/results/self_training_select.json; :doc:`/fit`).

Not scikit-learn's ``SelfTrainingClassifier``: it refits its estimator through ``fit(X, y)``, which
cannot pass the head's per-text offsets (the zero-shot scores and label similarities), and its
criteria (a threshold, or the k best overall) are not class-balanced.

What it deliberately does not do: compute features (the head's :meth:`~judge.adaptation.LinearHead.features_of`
does) or decide whether to self-train (passing ``unlabelled=`` does).
"""

from __future__ import annotations

import time

import numpy as np

__all__ = ["SELF_TRAIN_DEFAULTS", "check_settings", "pseudo_labels", "self_train"]

#: ``share``: the fraction of the unlabelled texts the head assigns to a class that join its
#: training set as that class (its most confident ones); ``rounds``: how many times the head reads
#: the unlabelled texts again and is refitted.
SELF_TRAIN_DEFAULTS = {"share": 0.5, "rounds": 2}


def pseudo_labels(log_proba, share) -> tuple[np.ndarray, np.ndarray]:
    """The confident answers kept for self-training: for every class, the top ``share`` of the rows answered with it.

    Each row's answer is its argmax; within each class the rows are ranked by that answer's
    probability and the first ``ceil(share * count)`` kept, so every class keeps the same share of
    what it was given and a label the head over-answers cannot crowd out the others.

    Parameters
    ----------
    log_proba : array-like of float, shape (m, K)
        The head's log-probabilities on the unlabelled texts.
    share : float in (0, 1]

    Returns
    -------
    rows : ndarray of int, shape (r,)
        The kept rows, sorted.
    labels : ndarray of int, shape (r,)
        Their answers.

    Examples
    --------
    >>> lp = np.log([[0.9, 0.1], [0.6, 0.4], [0.2, 0.8], [0.45, 0.55]])
    >>> pseudo_labels(lp, 0.5)
    (array([0, 2]), array([0, 1]))
    >>> pseudo_labels(lp, 1.0)[1].tolist()
    [0, 0, 1, 1]
    """
    lp = np.asarray(log_proba, np.float64)
    if lp.ndim != 2:
        raise ValueError(f"log_proba must be (m, K), got shape {lp.shape}.")
    _check_share(share)
    answer, conf = lp.argmax(axis=1), lp.max(axis=1)
    keep = []
    for k in np.unique(answer):
        members = np.flatnonzero(answer == k)
        order = members[np.lexsort((members, -conf[members]))]  # most confident first; ties by row
        keep.append(order[:int(np.ceil(share * len(members)))])
    rows = np.sort(np.concatenate(keep)) if keep else np.zeros(0, np.int64)
    return rows.astype(np.int64), answer[rows].astype(np.int64)


def _check_share(share):
    if isinstance(share, bool) or not isinstance(share, (int, float)) or not 0.0 < share <= 1.0:
        raise ValueError(f"share must be a fraction in (0, 1], got {share!r}; e.g. 0.5 keeps each class's more "
                         f"confident half of the unlabelled texts answered with it.")


def check_settings(share, rounds) -> dict:
    """Validate self-training's settings; returns them as a dict (a clear error otherwise).

    Examples
    --------
    >>> check_settings(0.5, 2)
    {'share': 0.5, 'rounds': 2}
    >>> check_settings(0.5, 0)
    Traceback (most recent call last):
    ...
    ValueError: rounds must be an int >= 1, got 0.
    """
    _check_share(share)
    if isinstance(rounds, bool) or not isinstance(rounds, (int, np.integer)) or rounds < 1:
        raise ValueError(f"rounds must be an int >= 1, got {rounds!r}.")
    return {"share": float(share), "rounds": int(rounds)}


def self_train(head, labelled, y, unlabelled, *, share=SELF_TRAIN_DEFAULTS["share"],
               rounds=SELF_TRAIN_DEFAULTS["rounds"], callback=None):
    """Refit a fitted head on its labelled texts plus its confident answers on unlabelled ones.

    Parameters
    ----------
    head : judge.adaptation.LinearHead
        Fitted on the labelled texts (its features, embedder and L2 are kept).
    labelled, unlabelled : tuple (scores, blocks, similarity)
        The features of the labelled (n rows) and unlabelled (m rows) texts as
        :meth:`LinearHead.features_of` returns them: the zero-shot scores (n, K) or None, a dict
        of the head's blocks, the label similarities (n, K) or None.
    y : array-like of int, shape (n,)
        The labelled texts' classes.
    share : float in (0, 1]
        See :func:`pseudo_labels`.
    rounds : int >= 1
    callback : callable, optional
        Called after every optimiser step (may raise to stop: nothing is kept).

    Returns
    -------
    LinearHead
        ``report["self_training"]`` holds ``unlabelled`` (m), ``share``, ``rounds``, ``pseudo``
        (rows kept per round), ``changed`` (answers on the unlabelled texts that changed in the
        last round) and ``seconds``; the rest of the report is the labelled fit's.

    Examples
    --------
    Two clusters, one labelled text each; the unlabelled texts fill the clusters in:

    >>> from judge.adaptation.head import fit_head
    >>> rng = np.random.default_rng(0)
    >>> centres = np.array([[3.0, 0.0], [0.0, 3.0]])
    >>> yl, yu = np.array([0, 1]), rng.integers(0, 2, 40)
    >>> Xl, Xu = centres[yl] + rng.normal(size=(2, 2)), centres[yu] + rng.normal(size=(40, 2))
    >>> head = fit_head(Xl, yl, 2, l2=1.0)
    >>> tuned = self_train(head, (None, {"hidden": Xl}, None), yl, (None, {"hidden": Xu}, None))
    >>> tuned.report["self_training"]["pseudo"], tuned.report["n"]
    ([21, 21], 23)
    """
    from judge.adaptation.head import fit_head

    t0 = time.perf_counter()
    check_settings(share, rounds)
    y = np.asarray(y, np.int64)
    K = int(np.asarray(head.weights).shape[0])
    S_l, _, R_l = labelled
    S_u, _, R_u = unlabelled
    H_l, H_u = head.stack(labelled[1]), head.stack(unlabelled[1])  # stacked once, read every round
    m = (H_u[0] if H_u[0] is not None else H_u[1]).shape[0]
    report = {"unlabelled": int(m), "share": float(share), "rounds": int(rounds), "pseudo": [], "changed": 0}
    answer = head.log_proba(S_u, H_u, R_u).argmax(axis=1) if m else None
    current, base = head, dict(head.report)  # with no unlabelled row, current is head: keep its report apart
    for _ in range(rounds if m else 0):
        rows, labels = pseudo_labels(current.log_proba(S_u, H_u, R_u), share)
        H = tuple(_vstack(a, None if b is None else b[rows]) for a, b in zip(H_l, H_u))
        S = None if S_l is None else np.vstack([S_l, np.asarray(S_u)[rows]])
        R = None if R_l is None else np.vstack([R_l, np.asarray(R_u)[rows]])
        current = fit_head(H, np.concatenate([y, labels]), K, scores=S, similarity=R, l2=head.l2,
                           callback=callback, blocks=head.blocks, embedder=head.embedder,
                           label_vectors=head.label_vectors, tfidf=head.tfidf)
        report["pseudo"].append(int(len(rows)))
    if m:
        report["changed"] = int((current.log_proba(S_u, H_u, R_u).argmax(axis=1) != answer).sum())
    report["seconds"] = time.perf_counter() - t0
    n = current.report.get("n", len(y))
    current.report.clear()
    current.report.update(base, n=n, self_training=report)
    return current


def _vstack(a, b):
    import scipy.sparse as sp

    if a is None:
        return None
    if sp.issparse(a):
        return sp.csr_matrix(sp.vstack([a, b]))
    return np.vstack([a, b])
