"""The ASGI app: routes, the auth and body-decoding gate, the micro-batched scoring worker.

Routes: ``POST /v1/systemone``, ``POST /v1/decisions``, ``GET /v1/models``,
``GET /healthz``. Every ``/v1/`` request passes the `_Gate` first: the bearer
key is checked when one is configured (any key, or none, is accepted
otherwise), and a ``Content-Encoding: zstd`` (or gzip/deflate) body is
decoded, bounded in size.

Requests are validated (`judge.server.contract`, 422 with ``detail[]``), turned into
`judge.decisions` questions, checked against the token budget (`Decider.count_tokens`:
the scorer's own tokenizer, 413 when over) and queued on a `MicroBatcher`; one worker
thread answers each batch with one `Decider.ask_many` call (one ``score()`` call).

What it deliberately does not do: parse the wire form (`judge.server.contract`), build
prompts or score (`judge.decisions`), or parse command lines (``judge serve`` lives in
`judge.cli.serve`).

Examples
--------
>>> from fastapi.testclient import TestClient
>>> from judge.decisions import Decider
>>> from judge.testing import tiny_pair
>>> app = create_app(Decider(*tiny_pair()), ServerConfig(max_wait_ms=0))
>>> with TestClient(app) as client:        # runs startup (model warm-up) and shutdown
...     r = client.post("/v1/systemone", json={"model": "jev-latest", "state": "I was charged twice",
...                                            "questions": {"refund": {"type": "noul", "instructions": "Refund?"}}})
>>> r.status_code, r.json()["answers"]["refund"]["type"], r.json()["usage"]["input_tokens"] > 0
(200, 'noul', True)
"""

from __future__ import annotations

import contextlib
import datetime as _dt
import hmac
import io
import json
import time
from dataclasses import dataclass

from fastapi import FastAPI
from fastapi.responses import JSONResponse

from judge._errors import LabelError
from judge.decisions import Decider, DecisionError, YesNo
from judge.server.batching import MicroBatcher, Overloaded, ShuttingDown
from judge.server.contract import (
    DecisionsRequest,
    SystemOneRequest,
    decisions_to_questions,
    render_input,
    to_questions,
)
from judge.server.errors import ApiError, error_body, install_handlers, validation_response

__all__ = ["ServerConfig", "create_app"]

ALIASES = ("jev-latest",)
RELEASE_DATE = "2026-12-01"


@dataclass(frozen=True)
class ServerConfig:
    """How the server behaves.

    Parameters
    ----------
    api_key : str or None
        Required as ``Authorization: Bearer <key>`` when set; otherwise any key is accepted.
    served_name : str or None
        The model name in responses and ``/v1/models`` (default ``trie-judge/<model>``).
    max_wait_ms : float
        How long a request waits for others to share its forward pass.
    max_batch_questions : int
        Questions merged into one scoring call.
    max_queue : int
        Requests allowed to wait; more get 429.
    max_request_tokens, max_state_tokens : int
        Token budgets (the contract's 64k per request, 32k for the state plus
        the longest question); over budget gets 413.
    max_body_bytes : int
        Largest (decoded) request body.
    extensions : bool
        Add ``x_`` fields (option mass, batch size, timings) to responses.

    Examples
    --------
    >>> ServerConfig(api_key="s3cret").max_request_tokens
    65536
    """

    api_key: str | None = None
    served_name: str | None = None
    max_wait_ms: float = 5.0
    max_batch_questions: int = 256
    max_queue: int = 64
    max_request_tokens: int = 65536
    max_state_tokens: int = 32768
    max_body_bytes: int = 32 * 1024 * 1024
    extensions: bool = True


# ----------------------------------------------------------------------------- gate

def _decompress(encoding: str, body: bytes, limit: int) -> bytes:
    if encoding == "zstd":
        try:
            import zstandard
        except ImportError:
            zstandard = None
        if zstandard is not None:
            reader = zstandard.ZstdDecompressor().stream_reader(io.BytesIO(body))
            out = reader.read(limit + 1)
        else:
            try:
                from compression import zstd  # Python 3.14
            except ImportError:
                from backports import zstd
            out = zstd.decompress(body)
    elif encoding in ("gzip", "x-gzip"):
        import gzip

        out = gzip.GzipFile(fileobj=io.BytesIO(body)).read(limit + 1)
    elif encoding == "deflate":
        import zlib

        d = zlib.decompressobj()
        out = d.decompress(body, limit + 1)
    else:
        raise ApiError(415, f"Content-Encoding {encoding!r} is not supported; send zstd, gzip, deflate or an "
                            f"uncompressed body.")
    if len(out) > limit:
        raise ApiError(413, f"the decoded request body is over {limit} bytes; send a smaller request.")
    return out


class _Gate:
    """ASGI middleware: bearer auth, then request-body decoding, for ``/v1/`` routes."""

    def __init__(self, app, *, api_key: str | None, max_body_bytes: int, stats: dict | None = None):
        self.app, self.api_key, self.limit = app, api_key, max_body_bytes
        self.stats = stats if stats is not None else {}

    async def _reply(self, send, status: int, body: dict, headers=()):
        raw = json.dumps(body).encode()
        await send({"type": "http.response.start", "status": status,
                    "headers": [(b"content-type", b"application/json"), (b"content-length", str(len(raw)).encode()),
                                *headers]})
        await send({"type": "http.response.body", "body": raw})

    async def __call__(self, scope, receive, send):
        if scope["type"] != "http" or not scope["path"].startswith("/v1/"):
            return await self.app(scope, receive, send)
        headers = {k.lower(): v for k, v in scope["headers"]}
        if self.api_key is not None:
            auth = headers.get(b"authorization", b"").decode("latin-1")
            if not auth:
                return await self._reply(send, 401, error_body(401, "Missing API key: send the header "
                                                                    "`Authorization: Bearer <key>`."),
                                         [(b"www-authenticate", b"Bearer")])
            scheme, _, key = auth.partition(" ")
            if scheme.lower() != "bearer" or not hmac.compare_digest(key.strip().encode(), self.api_key.encode()):
                return await self._reply(send, 401, error_body(401, "Invalid API key: the key in `Authorization: "
                                                                    "Bearer <key>` is not this server's key."),
                                         [(b"www-authenticate", b"Bearer")])
        enc = headers.get(b"content-encoding", b"").decode("latin-1").strip().lower()
        if not enc or enc == "identity":
            return await self.app(scope, receive, send)
        chunks, more = [], True
        total = 0
        while more:
            msg = await receive()
            if msg["type"] == "http.disconnect":
                return
            chunks.append(msg.get("body", b""))
            total += len(chunks[-1])
            more = msg.get("more_body", False)
            if total > self.limit:
                return await self._reply(send, 413, error_body(413, f"the request body is over {self.limit} bytes."))
        try:
            body = _decompress(enc, b"".join(chunks), self.limit)
        except ApiError as e:
            return await self._reply(send, e.status, error_body(e.status, e.message))
        except Exception as e:  # noqa: BLE001 - a corrupt body is the client's error
            return await self._reply(send, 400, error_body(400, f"the request body is not valid {enc} data "
                                                                f"({type(e).__name__}: {e}); compress the JSON "
                                                                f"body, or drop the Content-Encoding header."))
        self.stats[f"decoded_{enc}"] = self.stats.get(f"decoded_{enc}", 0) + 1
        new_headers = [(k, v) for k, v in scope["headers"]
                       if k.lower() not in (b"content-encoding", b"content-length")]
        new_headers.append((b"content-length", str(len(body)).encode()))
        scope = dict(scope, headers=new_headers)
        sent = False

        async def receive2():
            nonlocal sent
            if not sent:
                sent = True
                return {"type": "http.request", "body": body, "more_body": False}
            return await receive()

        return await self.app(scope, receive2, send)


# ----------------------------------------------------------------------------- app

def _served_name(decider: Decider, config: ServerConfig) -> str:
    if config.served_name:
        return config.served_name
    name = decider.model_name.rstrip("/").split("/")[-1]
    return f"trie-judge/{name}"


def create_app(decider: Decider | None = None, config: ServerConfig | None = None) -> FastAPI:
    """The FastAPI app serving ``decider``.

    Parameters
    ----------
    decider : Decider, optional
        Default: ``Decider()`` (the packaged model, loaded at startup).
    config : ServerConfig, optional

    Returns
    -------
    fastapi.FastAPI
        ``app.state.batcher`` is the `MicroBatcher` (after startup).

    Examples
    --------
    >>> from fastapi.testclient import TestClient
    >>> from judge.testing import tiny_pair
    >>> app = create_app(Decider(*tiny_pair()), ServerConfig(served_name="tiny"))
    >>> with TestClient(app) as client:
    ...     names = [m["name"] for m in client.get("/v1/models").json()["models"]]
    >>> names
    ['tiny', 'jev-latest']
    """
    decider = decider if decider is not None else Decider()
    config = config or ServerConfig()
    served = _served_name(decider, config)
    accepted = {served, *ALIASES, decider.model_name, "trie-judge"}

    def budget(state, questions) -> int:
        """Tokens of one request (state once, each question's own text, its options); 413 when over budget."""
        n = decider.count_tokens(state, questions)
        longest = max(n["questions"].values())
        if n["state"] + longest > config.max_state_tokens:
            raise ApiError(413, f"the state plus the longest question is {n['state'] + longest} tokens, over the "
                                f"{config.max_state_tokens}-token budget; shorten the state or split the question.")
        if n["total"] > config.max_request_tokens:
            raise ApiError(413, f"the request is {n['total']} tokens, over the {config.max_request_tokens}-token "
                                f"budget; send fewer questions per request.")
        return n["total"]

    def run_batch(payloads):
        results: list = [None] * len(payloads)
        calls, idx = [], []
        for i, (state, questions) in enumerate(payloads):
            try:
                n = budget(state, questions)
            except Exception as e:  # noqa: BLE001 - reported to that request only
                results[i] = e
                continue
            calls.append((state, questions))
            idx.append((i, n))
        if calls:
            t0 = time.perf_counter()
            answers = decider.ask_many(calls)
            ms = (time.perf_counter() - t0) * 1000
            batch_tokens = int(decider.last_usage_.get("input_tokens", 0))
            for (i, n), a in zip(idx, answers):
                results[i] = {"answers": a, "input_tokens": n, "batch_tokens": batch_tokens,
                              "batch_requests": len(calls), "compute_ms": ms}
        return results

    batcher = MicroBatcher(run_batch, max_wait_s=config.max_wait_ms / 1000,
                           max_questions=config.max_batch_questions, max_queue=config.max_queue)

    def warm_up():
        decider.ask("warm up", {"q": YesNo("Is this a test?")})

    @contextlib.asynccontextmanager
    async def lifespan(app):
        await batcher.start()
        await batcher.call(warm_up)
        yield
        await batcher.stop()

    app = FastAPI(title="trie-judge decisions", version="0.1", lifespan=lifespan)
    stats: dict = {}
    app.state.batcher = batcher
    app.state.decider = decider
    install_handlers(app)

    def check_model(model: str) -> None:
        if model not in accepted:
            raise ApiError(404, f"model {model!r} is not served here; use one of {sorted(accepted)} "
                                f"(GET /v1/models lists them).")

    async def answer(state, questions):
        n_q = len(questions)
        t0 = time.perf_counter()
        try:
            res = await batcher.submit((state, questions), n_q)
        except Overloaded as e:
            raise ApiError(429, f"the server is busy ({e}); retry after a second.", headers={"Retry-After": "1"}) from None
        except ShuttingDown as e:
            raise ApiError(503, f"{e}; retry on another replica or after restart.", headers={"Retry-After": "1"}) from None
        except (DecisionError, LabelError) as e:  # the engine refused an option: the request's fault
            raise _Invalid(str(e)) from None
        res["total_ms"] = (time.perf_counter() - t0) * 1000
        return res

    def extensions(res) -> dict:
        if not config.extensions:
            return {}
        return {"x_calibrated": decider.calibration_ is not None, "x_batch_requests": res["batch_requests"],
                "x_batch_input_tokens": res["batch_tokens"], "x_compute_ms": round(res["compute_ms"], 3),
                "x_total_ms": round(res["total_ms"], 3)}

    @app.post("/v1/systemone")
    async def systemone(req: SystemOneRequest):
        check_model(req.model)
        try:
            questions = to_questions(req)
        except DecisionError as e:
            return validation_response([{"loc": ["body", "questions"], "msg": str(e), "type": "value_error"}])
        try:
            res = await answer(req.state, questions)
        except _Invalid as e:
            return validation_response([{"loc": ["body", "questions"], "msg": str(e), "type": "value_error"}])
        body = {"model": served,
                "answers": {qid: a.to_wire(extensions=config.extensions) for qid, a in res["answers"].items()},
                "usage": {"input_tokens": int(res["input_tokens"]), "output_tokens": 0}, **extensions(res)}
        return JSONResponse(body)

    @app.post("/v1/decisions")
    async def decisions(req: DecisionsRequest):
        check_model(req.model)
        try:
            questions = decisions_to_questions(req)
            state = render_input(req.input)
        except DecisionError as e:
            return validation_response([{"loc": ["body", "questions"], "msg": str(e), "type": "value_error"}])
        try:
            res = await answer(state, questions)
        except _Invalid as e:
            return validation_response([{"loc": ["body", "questions"], "msg": str(e), "type": "value_error"}])
        out = []
        for i, q in enumerate(req.questions):
            a = res["answers"][str(i)]
            if q.type == "predicate":
                out.append({"type": "predicate", "name": q.name, "probability": a.noul})
            elif q.type == "choice":
                values = [c.value for c in q.choices]
                probs = list(a.probabilities.values())
                best = values[list(a.probabilities).index(a.choice)]
                out.append({"type": "choice", "name": q.name, "choice": best, "confidence": a.confidence,
                            "probabilities": [{"value": v, "probability": p} for v, p in zip(values, probs)]})
            else:
                out.append({"type": "score", "name": q.name, "score": a.score, "confidence": a.confidence,
                            "probabilities": [{"value": j, "label": lv.label, "probability": a.probabilities[str(j)]}
                                              for j, lv in enumerate(q.levels)]})
        n = int(res["input_tokens"])
        usage = {"input_tokens": n, "input_tokens_details": {"cache_write_tokens": 0, "cached_tokens": 0},
                 "output_tokens": 0, "output_tokens_details": {"reasoning_tokens": 0}, "total_tokens": n}
        return JSONResponse({"model": served, "answers": out, "usage": usage,
                             **extensions(res)})

    @app.get("/v1/models")
    async def models():
        cal = decider.calibration_
        state = "calibrated (decision profile loaded)" if cal is not None else \
            "uncalibrated (no decision calibration profile; run `judge calibrate-decisions`)"
        desc = f"{decider.model_name} through trie-judge: exact option log-probabilities; {state}."
        extra = {"x_calibrated": cal is not None,
                 "x_calibration": None if cal is None else {"temperature": cal.temperature, **cal.meta}}
        entries = [{"name": served, "description": desc, "release_date": RELEASE_DATE, **extra}]
        entries += [{"name": a, "description": f"Alias of {served}. {desc}", "release_date": RELEASE_DATE, **extra}
                    for a in ALIASES]
        return {"models": entries}

    @app.get("/healthz")
    async def healthz():
        return {"status": "ok", "waiting": batcher.waiting, "batches": batcher.batches_, "jobs": batcher.jobs_, **stats,
                "time": _dt.datetime.now(_dt.timezone.utc).isoformat()}

    app.add_middleware(_Gate, api_key=config.api_key, max_body_bytes=config.max_body_bytes, stats=stats)
    return app


class _Invalid(Exception):
    pass
