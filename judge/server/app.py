"""The ASGI app: routes, the auth and body gate, admission, the micro-batched scoring worker.

Routes: ``POST /v1/systemone``, ``POST /v1/decisions``, ``GET /v1/models``,
``GET /healthz``, and with a saved classifier ``POST /v1/classify`` (`judge.server.classify`). Every ``/v1/`` request passes the `_Gate` first: it gets a request id
(the ``x-request-id`` header of its response), the bearer key is checked when one is
configured (any key, or none, is accepted otherwise), and the body is read bounded by
``max_body_bytes`` whether it is compressed or not (413 naming the limit and the size);
a ``Content-Encoding: zstd`` (or gzip/deflate) body is decoded, bounded the same way.

Each request is then admitted in a thread pool apart from the scoring thread
(`judge.server.admission`: parsed, validated, limited, planned and lowered to tokens once
(`Decider.plan_request`), priced on those tokens; 422 / 413 before anything is queued), cut
into jobs of at most ``max_batch_tokens`` tokens, each carrying its plan, and queued on a
`MicroBatcher`, which serves requests in turn (waiting ``max_wait_ms`` for company only while
another request is being admitted); one worker thread answers each batch with one
`Decider.answer` call (one scoring call over the plans' items, which it neither plans nor
tokenizes again). A client that disconnects has its waiting jobs dropped. An exception inside
scoring that is not the request's fault answers 500 with the request id (logged with
its traceback on ``judge.server``) and the server keeps serving; SIGTERM stops taking requests
and answers the ones in flight, or refuses them with 503 past the drain time (`judge.server.shutdown`).

Memory: one scoring call at a time, each bounded by the engine's settings
(`judge.engine.passes.memory_bound`); admission holds at most ``admission_threads``
bodies of at most ``max_body_bytes`` at once.

What it deliberately does not do: parse or write the wire form (`judge.server.contract`,
`judge.server.wire`), build
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

import asyncio
import contextlib
import datetime as _dt
import hmac
import io
import json
import logging
import resource
import time
import uuid
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse, Response

from judge._errors import LabelError
from judge.decisions import Decider, DecisionError, YesNo
from judge.engine.passes import DEFAULT_MAX_BATCH_TOKENS
from judge.server.admission import Admission, Invalid
from judge.server.batching import MicroBatcher, Overloaded, ShuttingDown
from judge.server.counters import Counters
from judge.server.errors import ApiError, error_body, install_handlers, validation_response
from judge.server.routes import ROUTES, Route, Served

__all__ = ["ServerConfig", "create_app", "memory_bound"]

ALIASES = ("jev-latest",)
_LOG = logging.getLogger("judge.server")
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
        How long a request waits for others to share its forward pass (only while another
        request is being admitted: a lone request runs at once).
    max_batch_questions : int
        Questions merged into one scoring call.
    max_queue : int
        Requests allowed to wait; more get 429.
    max_request_tokens, max_state_tokens : int
        Token budgets (the contract's 64k per request, 32k for the state plus
        the longest question); over budget gets 413. A question's deepest token
        must also lie within the model's context (413 otherwise).
    max_body_bytes : int
        Largest request body, compressed or not, and largest decoded body (413).
    max_questions : int
        Questions per request (413 over it).
    max_options : int
        Options per choice question (413 over it); at least 255, the contract's floor.
    max_batch_tokens : int
        Tokens per scoring call: a larger request is cut into jobs of at most this
        many tokens, served in turn with other requests' jobs.
    admission_threads : int
        Threads that parse, validate and price requests (apart from the scoring thread).
    extensions : bool
        Add ``x_`` fields (option mass, batch size, timings) to responses.
    guard : bool
        Guard every request that does not say ``"x_guard": false`` (`judge.decisions.guard`;
        ``judge serve --guard``); off: only requests with ``"x_guard": true`` or a question's
        ``x_cautious`` are guarded. Guarded answers carry ``x_flags`` and ``x_guard``; a
        ``/v1/systemone`` request's ``x_trusted`` names the state's fields the guard leaves alone.

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
    max_body_bytes: int = 2 * 1024 * 1024
    max_questions: int = 1024
    max_options: int = 10_000
    max_batch_tokens: int = DEFAULT_MAX_BATCH_TOKENS
    admission_threads: int = 2
    extensions: bool = True
    guard: bool = False

    def __post_init__(self):
        for name in ("max_batch_questions", "max_queue", "max_request_tokens", "max_state_tokens", "max_body_bytes",
                     "max_questions", "max_batch_tokens", "admission_threads"):
            v = getattr(self, name)
            if not isinstance(v, int) or isinstance(v, bool) or v < 1:
                raise ValueError(f"ServerConfig({name}={v!r}): expected a positive int.")
        if not isinstance(self.max_options, int) or self.max_options < 255:
            raise ValueError(f"ServerConfig(max_options={self.max_options!r}): the contract requires at least 255 "
                             f"options per question to be accepted; use 255 or more.")
        if self.max_wait_ms < 0:
            raise ValueError(f"ServerConfig(max_wait_ms={self.max_wait_ms!r}): expected >= 0.")


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
            out = zstd.ZstdDecompressor().decompress(body, max_length=limit + 1)
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
        raise ApiError(413, f"the decoded request body is over {limit} bytes (max_body_bytes; {len(body)} bytes "
                            f"compressed); send fewer or shorter questions per request.")
    return out


class _Gate:
    """ASGI middleware for ``/v1/`` routes: a request id, bearer auth, the body read bounded (and decoded)."""

    def __init__(self, app, *, api_key: str | None, max_body_bytes: int, counters: Counters | None = None):
        self.app, self.api_key, self.limit = app, api_key, max_body_bytes
        self.counters = counters if counters is not None else Counters()

    async def _reply(self, send, status: int, body: dict, headers=()):
        raw = json.dumps(body).encode()
        await send({"type": "http.response.start", "status": status,
                    "headers": [(b"content-type", b"application/json"), (b"content-length", str(len(raw)).encode()),
                                *headers]})
        await send({"type": "http.response.body", "body": raw})

    def _too_large(self, size: int, exact: bool, compressed: bool) -> dict:
        what = "compressed request body" if compressed else "request body"
        got = f"{size} bytes" if exact else f"more than {size} bytes"
        return error_body(413, f"the {what} is {got}, over this server's limit of {self.limit} bytes "
                               f"(max_body_bytes); send fewer or shorter questions per request, or split it.")

    async def _read(self, receive, declared: int | None):
        """The whole body, or (None, size, exact) when it is over the limit (read and dropped, up to a bound)."""
        chunks, total, more, over = [], 0, True, declared is not None and declared > self.limit
        while more:
            msg = await receive()
            if msg["type"] == "http.disconnect":
                return None, -1, False
            part = msg.get("body", b"")
            total += len(part)
            more = msg.get("more_body", False)
            if total > self.limit:
                over, chunks = True, []
                if total > 16 * self.limit:  # stop draining a huge body: answer and close
                    return (None, declared, True) if declared is not None and declared >= total else \
                        (None, total, False)
            elif not over:
                chunks.append(part)
        if over:
            return None, declared if declared is not None and declared >= total else total, True
        return b"".join(chunks), total, True

    async def __call__(self, scope, receive, send):
        if scope["type"] != "http" or not scope["path"].startswith("/v1/"):
            return await self.app(scope, receive, send)
        rid = uuid.uuid4().hex[:16]
        scope.setdefault("state", {})["request_id"] = rid
        tag = (b"x-request-id", rid.encode())

        async def send_id(msg):
            if msg["type"] == "http.response.start":
                msg = dict(msg, headers=[*msg.get("headers", []), tag])
            await send(msg)

        headers = {k.lower(): v for k, v in scope["headers"]}
        if self.api_key is not None:
            auth = headers.get(b"authorization", b"").decode("latin-1")
            if not auth:
                return await self._reply(send_id, 401, error_body(401, "Missing API key: send the header "
                                                                       "`Authorization: Bearer <key>`."),
                                         [(b"www-authenticate", b"Bearer")])
            scheme, _, key = auth.partition(" ")
            if scheme.lower() != "bearer" or not hmac.compare_digest(key.strip().encode(), self.api_key.encode()):
                return await self._reply(send_id, 401, error_body(401, "Invalid API key: the key in `Authorization: "
                                                                       "Bearer <key>` is not this server's key."),
                                         [(b"www-authenticate", b"Bearer")])
        if scope.get("method") not in ("POST", "PUT", "PATCH"):
            return await self.app(scope, receive, send_id)
        enc = headers.get(b"content-encoding", b"").decode("latin-1").strip().lower()
        declared = headers.get(b"content-length", b"").decode("latin-1").strip()
        body, size, exact = await self._read(receive, int(declared) if declared.isdigit() else None)
        if body is None:
            if size < 0:  # the client went away while sending
                return
            self.counters.add("too_large")
            return await self._reply(send_id, 413, self._too_large(size, exact, bool(enc) and enc != "identity"),
                                     [(b"connection", b"close")])
        if enc and enc != "identity":
            try:
                body = _decompress(enc, body, self.limit)
            except ApiError as e:
                return await self._reply(send_id, e.status, error_body(e.status, e.message))
            except Exception as e:  # noqa: BLE001 - a corrupt body is the client's error
                return await self._reply(send_id, 400, error_body(400, f"the request body is not valid {enc} data "
                                                                       f"({type(e).__name__}: {e}); compress the JSON "
                                                                       f"body, or drop the Content-Encoding header."))
            self.counters.add(f"decoded_{enc}")
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

        return await self.app(scope, receive2, send_id)


# ----------------------------------------------------------------------------- app

#: Python objects of one request under admission, per byte of its body (measured: 8x for
#: a body of 2,000-option questions, the most objects per byte; doubled).
ADMISSION_BYTES_PER_BODY_BYTE = 16


def memory_bound(decider: Decider, config: ServerConfig) -> dict:
    """The documented peak memory of serving any request above an idle server, in bytes.

    ``engine``: one scoring call at a time, bounded by the engine's settings
    (`judge.engine.passes.memory_bound` of its ``max_batch_tokens`` and ``max_batch_logits``);
    ``admission``: at most ``admission_threads`` bodies of at most ``max_body_bytes`` being
    parsed and priced, ``ADMISSION_BYTES_PER_BODY_BYTE`` bytes of Python objects per body byte.
    ``/healthz`` reports it (``memory_bound_bytes``); a test checks a maximal request under it.

    Returns
    -------
    dict
        ``{"engine": dict, "admission": int, "total": int}``.

    Examples
    --------
    >>> from judge.testing import tiny_pair
    >>> b = memory_bound(Decider(*tiny_pair()), ServerConfig())
    >>> b["total"] == b["engine"]["total"] + b["admission"], b["admission"] == 2 * 16 * 2 * 2**20
    (True, True)
    """
    from judge.engine.passes import default_max_logits
    from judge.engine.passes import memory_bound as engine_bound
    from judge.engine.protocol import LocalModel, MemoryBounded

    scorer = decider.scorer_
    scorer.setup()
    if isinstance(scorer, MemoryBounded):
        engine = scorer.memory_bound()
    elif isinstance(scorer, LocalModel):  # a scorer that does not say: the engine's formula at its defaults
        cfg = getattr(scorer.model_.config, "text_config", None) or scorer.model_.config
        engine = engine_bound(scorer.model_, max_batch_tokens=DEFAULT_MAX_BATCH_TOKENS, max_batch_logits=default_max_logits(cfg.vocab_size),
                              dtype_bytes=next(scorer.model_.parameters()).dtype.itemsize)
    else:
        raise TypeError(f"The server sizes its memory bound on its scorer, but a {type(scorer).__name__} declares "
                        f"neither MemoryBounded nor LocalModel (judge.engine.protocol); give the Decider an Engine.")
    admission = config.admission_threads * ADMISSION_BYTES_PER_BODY_BYTE * config.max_body_bytes
    return {"engine": engine, "admission": admission, "total": engine["total"] + admission}


def _served_name(decider: Decider, config: ServerConfig) -> str:
    if config.served_name:
        return config.served_name
    name = decider.model_name.rstrip("/").split("/")[-1]
    return f"trie-judge/{name}"


def create_app(decider: Decider | None = None, config: ServerConfig | None = None, *, classifier=None,
               classifier_name: str = "classifier") -> FastAPI:
    """The FastAPI app serving ``decider`` (and, given one, a saved classifier on ``/v1/classify``).

    Parameters
    ----------
    decider : Decider, optional
        Default: ``Decider()`` (the packaged model, loaded at startup).
    config : ServerConfig, optional
    classifier : judge.Classifier, optional
        Served on ``POST /v1/classify`` (`judge.server.classify`), scored on the same worker thread.
    classifier_name : str
        Its name in ``/v1/classify`` responses.

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

    def run_batch(payloads):
        t0 = time.perf_counter()
        answers = decider.answer(payloads)
        ms = (time.perf_counter() - t0) * 1000
        batch_tokens = int(decider.last_usage_.get("input_tokens", 0))
        counters.add("scoring_calls")
        counters.add("scored_tokens", batch_tokens)
        counters.add("scoring_s", ms / 1000)
        return [{"answers": a, "batch_tokens": batch_tokens, "batch_requests": len(payloads), "compute_ms": ms}
                for a in answers]

    counters = Counters()  # every count /healthz reports, and the requests under admission
    batcher = MicroBatcher(run_batch, max_wait_s=config.max_wait_ms / 1000, max_questions=config.max_batch_questions,
                           max_queue=config.max_queue, max_tokens=config.max_batch_tokens,
                           expect=lambda: counters.get("admitting") > 0)

    def check_model(model: str) -> None:
        if model not in accepted:
            raise ApiError(404, f"model {model!r} is not served here; use one of {sorted(accepted)} "
                                f"(GET /v1/models lists them).")

    admission = Admission(decider, check_model, max_questions=config.max_questions, max_options=config.max_options,
                          max_request_tokens=config.max_request_tokens, max_state_tokens=config.max_state_tokens,
                          max_job_tokens=config.max_batch_tokens, max_job_questions=config.max_batch_questions,
                          guard=config.guard)
    admit_pool = ThreadPoolExecutor(config.admission_threads, thread_name_prefix="judge-admit")
    bound: dict = {"total": None}

    def admit(body, content_type, route):  # past a shutdown's drain time, refused before it is parsed
        batcher.check_open()
        return admission.admit(body, content_type, route)

    def warm_up():
        decider.ask("warm up", {"q": YesNo("Is this a test?")})

    @contextlib.asynccontextmanager
    async def lifespan(app):
        await batcher.start()
        await batcher.call(warm_up)
        with contextlib.suppress(AttributeError):  # a scorer without a transformers model: no formula
            bound.update(memory_bound(decider, config))
        yield
        await batcher.stop()
        admit_pool.shutdown(wait=False, cancel_futures=True)

    app = FastAPI(title="trie-judge decisions", version="0.1", lifespan=lifespan)
    app.state.batcher = batcher
    app.state.decider = decider
    app.state.admission = admission
    install_handlers(app)

    async def until_disconnect(receive):
        while (await receive())["type"] != "http.disconnect":
            pass

    async def answer(request: Request, admitted) -> Served:
        """Queue the request's jobs; drop them if the client goes away first."""
        jobs = admitted.work
        t0 = time.perf_counter()
        work = asyncio.ensure_future(batcher.submit_many([j[0] for j in jobs], [j[1] for j in jobs],
                                                         [j[2] for j in jobs]))
        gone = asyncio.ensure_future(until_disconnect(request.receive))
        try:
            await asyncio.wait({work, gone}, return_when=asyncio.FIRST_COMPLETED)
        finally:
            gone.cancel()
        if not work.done():
            work.cancel()
            counters.add("disconnected")
            raise _Gone()
        try:
            parts = work.result()
        except Overloaded as e:
            raise ApiError(429, f"the server is busy ({e}); retry after a second.", headers={"Retry-After": "1"}) from None
        except (DecisionError, LabelError) as e:  # the engine refused an option: the request's fault
            raise Invalid(str(e)) from None
        answers = {}
        for p in parts:
            answers.update(p["answers"])
        return Served({qid: answers[qid] for qid in admitted.questions}, admitted.total,
                      batch_tokens=sum(p["batch_tokens"] for p in parts),
                      batch_requests=max(p["batch_requests"] for p in parts), jobs=len(parts),
                      compute_ms=sum(p["compute_ms"] for p in parts), total_ms=(time.perf_counter() - t0) * 1000)

    async def handle(request: Request, route: Route):
        """Admit (off the scoring thread), answer, render; every failure in the contract's shapes."""
        rid = getattr(request.state, "request_id", None) or uuid.uuid4().hex[:16]
        counters.add("in_flight")  # admitted, queued or being scored: what a shutdown must answer or refuse
        try:
            loop = asyncio.get_running_loop()
            body = await request.body()
            t0 = time.perf_counter()
            with counters.during("admitting"):
                req, admitted = await loop.run_in_executor(admit_pool, admit, body,
                                                           request.headers.get("content-type"), route)
            admit_ms = (time.perf_counter() - t0) * 1000
            served_ = await answer(request, admitted)
            served_.admit_ms = admit_ms
            ext = {"x_calibrated": decider.calibration_ is not None, **served_.extensions()} \
                if config.extensions else None
            return JSONResponse(route.render(req, served_, model=served, extensions=ext))
        except Invalid as e:
            return validation_response([{"loc": ["body", "questions"], "msg": str(e), "type": "value_error"}])
        except _Gone:
            return Response(status_code=499)
        except ShuttingDown as e:
            raise ApiError(503, f"{e}; retry on another replica or after restart.", headers={"Retry-After": "1"}) from None
        except (ApiError, RequestValidationError):
            raise
        except Exception as e:  # noqa: BLE001 - a fault of this server, not of the request
            counters.add("server_errors")
            _LOG.exception("request %s failed inside the server", rid)
            raise ApiError(500, f"the server failed on this request ({type(e).__name__}); this is a fault of the "
                                f"server, not of the request, and it keeps serving. Request id {rid} (logged with "
                                f"the traceback): retry, and report the id if it happens again.",
                           error_type="api_error") from None
        finally:
            counters.add("in_flight", -1)

    def route_endpoint(route: Route):
        async def endpoint(request: Request):
            return await handle(request, route)
        return endpoint

    for route in ROUTES:  # each route's parse and render: judge.server.routes
        app.add_api_route(route.path, route_endpoint(route), methods=["POST"], name=route.name)

    @app.get("/v1/models")
    async def models():
        cal = decider.calibration_
        how = decider.describe()
        state = "calibrated (decision profile loaded)" if cal is not None else \
            "uncalibrated (no decision calibration profile; run `judge calibrate-decisions`)"
        b = how["bias"]  # what the Decider is set to: "contextual", "running" or None (off)
        bias = "bias correction off (no label-free prior divided out)" if not b["method"] else \
            f"label-free bias correction on ({b['method']}: {b['what']})"
        desc = (f"{decider.model_name} through trie-judge: exact log-probabilities of what each option means "
                f"(descriptions, never opaque ids); {bias}; {state}.")
        guard = "guarded by default (x_guard: false turns it off)" if config.guard else \
            "unguarded by default (x_guard: true or x_cautious guards a request)"
        desc = desc[:-1] + f"; {guard}."
        prof = decider.profile_
        if prof is not None:
            desc = desc[:-1] + f"; a fitted profile answers {len(prof.heads)} question shape(s) (x_profile)."
        extra = {"x_calibrated": cal is not None, "x_guard_default": config.guard,
                 "x_profile": None if prof is None else prof.describe(),
                 "x_calibration": None if cal is None else {"temperature": cal.temperature, **cal.meta},
                 "x_bias_correction": how["bias"], "x_prompt_version": how["prompt_version"],
                 "x_prompt_styles": how["styles"]}
        entries = [{"name": served, "description": desc, "release_date": RELEASE_DATE, **extra}]
        entries += [{"name": a, "description": f"Alias of {served}. {desc}", "release_date": RELEASE_DATE, **extra}
                    for a in ALIASES]
        return {"models": entries}

    @app.get("/healthz")
    async def healthz():
        return {"status": "ok", "waiting": batcher.waiting, "running": batcher.running, "batches": batcher.batches_,
                "jobs": batcher.jobs_, "cancelled_jobs": batcher.cancelled_, "refused_jobs": batcher.refused_, **counters.snapshot(), "rss_bytes": _rss_bytes(),
                "peak_rss_bytes": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024,
                "memory_bound_bytes": bound["total"],
                "time": _dt.datetime.now(_dt.timezone.utc).isoformat()}

    if classifier is not None:
        from judge.server.classify import add_classify_route

        add_classify_route(app, classifier, batcher, name=classifier_name, max_texts=config.max_questions,
                           extensions=config.extensions)
    app.add_middleware(_Gate, api_key=config.api_key, max_body_bytes=config.max_body_bytes, counters=counters)
    return app


class _Gone(Exception):
    """The client disconnected before its answer was ready."""


def _rss_bytes() -> int:
    try:
        with open("/proc/self/statm") as f:
            import os

            return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
    except (OSError, ValueError, IndexError):
        return -1
