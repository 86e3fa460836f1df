"""Error bodies of the contract, and the FastAPI handlers that write them.

- validation failures: 422 ``{"detail": [{"loc": ["body", ...], "msg", "type"}]}``, each
  message worded by `judge.server.contract.error_message`;
- everything else: ``{"detail": {"error_type": str, "message": str}}``
  (401 ``authentication_error``, 404 ``not_found_error``, 413
  ``request_too_large``, 415, 429 ``rate_limit_error``, 503 ``overloaded_error``,
  500 ``api_error``: a fault of the server, with the request id).

A bad request never gets a 5xx: anything the decision layer rejects
(`judge.decisions.DecisionError`) becomes a 422 with the layer's message, and every
limit is checked before scoring (413).

What it deliberately does not do: decide what is an error (the contract's models and
the routes in `judge.server.app` do), or log.
"""

from __future__ import annotations

import json

from fastapi import Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from starlette.exceptions import HTTPException as StarletteHTTPException

from judge.server.contract import error_message

__all__ = ["ApiError", "install_handlers", "error_body", "validation_response"]

_TYPES = {400: "invalid_request_error", 401: "authentication_error", 403: "permission_error",
          404: "not_found_error", 405: "invalid_request_error", 413: "request_too_large",
          415: "invalid_request_error", 422: "invalid_request_error", 429: "rate_limit_error",
          500: "api_error", 503: "overloaded_error", 529: "overloaded_error"}


def error_body(status: int, message: str, error_type: str | None = None) -> dict:
    """The ``{"detail": {"error_type", "message"}}`` body of a non-validation error.

    Parameters
    ----------
    status : int
        The HTTP status; it names the error type unless ``error_type`` is given.
    message : str
    error_type : str, optional

    Returns
    -------
    dict

    Examples
    --------
    >>> error_body(429, "busy; retry after a second")
    {'detail': {'error_type': 'rate_limit_error', 'message': 'busy; retry after a second'}}
    """
    return {"detail": {"error_type": error_type or _TYPES.get(status, "api_error"), "message": message}}


class ApiError(Exception):
    """An error answered as ``{"detail": {"error_type", "message"}}`` with a status.

    Parameters
    ----------
    status : int
    message : str
    error_type : str, optional
        Default: from the status (see `error_body`).
    headers : dict, optional
        Response headers (e.g. ``{"Retry-After": "1"}``).

    Examples
    --------
    >>> e = ApiError(413, "the request is over budget; send fewer questions")
    >>> e.status, str(e)
    (413, 'the request is over budget; send fewer questions')
    """

    def __init__(self, status: int, message: str, error_type: str | None = None, headers: dict | None = None):
        super().__init__(message)
        self.status, self.message, self.error_type, self.headers = status, message, error_type, headers


def validation_response(errors: list[dict]) -> JSONResponse:
    """A 422 response with ``{"detail": errors}`` (each ``{"loc", "msg", "type"}``).

    Examples
    --------
    >>> r = validation_response([{"loc": ["body", "questions"], "msg": "empty", "type": "value_error"}])
    >>> r.status_code, r.body
    (422, b'{"detail":[{"loc":["body","questions"],"msg":"empty","type":"value_error"}]}')
    """
    return JSONResponse({"detail": errors}, status_code=422)


def _clean(err: dict) -> dict:
    loc = list(err.get("loc", ["body"]))
    if not loc or loc[0] != "body":
        loc = ["body", *loc]
    out = {"loc": loc, "msg": error_message({**err, "loc": loc}), "type": err.get("type", "value_error")}
    if "input" in err and len(repr(err["input"])) <= 200:
        try:
            json.dumps(err["input"])
            out["input"] = err["input"]
        except (TypeError, ValueError):
            pass
    return out


def install_handlers(app) -> None:
    """Answer validation errors, `ApiError` and routing errors (404, 405) in the contract's shapes.

    Examples
    --------
    >>> from fastapi import FastAPI
    >>> from fastapi.testclient import TestClient
    >>> app = FastAPI()
    >>> install_handlers(app)
    >>> r = TestClient(app).get("/v1/nothing")
    >>> r.status_code, r.json()["detail"]["error_type"]
    (404, 'not_found_error')
    """
    @app.exception_handler(RequestValidationError)
    async def _validation(request: Request, exc: RequestValidationError):
        return validation_response([_clean(e) for e in exc.errors()])

    @app.exception_handler(ApiError)
    async def _api(request: Request, exc: ApiError):
        return JSONResponse(error_body(exc.status, exc.message, exc.error_type), status_code=exc.status,
                            headers=exc.headers)

    @app.exception_handler(StarletteHTTPException)
    async def _http(request: Request, exc: StarletteHTTPException):
        detail = exc.detail
        if isinstance(detail, str):
            if exc.status_code == 404:
                detail = f"{request.method} {request.url.path} does not exist; the routes are POST /v1/systemone, " \
                         f"POST /v1/decisions and GET /v1/models"
            body = error_body(exc.status_code, detail)
        else:
            body = {"detail": detail}
        return JSONResponse(body, status_code=exc.status_code, headers=getattr(exc, "headers", None))
