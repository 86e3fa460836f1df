"""``POST /v1/classify``: a saved classifier answering texts over HTTP (``judge serve --classifier DIR``).

The persistent local mode of ``judge predict``: the model and the classifier (labels, fitted head,
calibration) load once when the server starts, then every ``judge predict --server URL`` (or any
HTTP client) pays only for scoring. The route sits beside ``/v1/systemone`` and ``/v1/decisions``
(whose contracts it leaves alone) behind the same gate (request id, bearer key, bounded body).

Request ``{"texts": [str, ...], "abstain": false, "top_k": null}``: 1 to ``max_texts`` texts;
``abstain`` needs a classifier calibrated with a threshold; ``top_k`` limits the probabilities
written per text (null: all labels). Response ``{"classifier", "labels", "calibrated", "multi_label",
"fitted", "predictions": [...], "usage": {"texts": n}}`` (plus ``x_compute_ms``), each prediction the
record of :func:`judge.calibration.review.prediction_records` (``label``, ``confidence``,
``probabilities``, ``abstained``, ``abstain_reason``), or for a multi-label classifier
(``Classifier(multi_label=True)``) of :func:`judge.multilabel.records` (``labels``: a list, possibly
empty; ``probabilities``: each label's own). Bad requests answer 422 in the server's
validation shape. Scoring runs on the batcher's worker thread (``MicroBatcher.call``), so it never
races the decisions' batches for the model.

What it deliberately does not do: parse the decisions' wire form (`judge.server.contract`) or
load the classifier (``judge serve`` does, `judge.cli.serve`).
"""

from __future__ import annotations

import json
import time

from fastapi import Request
from fastapi.responses import JSONResponse

from judge.server.errors import validation_response

__all__ = ["add_classify_route", "parse_classify"]


def parse_classify(body: bytes, *, max_texts: int, n_labels: int) -> tuple[list[str], bool, int | None]:
    """``(texts, abstain, top_k)`` of a ``/v1/classify`` body, or a ValueError naming the field and the fix.

    Examples
    --------
    >>> parse_classify(b'{"texts": ["my card is late"], "top_k": 2}', max_texts=8, n_labels=3)
    (['my card is late'], False, 2)
    >>> parse_classify(b'{"text": "my card is late"}', max_texts=8, n_labels=3)
    Traceback (most recent call last):
    ...
    ValueError: texts: missing; send {"texts": ["a text", ...]} (1 to 8 texts).
    """
    try:
        req = json.loads(body or b"null")
    except (json.JSONDecodeError, UnicodeDecodeError) as err:
        raise ValueError(f"the body is not JSON ({err}); send {{\"texts\": [\"a text\", ...]}}.") from None
    if not isinstance(req, dict):
        raise ValueError(f"the body is a JSON {type(req).__name__}, not an object; send {{\"texts\": [...]}}.")
    texts = req.get("texts")
    if texts is None:
        raise ValueError(f"texts: missing; send {{\"texts\": [\"a text\", ...]}} (1 to {max_texts} texts).")
    if not isinstance(texts, list) or not texts or len(texts) > max_texts:
        got = f"{len(texts)} texts" if isinstance(texts, list) else f"a {type(texts).__name__}"
        raise ValueError(f"texts: expected a list of 1 to {max_texts} strings, got {got}; split larger calls.")
    for i, t in enumerate(texts):
        if not isinstance(t, str) or not t.strip():
            raise ValueError(f"texts[{i}]: expected a non-empty string, got {t!r:.40}; remove or fill it.")
    abstain = req.get("abstain", False)
    if not isinstance(abstain, bool):
        raise ValueError(f"abstain: expected true or false, got {abstain!r:.40}.")
    top_k = req.get("top_k")
    if top_k is not None and (not isinstance(top_k, int) or isinstance(top_k, bool) or not 1 <= top_k):
        raise ValueError(f"top_k: expected null (all {n_labels} labels) or an int >= 1, got {top_k!r:.40}.")
    return texts, abstain, top_k


def add_classify_route(app, clf, batcher, *, name: str, max_texts: int = 1024, extensions: bool = True) -> None:
    """Add ``POST /v1/classify`` for the classifier ``clf`` to ``app`` (scoring on ``batcher``'s worker).

    Parameters
    ----------
    app : fastapi.FastAPI
    clf : judge.Classifier
        Set up already (``clf.setup()``), so the first request does not load the model.
    batcher : judge.server.batching.MicroBatcher
    name : str
        The classifier's name in responses (its folder's name).
    max_texts : int
        Texts per request (422 over it).
    extensions : bool
        Add ``x_compute_ms``.

    Examples
    --------
    >>> from fastapi.testclient import TestClient
    >>> from judge import Classifier, Decider
    >>> from judge.server.app import ServerConfig, create_app
    >>> from judge.testing import tiny_pair
    >>> model, tok = tiny_pair()
    >>> clf = Classifier(["billing", "cards"], model, tokenizer=tok).setup()
    >>> app = create_app(Decider(model, tok), ServerConfig(max_wait_ms=0), classifier=clf)
    >>> with TestClient(app) as client:
    ...     r = client.post("/v1/classify", json={"texts": ["I was charged twice"]})
    >>> r.status_code, sorted(r.json()["predictions"][0])
    (200, ['abstain_reason', 'abstained', 'confidence', 'label', 'probabilities'])
    """
    from judge.calibration.review import prediction_records

    labels = list(clf.labels)

    @app.post("/v1/classify")
    async def classify(request: Request):
        try:
            texts, abstain, top_k = parse_classify(await request.body(), max_texts=max_texts, n_labels=len(labels))
        except ValueError as e:
            return validation_response([{"loc": ["body"], "msg": str(e), "type": "value_error"}])
        cal = clf.calibration_
        if abstain and clf.multi_label:
            return validation_response([{"loc": ["body", "abstain"], "type": "value_error",
                                         "msg": f"abstain: the classifier {name!r} is multi-label: a text with no "
                                                f"label above its threshold already gets an empty list; send "
                                                f"abstain=false."}])
        if abstain and (cal is None or cal.threshold is None):
            return validation_response([{"loc": ["body", "abstain"], "type": "value_error",
                                         "msg": f"abstain: the classifier {name!r} has no abstention threshold; "
                                                f"calibrate it with `judge calibrate ... --target-accuracy T` (or "
                                                f"--coverage C), or send abstain=false."}])
        t0 = time.perf_counter()
        proba = await batcher.call(clf.predict_proba, texts)
        if clf.multi_label:  # {"labels": [...], "probabilities": {...}} per text
            from judge import multilabel

            recs = multilabel.records(labels, proba, multilabel.thresholds(clf), top_k=top_k)
            ml = clf.multilabel_
            calibrated, fitted = ml is not None and ml.state is not None, ml is not None and ml.head is not None
            fitted = "multilabel_head" if fitted else None
        else:
            recs = prediction_records(labels, proba, threshold=cal.threshold if abstain else None,
                                      report=cal.report if abstain else None, top_k=top_k)
            ad = clf.adaptation_
            calibrated, fitted = cal is not None, None if ad is None else ad.kind
        out = {"classifier": name, "labels": labels, "calibrated": calibrated, "multi_label": bool(clf.multi_label),
               "fitted": fitted, "predictions": recs, "usage": {"texts": len(texts)}}
        if extensions:
            out["x_compute_ms"] = round((time.perf_counter() - t0) * 1000, 3)
        return JSONResponse(out)
