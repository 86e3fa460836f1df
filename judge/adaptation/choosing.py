"""How ``fit``'s head picks its feature set: cross-validated NLL over the candidates, frozen or tuned embedder.

* :func:`choose_features` — the candidate feature set of lowest cross-validated NLL, each at its best L2
  (every candidate on the same folds, :func:`judge.adaptation.head.cv_folds`).
* :func:`fit_head_tuned` — the same choice where the sentence embedder is tuned on the labelled texts
  (:mod:`judge.adaptation.tuning`): each fold's candidates read an embedder tuned on that fold's
  training texts alone, so the held-out NLL that decides is honest.
* :func:`candidate_parts` — one candidate's (states, scores, similarity) from the feature blocks.

Candidates come parsed (:func:`judge.adaptation.fit.parse_features`): ``name -> (blocks, offsets)``.

What it deliberately does not do: compute features (:mod:`judge.adaptation.features` does) or
parse feature names (:mod:`judge.adaptation.fit` does).
"""

from __future__ import annotations

import numpy as np

from judge.adaptation.head import L2_GRID

__all__ = ["candidate_parts", "choose_features", "fit_head_tuned"]


def candidate_parts(parsed, blocks, scores, similarity):
    """(states, scores, similarity) of one parsed candidate: its dense blocks stacked, TF-IDF beside them.

    Examples
    --------
    >>> H, S, R = candidate_parts((("hidden", "embed"), ("scores",)), {"hidden": np.ones((2, 3)),
    ...                           "embed": np.zeros((2, 4))}, np.zeros((2, 5)), None)
    >>> H[0].shape, H[1], S.shape, R
    ((2, 7), None, (2, 5), None)
    """
    bl, of = parsed
    dense = [blocks[b] for b in bl if b != "tfidf"]
    H = (np.hstack(dense) if dense else None, blocks["tfidf"] if "tfidf" in bl else None)
    return H, scores if "scores" in of else None, similarity if "similarity" in of else None


def choose_features(candidates, y, n_classes, *, grid=L2_GRID, cv=5, random_state=0, callback=None,
                    max_folds=None) -> dict:
    """The candidate feature set of lowest cross-validated NLL (each at its best L2), on the training data only.

    Parameters
    ----------
    candidates : dict
        ``name -> (states (n, d), scores (n, K) or None, similarity (n, K) or None)``, in order of
        preference (a tie keeps the earlier).
    y : ndarray of int, shape (n,)
    n_classes : int
    grid, cv, random_state, callback : as :func:`choose_l2` (every candidate gets the same folds).
    max_folds : int, optional
        Use only the first folds (a held-out split where the data are large: the choice is then
        less noisy than the fits are costly).

    Returns
    -------
    dict
        ``features`` (the chosen name), ``l2`` (its strength), ``nll`` (name -> best mean held-out
        NLL), ``tables`` (name -> its :func:`choose_l2` result).

    Examples
    --------
    A planted signal in one block only; the other block is noise:

    >>> rng = np.random.default_rng(0)
    >>> y = np.repeat([0, 1, 2], 12)
    >>> good = rng.normal(size=(36, 4)); good[:, :3] += 3 * np.eye(3)[y]
    >>> noise = rng.normal(size=(36, 4))
    >>> choose_features({"noise": (noise, None, None), "good": (good, None, None)}, y, 3, cv=3)["features"]
    'good'
    """
    if not candidates:
        raise ValueError("choose_features needs at least one candidate feature set; got none.")
    y = np.asarray(y)
    from judge.adaptation.head import choose_l2, cv_folds

    folds = cv_folds(y, cv, random_state)[:max_folds]
    tables, best = {}, {}
    for name, (H, S, R) in candidates.items():
        tables[name] = choose_l2(H, y, n_classes, scores=S, similarity=R, grid=grid, folds=folds, callback=callback)
        best[name] = min(tables[name]["nll"])
    pick = min(candidates, key=lambda k: round(best[k], 10))  # dicts keep order: a tie keeps the earlier
    return {"features": pick, "l2": tables[pick]["l2"], "nll": best, "tables": tables}


def fit_head_tuned(parsed, blocks, y, n_classes, texts, label_texts, *, mode=True, scores=None, similarity=None,
                   l2=None, cv=5, random_state=0, callback=None, embedder=None, label_vectors=None, tfidf=None,
                   max_seconds=None, progress=False):
    """The head with its sentence embedder tuned on the labelled texts (``fit(..., tune_embedder=...)``).

    Every candidate that reads the embedder (an ``embed`` block or the ``similarity`` offset) is
    scored by cross-validation with an embedder tuned on each fold's training texts alone
    (:func:`judge.adaptation.head.choose_l2` with ``per_fold``), so its held-out NLL never saw the
    held-out labels (tuning once on every text would let them into their own features); with ``mode="auto"`` the frozen embedder's
    candidates compete on the same folds, so the tuned one is kept only where it lowers the
    held-out NLL. The winner is refitted on every text (the embedder tuned on all of them).

    Parameters
    ----------
    parsed : dict of str -> (blocks, offsets)
        The candidates, parsed (:func:`judge.adaptation.fit.parse_features`), in order of preference.
    blocks, y, n_classes, scores, similarity, l2, cv, random_state, callback, embedder, label_vectors, tfidf
        As :func:`judge.adaptation.fit.fit_head_choosing` (``blocks["embed"]``, ``similarity`` and
        ``label_vectors`` are the frozen embedder's).
    texts : sequence of str, length n
        The training texts (what the embedder is tuned on).
    label_texts : sequence of str, length K
        What the embedder compares a text with, per label (:func:`judge.fusion.label_texts`).
    mode : True or "auto"
        True: the tuned embedder for every candidate that reads one; "auto": frozen or tuned, by CV.
    max_seconds : float, optional
        The time the tunings may take together, split evenly over the folds and the final one.
    progress : bool
        A progress bar per tuning.

    Returns
    -------
    LinearHead
        ``report["tuned"]`` says whether its embedder is the tuned one (then ``report["tuning"]``
        holds the final tuning's steps and seconds, and ``embedder`` is a
        :class:`~judge.adaptation.tuning.TunedEncoder`); ``report["features_cv"]["nll"]`` every
        candidate's held-out NLL, tuned ones marked ``" (tuned)"``.

    Examples
    --------
    >>> from judge.encoders import SentenceEncoder
    >>> texts = ["card lost", "lost my card", "card stolen", "rate?", "exchange rate", "euro rate"]
    >>> y = np.array([0, 0, 0, 1, 1, 1]); enc = SentenceEncoder()
    >>> head = fit_head_tuned({"embed": (("embed",), ())}, {"embed": enc(texts).astype(float)}, y, 2, texts,
    ...                       ["card", "rate"], cv=2, embedder="minilm", l2=1.0)
    >>> head.report["tuned"], head.report["features"], sorted(head.report["features_cv"]["nll"])
    (True, 'embed', ['embed (tuned)'])
    """
    import time

    from judge.adaptation.head import choose_l2, cv_folds, fit_head
    from judge.adaptation.tuning import tune_embedder
    from judge.fusion import label_similarity

    if mode not in (True, "auto"):
        raise ValueError(f"fit_head_tuned(mode=...) is True or 'auto', got {mode!r}.")
    start = time.perf_counter()
    candidates = list(parsed)
    n, texts = len(y), list(texts)
    folds = cv_folds(y, cv if n <= 2000 else min(cv, 3), random_state)[:None if n <= 2000 else 1]
    budget = None if max_seconds is None else max_seconds / (len(folds) + 1)

    def tuned(rows):
        enc = tune_embedder(embedder, [texts[i] for i in rows], y[rows], random_state=random_state,
                            max_seconds=budget, progress=progress)
        E, L = np.asarray(enc(texts), np.float64), np.asarray(enc(label_texts), np.float64)
        return enc, E, L, label_similarity(lambda _: E, texts, L)

    reads = [c for c in candidates if "embed" in parsed[c][0] or "similarity" in parsed[c][1]]
    per_fold = [tuned(tr) for tr, _ in folds]
    grid = (l2,) if l2 is not None else L2_GRID
    tables = {}
    for c in candidates:
        if mode == "auto" or c not in reads:
            H, S, R = candidate_parts(parsed[c], blocks, scores, similarity)
            tables[c] = choose_l2(H, y, n_classes, scores=S, similarity=R, grid=grid, folds=folds, callback=callback)
        if c in reads:
            tables[c + " (tuned)"] = choose_l2(
                None, y, n_classes, grid=grid, folds=folds, callback=callback,
                per_fold=lambda f, c=c: candidate_parts(parsed[c], dict(blocks, embed=per_fold[f][1]), scores,
                                                        per_fold[f][3]))
    nll = {name: min(t["nll"]) for name, t in tables.items()}
    pick = min(tables, key=lambda k: round(nll[k], 10))  # a tie keeps the earlier: the frozen one
    base, is_tuned = pick.removesuffix(" (tuned)"), pick.endswith(" (tuned)")
    enc, L_final, R_final, E_final = embedder, label_vectors, similarity, blocks.get("embed")
    if is_tuned:
        enc, E_final, L_final, R_final = tuned(np.arange(n))
    H, S, R = candidate_parts(parsed[base], dict(blocks, embed=E_final) if E_final is not None else blocks,
                               scores, R_final)
    bl = parsed[base][0]
    sizes = {b: (E_final if b == "embed" else blocks[b]).shape[1] for b in bl}
    head = fit_head(H, y, n_classes, scores=S, similarity=R, l2=tables[pick]["l2"], cv=cv, random_state=random_state,
                    callback=callback, blocks=tuple((b, sizes[b]) for b in bl), embedder=enc, label_vectors=L_final,
                    tfidf=tfidf)
    head.report.update(features=base, tuned=is_tuned, cv=tables[pick], seconds_total=time.perf_counter() - start,
                       features_cv={"nll": nll, "chosen": pick})
    if is_tuned:
        head.report["tuning"] = enc.report
    return head
