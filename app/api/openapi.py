"""The OpenAPI document, made to say what the API really does (schemathesis checks it).

The API is every JSON route under /api/, every CSV and Atom twin, and /healthz; HTML pages and
form posts stay out. On top of what FastAPI derives from the signatures, the document states:
- the real 422 body (app.core.errors: each error has loc, field and msg);
- 404 on routes with a path parameter (an unknown id, slug or token);
- the media types of the CSV and Atom twins;
- that no text parameter may hold a control character (app.core.security);
- the bounds and choices of the workload parameters, taken from app.fit's Workload model (the
  dependency reads them as plain values, so FastAPI cannot see them);
- that a blank value means "no filter" wherever the table's filters accept one (an empty form
  field), found by asking the OfferFilters model itself.
"""

from __future__ import annotations

import copy
from collections.abc import Iterable
from typing import Any

from fastapi import APIRouter, FastAPI
from fastapi.openapi.utils import get_openapi
from fastapi.routing import APIRoute

from app.fit.presets import preset_ids
from app.fit.workload import Workload
from app.gpus.catalog import load_catalog
from app.queries import OfferFilters
from app.queries.params import LIST_KEYS

# Any text without C0 controls, DEL or U+FFFE/U+FFFF (the 422 of reject_control_characters).
TEXT_PATTERN = "^[^\\u0000-\\u001f\\u007f\\ufffe\\uffff]*$"
MEDIA_TYPES = {".csv": "text/csv", ".atom": "application/atom+xml"}
_CONSTRAINTS = ("minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum", "enum")

VALIDATION_ERROR = {
    "title": "ValidationError",
    "type": "object",
    "required": ["loc", "field", "msg"],
    "properties": {
        "loc": {"type": "array", "items": {"anyOf": [{"type": "string"}, {"type": "integer"}]}},
        "field": {"type": "string", "description": "the offending parameter or form field"},
        "msg": {"type": "string"},
        "type": {
            "type": "string",
            "description": "machine-readable kind; model_required, model_conflict, "
            "tokens_conflict, heads and kv_heads name rules that tie workload fields together; "
            "bad_cursor an `after` that is not a Next link's cursor for this view",
        },
    },
}
HTTP_VALIDATION_ERROR = {
    "title": "HTTPValidationError",
    "type": "object",
    "required": ["detail"],
    "properties": {
        "detail": {"type": "array", "items": {"$ref": "#/components/schemas/ValidationError"}}
    },
}
ERROR_DETAIL = {
    "title": "ErrorDetail",
    "type": "object",
    "required": ["detail"],
    "properties": {"detail": {"type": "string"}},
}


def is_api_route(route: APIRoute) -> bool:
    """Whether a route belongs in the API document (JSON, CSV and Atom, not pages or forms)."""
    if "GET" not in (route.methods or set()) or route.path == "/metrics":
        return False
    return (
        route.path.startswith("/api/")
        or route.path.endswith(tuple(MEDIA_TYPES))
        or route.path == "/healthz"
    )


def api_routes(routers: Iterable[APIRouter]) -> list[APIRoute]:
    """Copies of the API routes, marked for the document whatever their router says."""
    routes = []
    for router in routers:
        for route in router.routes:
            if isinstance(route, APIRoute) and is_api_route(route):
                shown = copy.copy(route)
                shown.include_in_schema = True
                routes.append(shown)
    return routes


def _workload_constraints() -> dict[str, dict[str, Any]]:
    properties = Workload.model_json_schema()["properties"]
    out: dict[str, dict[str, Any]] = {}
    for name, prop in properties.items():
        options = prop.get("anyOf", [prop])
        found = {k: v for option in options for k, v in option.items() if k in _CONSTRAINTS}
        if found:
            out[name] = found
    # A blank model means "no preset"; otherwise it must be one (any case, as the parser does).
    out["model"] = {"enum": ["", *preset_ids()]}
    return out


BLANK = {"type": "string", "enum": [""]}


def _blank_means_unset() -> frozenset[str]:
    """The filters for which an empty value is accepted and means "no filter"."""
    accepted = set()
    for name in OfferFilters.model_fields:
        try:
            OfferFilters.model_validate({name: [""] if name in LIST_KEYS else ""})
        except ValueError:
            continue
        accepted.add(name)
    return frozenset(accepted)


def _allow_blank(schema: dict[str, Any]) -> None:
    target = schema.get("items", schema) if schema.get("type") == "array" else schema
    if target.get("type") == "string" and "enum" not in target:
        return  # any string, the empty one included
    branches = target.pop("anyOf", None) or [dict(target)]
    for key in list(target):
        if key not in ("title", "description", "default"):
            del target[key]
    target["anyOf"] = [*branches, BLANK]


def _constrain(schema: dict[str, Any], extra: dict[str, Any]) -> None:
    """Add `extra` to a parameter schema, inside anyOf (nullable) branches of matching type."""
    branches = schema.get("anyOf", [schema])
    for branch in branches:
        kind = branch.get("type")
        if kind == "null":
            continue
        if "enum" in extra and kind == "string":
            branch["enum"] = extra["enum"]
        elif kind in ("number", "integer"):
            branch.update({k: v for k, v in extra.items() if k != "enum"})


def _text_only(schema: dict[str, Any]) -> None:
    for branch in [schema, *schema.get("anyOf", []), schema.get("items", {})]:
        if branch.get("type") == "string" and "enum" not in branch and "pattern" not in branch:
            branch["pattern"] = TEXT_PATTERN
        if branch.get("type") == "array":
            _text_only(branch.get("items", {}))


WORKLOAD_RULES = (
    " Workload parameters: give `model` (a preset) or `params_b` (a size in billions), not "
    "both; without either, no job is sized, but each value given must still be in range. A "
    "422 whose `type` is model_required or model_conflict reports a broken rule."
)


def _patch_operation(
    path: str, operation: dict[str, Any], workload: dict[str, Any], blank_ok: frozenset[str]
) -> None:
    names = {param["name"] for param in operation.get("parameters", [])}
    if {"model", "params_b"} <= names:
        operation["description"] = operation.get("description", "") + WORKLOAD_RULES
    filters = {"gpu", "sort", "limit"} <= names  # the table's filters (OfferFilters)
    for param in operation.get("parameters", []):
        schema = param.setdefault("schema", {})
        if path == "/api/estimate" and param["name"] == "gpu":
            # One catalog slug (any case, as the route reads it); blank means "no time".
            _constrain(schema, {"enum": ["", *sorted(load_catalog())]})
        if param["name"] in workload:
            _constrain(schema, workload[param["name"]])
        _text_only(schema)
        if filters and param["name"] in blank_ok and param["name"] not in workload:
            _allow_blank(schema)
    responses = operation.setdefault("responses", {})
    suffix = next((s for s in MEDIA_TYPES if path.endswith(s)), None)
    if suffix is not None:
        ok = responses.setdefault("200", {"description": "Successful Response"})
        ok["content"] = {MEDIA_TYPES[suffix]: {"schema": {"type": "string"}}}
    if "{" in path:
        responses["404"] = {
            "description": "Not found",
            "content": {
                "application/json": {"schema": {"$ref": "#/components/schemas/ErrorDetail"}}
            },
        }
    if operation.get("parameters"):
        responses["422"] = {
            "description": "Validation Error: each bad parameter named in `field`",
            "content": {
                "application/json": {"schema": {"$ref": "#/components/schemas/HTTPValidationError"}}
            },
        }


def build_openapi(app: FastAPI, routers: Iterable[APIRouter]) -> dict[str, Any]:
    """The document for `app`'s API routes (see the module docs for what is added)."""
    schema = get_openapi(
        title=app.title,
        version=app.version,
        summary=app.summary,
        routes=api_routes(routers),
    )
    schemas = schema.setdefault("components", {}).setdefault("schemas", {})
    schemas.update(
        ValidationError=VALIDATION_ERROR,
        HTTPValidationError=HTTP_VALIDATION_ERROR,
        ErrorDetail=ERROR_DETAIL,
    )
    workload = _workload_constraints()
    blank_ok = _blank_means_unset()
    for path, item in schema.get("paths", {}).items():
        for operation in item.values():
            _patch_operation(path, operation, workload, blank_ok)
    return schema


def install_openapi(app: FastAPI, routers: Iterable[APIRouter]) -> None:
    """Serve build_openapi's document at /openapi.json (built once, on first request)."""
    routers = tuple(routers)

    def openapi() -> dict[str, Any]:
        if app.openapi_schema is None:
            app.openapi_schema = build_openapi(app, routers)
        return app.openapi_schema

    setattr(app, "openapi", openapi)  # noqa: B010 - FastAPI's documented override hook
