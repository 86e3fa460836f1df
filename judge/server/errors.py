"""Error bodies of the contract.

- validation failures: 422 ``{"detail": [{"loc": ["body", ...], "msg", "type"}]}``;
- everything else: ``{"detail": {"error_type": str, "message": str}}``
  (401 ``authentication_error``, 404 ``not_found_error``, 413
  ``request_too_large``, 415, 429 ``rate_limit_error``, 503 ``overloaded_error``).

A bad request never gets a 5xx: anything the decision layer rejects
(`judge.decisions.DecisionError`) becomes a 422 with the layer's message.
"""

from __future__ import annotations

from fastapi import Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from starlette.exceptions import HTTPException as StarletteHTTPException

__all__ = ["ApiError", "install_handlers", "error_body"]

_TYPES = {400: "invalid_request_error", 401: "authentication_error", 403: "permission_error",
          404: "not_found_error", 405: "invalid_request_error", 413: "request_too_large",
          415: "invalid_request_error", 422: "invalid_request_error", 429: "rate_limit_error",
          503: "overloaded_error", 529: "overloaded_error"}


def error_body(status: int, message: str, error_type: str | None = None) -> dict:
    return {"detail": {"error_type": error_type or _TYPES.get(status, "api_error"), "message": message}}


class ApiError(Exception):
    """An error answered as ``{"detail": {"error_type", "message"}}`` with a status."""

    def __init__(self, status: int, message: str, error_type: str | None = None, headers: dict | None = None):
        super().__init__(message)
        self.status, self.message, self.error_type, self.headers = status, message, error_type, headers


def validation_response(errors: list[dict]) -> JSONResponse:
    return JSONResponse({"detail": errors}, status_code=422)


def _clean(err: dict) -> dict:
    msg = err.get("msg", "invalid value")
    typ = err.get("type", "value_error")
    loc = list(err.get("loc", ["body"]))
    if not loc or loc[0] != "body":
        loc = ["body", *loc]
    if typ == "union_tag_invalid":
        ctx = err.get("ctx") or {}
        msg = (f"question type {ctx.get('tag')!r} is not supported; use one of {ctx.get('expected_tags')} "
               f"(box questions need a vision model)")
    elif typ == "union_tag_not_found":
        msg = "the question has no \"type\"; add \"type\": \"noul\", \"choice\" or \"score\""
    elif typ == "json_invalid":
        ctx = err.get("ctx") or {}
        msg = f"the request body is not valid JSON ({ctx.get('error', 'decode error')}); send one JSON object"
    elif typ == "missing":
        msg = f"field {loc[-1]!r} is required"
    elif typ == "value_error" and msg.startswith("Value error, "):
        msg = msg[len("Value error, "):]
    out = {"loc": loc, "msg": msg, "type": typ}
    if "input" in err and len(repr(err["input"])) <= 200:
        try:
            import json

            json.dumps(err["input"])
            out["input"] = err["input"]
        except (TypeError, ValueError):
            pass
    return out


def install_handlers(app) -> None:
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
