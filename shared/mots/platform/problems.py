"""Errors in one shape on every API: RFC 9457 problem details (``application/problem+json``).

Every refusal a service answers, whatever its status (401, 403, 404, 409, 402, 422, 429, …), has
the body::

    {"type": "urn:mots:problem:invalid-input", "code": "invalid-input",
     "title": "Unprocessable Content", "status": 422,
     "detail": "body.amount: Decimal input should have no more than 6 decimal places",
     "request_id": "5f0c2b6e9d8a4c1f8e7d6c5b4a392817",
     "errors": [{"field": "body.amount", "loc": ["body", "amount"],
                 "msg": "Decimal input should have no more than 6 decimal places",
                 "type": "decimal_max_places"}]}

``type`` is the problem type's stable URI and ``code`` its stable code
(:mod:`mots.platform.problem_types`, documented in docs/errors.md), ``title`` is the status's
phrase, ``detail`` names the field and the rule, ``request_id`` is the ``X-Request-ID`` answered
with it (:mod:`mots.platform.request_id`), and ``errors`` (only for a validation failure) lists
each field's problem. The input is never echoed: an error body stays ASCII JSON whatever the
request held (FastAPI's default handler echoed the input and failed to encode ``NaN`` or a lone
surrogate, answering 500).

:class:`StrictJSONMiddleware` refuses, before any route runs (and before any token is checked),
a body of any content type over :data:`MAX_BODY_BYTES` (413: at once from ``Content-Length``,
else as soon as a chunked body streams past it), and a JSON body that Python's parser would
accept but no client may send: nesting deeper than :data:`MAX_JSON_DEPTH` (found by a scan before
parsing, so the parser never recurses), a key given twice in one object (the last would win: a
deposit's ``amount``), non-finite numbers (``NaN``, ``Infinity``, ``1e400``), integers of more
than :data:`MAX_INT_DIGITS` digits, unpaired surrogates and NUL characters in strings
(PostgreSQL cannot store them).
:func:`install_problem_handlers` answers ``HTTPException``, validation errors and anything
unexpected in the shape above; :func:`mots.platform.web.service_app` installs both on every API.
"""

from __future__ import annotations

import json
import logging
import re
from collections.abc import Mapping, Sequence
from http import HTTPStatus
from typing import Any

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError, ResponseValidationError
from pydantic import BaseModel, ConfigDict, Field
from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.responses import Response

from mots.platform import request_id
from mots.platform.money import plain_rule
from mots.platform.problem_types import TYPE_PREFIX, code_for

log = logging.getLogger(__name__)

PROBLEM_JSON = "application/problem+json"
MAX_BODY_BYTES = 1 << 20
"""Largest request body an API reads (1 MiB; a scenario of the most types is a few KiB)."""
MAX_INT_DIGITS = 40
"""Longest integer literal a body may hold (every integer field is bounded far below 10⁴⁰)."""
MAX_JSON_DEPTH = 32
"""Deepest nesting of arrays and objects a JSON body may have (the deepest schema nests 4)."""


class FieldProblem(BaseModel):
    """One field's problem in a refused request: where, what rule, and the rule's code."""

    model_config = ConfigDict(
        json_schema_extra={
            "examples": [
                {
                    "field": "body.amount",
                    "loc": ["body", "amount"],
                    "msg": "Decimal input should have no more than 6 decimal places",
                    "type": "decimal_max_places",
                }
            ]
        }
    )

    field: str = Field(..., description="dotted location, e.g. body.amount or query.limit")
    loc: list[str | int] = Field(..., description="the location as a list")
    msg: str = Field(..., description="the rule the value broke")
    type: str = Field(..., description="a machine-readable code of the rule (pydantic's)")


class Problem(BaseModel):
    """RFC 9457 problem details, the body of every error answer."""

    model_config = ConfigDict(
        json_schema_extra={
            "examples": [
                {
                    "type": f"{TYPE_PREFIX}insufficient-funds",
                    "code": "insufficient-funds",
                    "title": "Payment Required",
                    "status": 402,
                    "detail": "balance: 0.500000 is below the price 1.200000",
                    "request_id": "5f0c2b6e9d8a4c1f8e7d6c5b4a392817",
                },
                {
                    "type": f"{TYPE_PREFIX}invalid-input",
                    "code": "invalid-input",
                    "title": "Unprocessable Content",
                    "status": 422,
                    "detail": "body.amount: Decimal input should have no more than 6 decimal places",
                    "errors": [
                        {
                            "field": "body.amount",
                            "loc": ["body", "amount"],
                            "msg": "Decimal input should have no more than 6 decimal places",
                            "type": "decimal_max_places",
                        }
                    ],
                },
            ]
        }
    )

    type: str = Field(..., description="the problem type's stable URI (docs/errors.md)")
    code: str = Field(..., description="the problem type's stable code, e.g. token-expired")
    title: str = Field(..., description="the HTTP status phrase")
    status: int = Field(..., description="the HTTP status code")
    detail: str = Field(..., description="what was wrong: the field and the rule")
    request_id: str | None = Field(
        None, description="the request's X-Request-ID, also in the service's log line"
    )
    errors: list[FieldProblem] | None = Field(
        None, description="for a validation failure: each field's problem"
    )


PROBLEM_RESPONSES: dict[int | str, dict[str, Any]] = {
    "4XX": {"model": Problem, "description": "refused: the detail names the field and the rule"},
}
"""The app-wide ``responses=`` entry: any refusal has the problem body (statuses a route answers
are documented on the route, see :func:`problems`)."""

PROBLEM_STATUSES: dict[int, str] = {
    401: "no bearer token, or one the service does not know (WWW-Authenticate: Bearer)",
    402: "the wallet's balance is below the price",
    403: "the token is known but not entitled to this (a client's token on an operator route; a "
    "pending, revoked or departed client)",
    404: "the named resource does not exist",
    409: "the resource is not in a state that allows this",
    410: "the resource existed but is no longer available",
    413: f"the body (of any content type) is larger than {MAX_BODY_BYTES} bytes",
    422: "a field or parameter broke a rule; `errors` lists each field",
    429: "too many requests; retry after the Retry-After header's seconds",
    503: "a dependency is briefly unavailable; the request may be retried",
}
"""What each refusal status means on every API (the default description of :func:`problems`)."""


def problems(*statuses: int) -> dict[int | str, dict[str, Any]]:
    """A route's ``responses=`` entry: each status documented with the problem+json body."""
    return {code: {"model": Problem, "description": PROBLEM_STATUSES[code]} for code in statuses}


def problem(code: int, description: str) -> dict[int | str, dict[str, Any]]:
    """One status with the route's own description of when it is answered."""
    return {code: {"model": Problem, "description": description}}


def complete_problem_docs(openapi: dict[str, Any]) -> dict[str, Any]:
    """Document the refusals every route can give, in place: 401 and 403 where it takes a token,
    422 where it takes parameters or a body, 413 where it takes a body; a refusal a route names
    without words gets this module's description of its status; and every refusal's body is
    ``application/problem+json`` (FastAPI lists a ``responses=`` model as ``application/json``)."""
    ref = {"$ref": "#/components/schemas/Problem"}
    for item in openapi.get("paths", {}).values():
        for op in item.values():
            if not isinstance(op, dict) or "responses" not in op:
                continue
            implied = [401, 403] if op.get("security") else []
            implied += [422] if op.get("parameters") or op.get("requestBody") else []
            implied += [413] if op.get("requestBody") else []
            for code in implied:
                op["responses"].setdefault(str(code), {"description": PROBLEM_STATUSES[code]})
            for code, response in op["responses"].items():
                if code[0] in "45":
                    response["content"] = {PROBLEM_JSON: {"schema": ref}}
                    phrase = _title(int(code)) if code.isdigit() else None
                    if response.get("description") in (None, "", phrase):
                        response["description"] = PROBLEM_STATUSES.get(int(code), phrase)
    for schema in openapi.get("components", {}).get("schemas", {}).values():
        _state_string_rule(schema)
    return openapi


JSON_STRING_PATTERN = r"^[^\x00]*$"
"""Every JSON string a body may hold, as the OpenAPI documents state it: no NUL character
(:class:`StrictJSONMiddleware` refuses a body with one, before any route). An unpaired surrogate,
refused too, is no character of Unicode at all, so no JSON Schema string holds one to exclude (a
range of surrogates in the pattern is what Schemathesis cannot use)."""


def _state_string_rule(schema: Any) -> None:
    """Give every free string of ``schema`` (no pattern, enum, format or const of its own) and
    every free object's keys :data:`JSON_STRING_PATTERN`, in place (issue 37: a schema-valid body
    is one the middleware takes)."""
    if isinstance(schema, list):
        for item in schema:
            _state_string_rule(item)
        return
    if not isinstance(schema, dict):
        return
    if schema.get("type") == "string" and not {"pattern", "enum", "format", "const"} & set(schema):
        schema["pattern"] = JSON_STRING_PATTERN
    if schema.get("type") == "object" and schema.get("additionalProperties") not in (None, False):
        schema.setdefault("propertyNames", {"pattern": JSON_STRING_PATTERN})
    for key in ("properties", "$defs"):
        for sub in (schema.get(key) or {}).values():
            _state_string_rule(sub)
    for key in ("items", "additionalProperties", "anyOf", "oneOf", "allOf", "prefixItems", "not"):
        _state_string_rule(schema.get(key))


_RFC_9110_TITLES = {413: "Content Too Large", 422: "Unprocessable Content"}


def _title(status: int) -> str:
    if status in _RFC_9110_TITLES:
        return _RFC_9110_TITLES[status]
    try:
        return HTTPStatus(status).phrase
    except ValueError:
        return "Error"


def problem_response(
    status: int,
    detail: str,
    *,
    errors: Sequence[FieldProblem] | None = None,
    headers: Mapping[str, str] | None = None,
    code: str | None = None,
) -> Response:
    """A problem+json answer (ASCII JSON: any character of ``detail`` is escaped), with the
    problem type of ``code`` (the status's general one if None) and the request's id."""
    kind = code_for(status, code)
    rid = request_id.current()
    body: dict[str, Any] = {
        "type": kind.uri,
        "code": kind.code,
        "title": _title(status),
        "status": status,
        "detail": detail,
        "request_id": rid,
    }
    if errors is not None:
        body["errors"] = [e.model_dump() for e in errors]
    content = json.dumps(body, ensure_ascii=True, allow_nan=False).encode()
    answer = Response(content, status_code=status, media_type=PROBLEM_JSON, headers=headers)
    if rid is not None:
        answer.headers[request_id.HEADER] = rid
    return answer


def field_problems(errors: Sequence[Any]) -> list[FieldProblem]:
    """Pydantic's error list as field problems, keeping only location, message and code."""
    out = []
    for err in errors:
        loc = [x if isinstance(x, int) else str(x) for x in err.get("loc", ())]
        msg = plain_rule(str(err.get("msg", "invalid")))
        ctx = err.get("ctx") or {}
        if err.get("type") == "json_invalid" and isinstance(ctx.get("error"), str):
            msg = f"{msg}: {ctx['error']}"
        field = ".".join(str(x) for x in loc) or "body"
        out.append(FieldProblem(field=field, loc=loc, msg=msg, type=str(err.get("type", ""))))
    return out


def validation_problem(errors: Sequence[FieldProblem]) -> Response:
    """The 422 answer listing ``errors``; its detail names each field and rule."""
    detail = "; ".join(f"{e.field}: {e.msg}" for e in errors) or "the request is invalid"
    return problem_response(422, detail, errors=errors)


async def _http_exception(request: Request, exc: Exception) -> Response:
    assert isinstance(exc, StarletteHTTPException)
    detail = exc.detail if isinstance(exc.detail, str) else json.dumps(exc.detail, default=str)
    code = getattr(exc, "code", None)
    headers = exc.headers
    allowed = allowed_methods(request) if exc.status_code == 405 else []
    if allowed:  # a path outside the OpenAPI document (/healthz) keeps Starlette's Allow
        headers = {**(headers or {}), "Allow": ", ".join(allowed)}
        detail = f"method: {request.method} is not one of this path's methods ({headers['Allow']})"
    return problem_response(exc.status_code, detail, headers=headers, code=code)


_METHODS = ("get", "put", "post", "delete", "options", "head", "patch", "trace")


def allowed_methods(request: Request) -> list[str]:
    """Every method the app's OpenAPI document gives the request's path, sorted (a 405's
    ``Allow``, RFC 9110 §15.5.6). Starlette's own lists only the first route whose path matched,
    so a path served by two routes (``GET`` and ``POST /v1/clients``) advertised one method of
    two (issue 37). A path the document names literally (``/v1/clients/bulk``) is that entry's:
    a template that would read it as an id (``/v1/clients/{client_id}``) does not count there."""
    path = request.scope.get("path", "")
    literal: set[str] = set()
    templated: set[str] = set()
    for template, item in request.app.openapi().get("paths", {}).items():
        methods = {m.upper() for m in item if m in _METHODS}
        if template == path:
            literal |= methods
        elif "{" in template and re.fullmatch(_TEMPLATE.sub("[^/]+", re.escape(template)), path):
            templated |= methods
    return sorted(literal or templated)


_TEMPLATE = re.compile(r"\\\{[^/]+?\\\}")
"""A path parameter (``{client_id}``) in a template that :func:`re.escape` has escaped."""


def _not_this_path(request: Request, errors: Sequence[FieldProblem]) -> Response | None:
    """A 405 where a path parameter failed only because the path is another route's literal path
    (``DELETE /v1/clients/bulk``: ``bulk`` is no client id, the path takes ``POST`` only)."""
    if not any(e.loc[:1] == ["path"] for e in errors):
        return None
    allowed = allowed_methods(request)  # the literal route's, where one names this path
    if not allowed or request.method in allowed:
        return None
    allow = ", ".join(allowed)
    detail = f"method: {request.method} is not one of this path's methods ({allow})"
    return problem_response(405, detail, headers={"Allow": allow})


async def _validation_error(request: Request, exc: Exception) -> Response:
    assert isinstance(exc, RequestValidationError)
    errors = field_problems(exc.errors())
    return _not_this_path(request, errors) or validation_problem(errors)


async def _server_error(request: Request, exc: Exception) -> Response:
    log.error(
        "%s %s failed request_id=%s",
        request.method,
        request.url.path,
        request_id.current(),
        exc_info=exc,
    )
    return problem_response(500, "the service failed to answer; the request may be retried")


async def _database_unavailable(request: Request, exc: Exception) -> Response:
    log.warning("%s %s: the database is unavailable: %s", request.method, request.url.path, exc)
    return problem_response(
        503,
        "database: briefly unavailable (no connection could be made, or it was lost); nothing was "
        "booked, retry the request (with the same Idempotency-Key where it takes one)",
        headers={"Retry-After": "1"},
    )


def _database_outages() -> list[type[Exception]]:
    """The exceptions that mean the database could not be reached (its connection refused, the
    server's connection limit, a pool exhausted, a connection lost): a 503, not a 500."""
    out: list[type[Exception]] = []
    try:
        from sqlalchemy import exc as sa_exc

        out += [sa_exc.OperationalError, sa_exc.TimeoutError]
    except ImportError:  # pragma: no cover - the services always install SQLAlchemy
        pass
    try:
        import psycopg

        out.append(psycopg.OperationalError)
    except ImportError:  # pragma: no cover - SQLite-only installs
        pass
    return out


def install_problem_handlers(app: FastAPI) -> None:
    """Answer HTTP exceptions, validation errors and unexpected failures as problem+json, and
    refuse malformed JSON bodies (:class:`StrictJSONMiddleware`) before they reach a route; a
    database that cannot be reached answers 503 with ``Retry-After`` (the transaction rolled
    back, so the request may be repeated)."""
    app.add_exception_handler(StarletteHTTPException, _http_exception)
    app.add_exception_handler(RequestValidationError, _validation_error)
    for outage in _database_outages():
        app.add_exception_handler(outage, _database_unavailable)
    app.add_exception_handler(ResponseValidationError, _server_error)
    app.add_exception_handler(Exception, _server_error)
    app.add_middleware(StrictJSONMiddleware)
    app.add_middleware(request_id.RequestIdMiddleware)  # outermost: the id is set first


# ---------------------------------------------------------------- strict JSON bodies


class BodyRefused(ValueError):
    """A JSON body that no client may send; the message names the rule (ASCII only)."""


def _finite_float(text: str) -> float:
    value = float(text)
    if value in (float("inf"), float("-inf")):
        raise BodyRefused(
            f"the number {text[:32]} is out of range (non-finite numbers are refused)"
        )
    return value


def _bounded_int(text: str) -> int:
    if len(text.lstrip("-")) > MAX_INT_DIGITS:
        raise BodyRefused(f"an integer has more than {MAX_INT_DIGITS} digits")
    return int(text)


def _no_constant(name: str) -> Any:
    raise BodyRefused(f"{name} is not a JSON number (non-finite numbers are refused)")


def _unique_keys(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    out = dict(pairs)
    if len(out) != len(pairs):
        seen: set[str] = set()
        for key, _ in pairs:
            if key in seen:
                shown = key[:40].encode("ascii", "backslashreplace").decode()
                raise BodyRefused(f"the key {shown!r} is given twice in one object")
            seen.add(key)
    return out


_DECODER = json.JSONDecoder(
    parse_float=_finite_float,
    parse_int=_bounded_int,
    parse_constant=_no_constant,
    object_pairs_hook=_unique_keys,
)
_ESCAPES = re.compile(rb"\\u(?:d[89a-f]|0000)", re.IGNORECASE)
_STRINGS = re.compile(rb'"[^"\\]*(?:\\.[^"\\]*)*"', re.DOTALL)
_BRACKETS = re.compile(rb"[\[\]{}]")


def _check_depth(body: bytes) -> None:
    """Refuse nesting deeper than :data:`MAX_JSON_DEPTH`, scanning the bytes (strings skipped)
    before any parser recurses into them."""
    if body.count(b"[") + body.count(b"{") <= MAX_JSON_DEPTH:
        return
    depth = 0
    for match in _BRACKETS.finditer(_STRINGS.sub(b'""', body)):
        depth += 1 if match.group() in (b"[", b"{") else -1
        if depth > MAX_JSON_DEPTH:
            raise BodyRefused(f"arrays and objects nest deeper than {MAX_JSON_DEPTH} levels")


def _check_strings(value: Any) -> None:
    """Refuse unpaired surrogates and NUL in every string (keys included) of a parsed body."""
    stack = [value]
    while stack:
        v = stack.pop()
        if isinstance(v, str):
            if "\x00" in v:
                raise BodyRefused("a string holds a NUL character (\\u0000)")
            try:
                v.encode("utf-8")
            except UnicodeEncodeError:
                raise BodyRefused("a string holds an unpaired surrogate") from None
        elif isinstance(v, dict):
            stack.extend(v.keys())
            stack.extend(v.values())
        elif isinstance(v, list):
            stack.extend(v)


def strict_loads(body: bytes) -> Any:
    """Parse a JSON body as :class:`StrictJSONMiddleware` admits it; raise :class:`BodyRefused`
    (or ``ValueError`` for plain bad JSON) otherwise."""
    try:
        text = body.decode("utf-8")
    except UnicodeDecodeError:
        raise BodyRefused("the body is not UTF-8") from None
    _check_depth(body)
    value = _DECODER.decode(text)
    if _ESCAPES.search(body):  # only a \u escape makes a surrogate or a NUL
        _check_strings(value)
    return value


_BODY_METHODS = frozenset({"POST", "PUT", "PATCH", "DELETE"})


def _header(headers: Sequence[tuple[bytes, bytes]], name: bytes) -> bytes | None:
    for key, value in headers:
        if key == name:
            return value
    return None


def _is_json(headers: Sequence[tuple[bytes, bytes]]) -> bool:
    value = _header(headers, b"content-type")
    if value is None:
        return True  # FastAPI parses a body without a content type as JSON
    media = value.split(b";", 1)[0].strip().lower()
    return media == b"application/json" or media.endswith(b"+json")


def _announced_too_large(headers: Sequence[tuple[bytes, bytes]]) -> bool:
    """Whether ``Content-Length`` announces more than :data:`MAX_BODY_BYTES`."""
    value = _header(headers, b"content-length")
    return value is not None and value.strip().isdigit() and int(value) > MAX_BODY_BYTES


def _too_large() -> Response:
    return problem_response(
        413,
        f"body: larger than {MAX_BODY_BYTES} bytes (of any content type)",
        headers={"Connection": "close"},
    )


class StrictJSONMiddleware:
    """Plain ASGI middleware: any request body is refused 413 beyond :data:`MAX_BODY_BYTES`
    (from its ``Content-Length`` before a byte is read, else while it streams); a JSON body is
    read once, checked by :func:`strict_loads` and passed on unchanged (422 when refused)."""

    def __init__(self, app: Any) -> None:
        self.app = app

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        headers = scope.get("headers", ())
        if _announced_too_large(headers):
            await _too_large()(scope, receive, send)
            return
        if scope.get("method") not in _BODY_METHODS:
            await self.app(scope, receive, send)
            return
        chunks = []
        size = 0
        while True:
            message = await receive()
            if message["type"] != "http.request":  # the client went away
                await self.app(scope, _replay([message], receive), send)
                return
            chunk = message.get("body", b"")
            size += len(chunk)
            if size > MAX_BODY_BYTES:
                await _too_large()(scope, receive, send)
                return
            chunks.append(chunk)
            if not message.get("more_body", False):
                break
        body = b"".join(chunks)
        if body and _is_json(headers):
            refused = _refusal(body)
            if refused is not None:
                await refused(scope, receive, send)
                return
        replay = {"type": "http.request", "body": body, "more_body": False}
        await self.app(scope, _replay([replay], receive), send)


def _refusal(body: bytes) -> Response | None:
    """The 422 answer for a JSON body no client may send; None for one FastAPI may parse (plain
    bad JSON included: FastAPI answers it, 422 json_invalid, like any other)."""
    try:
        strict_loads(body)
    except BodyRefused as exc:
        problem = FieldProblem(field="body", loc=["body"], msg=str(exc), type="json_invalid")
        return validation_problem([problem])
    except (ValueError, RecursionError):
        pass
    return None


def _replay(messages: list[dict[str, Any]], receive: Any) -> Any:
    """A ``receive`` that first returns ``messages``, then the real ones."""
    pending = list(messages)

    async def again() -> dict[str, Any]:
        if pending:
            return pending.pop(0)
        message: dict[str, Any] = await receive()
        return message

    return again
