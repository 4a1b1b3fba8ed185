"""Property-based API tests: schemathesis over the OpenAPI schema, hypothesis on raw params.

No input may produce a 500, every 422 must name the field that is wrong, and the OpenAPI document
must say what the API does (every schemathesis check passes). GPUFIT_SCHEMATHESIS_EXAMPLES sets
the examples per operation (25 in `make test`; the longer run uses more).
"""

from __future__ import annotations

import json
import math
import os
import re
import tempfile
from pathlib import Path
from typing import Any
from urllib.parse import parse_qsl, urlsplit

import schemathesis
from fastapi.testclient import TestClient
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from schemathesis.checks import CHECKS, load_all_checks
from schemathesis.specs.openapi.checks import negative_data_rejection, positive_data_acceptance

from app.core.settings import Settings
from app.main import create_app
from app.pipeline.sample_loader import load_sample
from app.queries import WORKLOAD_KEYS
from app.store.db import make_engine, make_session_factory
from app.store.migrate import upgrade

_DB_DIR = Path(tempfile.mkdtemp(prefix="gpufit-fuzz-"))
_URL = f"sqlite:///{_DB_DIR / 'fuzz.db'}"
upgrade(_URL)
with make_session_factory(make_engine(_URL)).begin() as _session:
    load_sample(_session)
APP = create_app(
    Settings(database_url=_URL, scheduler_enabled=False, _env_file=None), scheduler=False
)

CLIENT = TestClient(APP)  # no lifespan needed: the scheduler is off
schema = schemathesis.openapi.from_asgi("/openapi.json", APP)


def assert_names_field(response: Any) -> None:
    """A 4xx with a validation body lists each bad field by name."""
    if response.status_code == 422:
        detail = response.json()["detail"]
        assert isinstance(detail, list) and detail
        for item in detail:
            assert item.get("field") and item["field"] != "request", item


# The rules that tie workload fields together (model or params_b, not both; tokens or
# dataset_tokens) cannot be said in per-parameter schemas; the document states them in words and
# the 422 names each by its `type`. Schema-valid data is accepted except when it breaks one. A
# page cursor (`after`) is valid only as a Next link made it (bad_cursor), which no schema says.
CROSS_FIELD_TYPES = frozenset(
    {
        "model_required",
        "model_conflict",
        "tokens_conflict",
        "tokens_too_few",
        "heads",
        "kv_heads",
        "bad_cursor",
    }
)


def positive_data_acceptance_but_cross_field(
    ctx: Any, response: schemathesis.Response, case: schemathesis.Case[Any]
) -> bool | None:
    if response.status_code == 422:
        detail = json.loads(response.content).get("detail") or []
        if detail and all(item.get("type") in CROSS_FIELD_TYPES for item in detail):
            return None
    return positive_data_acceptance(ctx, response, case)


def _wire_value_ok(value: str, schema: dict[str, Any]) -> bool:
    """Whether one query-string value meets a parameter (item) schema, read as a server reads
    text: numbers and booleans parsed from it (the subset of JSON Schema our document uses)."""
    if "anyOf" in schema:
        return any(_wire_value_ok(value, alt) for alt in schema["anyOf"])
    if "enum" in schema and value not in [str(v) for v in schema["enum"]]:
        return False
    kind = schema.get("type")
    if kind in ("number", "integer"):
        try:
            number = float(value) if kind == "number" else int(value)
        except ValueError:
            return False
        bounds = (
            ("minimum", lambda b: number >= b),
            ("maximum", lambda b: number <= b),
            ("exclusiveMinimum", lambda b: number > b),
            ("exclusiveMaximum", lambda b: number < b),
        )
        return math.isfinite(number) and all(ok(schema[k]) for k, ok in bounds if k in schema)
    if kind == "boolean":
        return value.lower() in ("true", "false", "1", "0", "yes", "no", "on", "off")
    if kind == "null":
        return False  # a query string cannot send null
    if kind in ("string", None):
        if len(value) > schema.get("maxLength", len(value)):
            return False
        return "pattern" not in schema or re.search(schema["pattern"], value) is not None
    return False


def _wire_query_valid(case: schemathesis.Case[Any], response: schemathesis.Response) -> bool:
    """Whether the query the server received (not the values schemathesis generated before
    serializing them: null, false and {} arrive as "", "false" and nothing) meets the schema."""
    sent = parse_qsl(urlsplit(str(response.request.url)).query, keep_blank_values=True)
    params = {p["name"]: p for p in case.operation.definition.raw.get("parameters", [])}
    values: dict[str, list[str]] = {}
    for name, value in sent:
        values.setdefault(name, []).append(value)
    for name, received in values.items():
        if name not in params or params[name].get("in") != "query":
            return False
        schema = params[name]["schema"]
        if schema.get("type") == "array":
            items = schema.get("items", {})
            if len(received) > schema.get("maxItems", len(received)):
                return False
            if not all(_wire_value_ok(v, items) for v in received):
                return False
        elif len(received) != 1 or not _wire_value_ok(received[0], schema):
            return False
    return all(n in values for n, p in params.items() if p.get("required") and p["in"] == "query")


def negative_data_rejection_on_the_wire(
    ctx: Any, response: schemathesis.Response, case: schemathesis.Case[Any]
) -> bool | None:
    """negative_data_rejection, except where the request as sent is valid: schemathesis
    generates a null, a boolean or an object for a query parameter and counts it invalid, but
    it serializes them to "", "false" or nothing, which the schema allows (longer runs)."""
    if response.status_code < 400 and _wire_query_valid(case, response):
        return None
    return negative_data_rejection(ctx, response, case)


load_all_checks()
ALL_CHECKS = [
    c for c in CHECKS.get_all() if c not in (positive_data_acceptance, negative_data_rejection)
]
assert len(ALL_CHECKS) >= 12, ALL_CHECKS  # every built-in check, whatever the version adds
EXAMPLES = int(os.environ.get("GPUFIT_SCHEMATHESIS_EXAMPLES", "25"))
# `make test` draws the same examples every run, so CI sees what passed here; the longer run
# (GPUFIT_SCHEMATHESIS_EXAMPLES set) explores at random.
DERANDOMIZE = "GPUFIT_SCHEMATHESIS_EXAMPLES" not in os.environ


@schema.parametrize()
@settings(
    max_examples=EXAMPLES,
    deadline=None,
    suppress_health_check=list(HealthCheck),
    derandomize=DERANDOMIZE,
)
def test_openapi_conformance_all_checks(case: schemathesis.Case[Any]) -> None:
    """Every schemathesis check: no 500, documented status codes, media types, headers and
    bodies, invalid data rejected, valid data accepted (but for the cross-field rules)."""
    response = case.call()
    checks = [
        *ALL_CHECKS,
        positive_data_acceptance_but_cross_field,
        negative_data_rejection_on_the_wire,
    ]
    case.validate_response(response, checks=checks)
    assert_names_field(response)


def test_openapi_documents_the_real_error_body_and_media_types() -> None:
    document = CLIENT.get("/openapi.json").json()
    error = document["components"]["schemas"]["ValidationError"]
    assert set(error["required"]) == {"loc", "field", "msg"}
    body = CLIENT.get("/api/offers?limit=0").json()["detail"][0]
    assert set(body) == {"loc", "field", "msg", "type"}
    for path, media in (("/offers.csv", "text/csv"),
                        ("/saved/{share_token}.atom", "application/atom+xml")):  # fmt: skip
        assert list(document["paths"][path]["get"]["responses"]["200"]["content"]) == [media]
    assert "404" in document["paths"]["/api/offers/{offer_id}"]["get"]["responses"]
    assert "/" not in document["paths"] and "/metrics" not in document["paths"]


QUERY_KEYS = [
    "limit",
    "offset",
    *WORKLOAD_KEYS,
    "sort",
    "gpu",
    "provider",
    "min_vram",
    "max_price_per_hour",
]
junk = st.one_of(
    st.text(max_size=30),
    st.integers(min_value=-(10**12), max_value=10**12).map(str),
    st.floats(allow_nan=True, allow_infinity=True).map(str),
    st.sampled_from(["", "nan", "-1", "1e400", "true", "llama-3.1-8b", "qlora", "zero3"]),
)


@given(params=st.dictionaries(st.sampled_from(QUERY_KEYS), junk, max_size=6))
@settings(max_examples=150, deadline=None, suppress_health_check=list(HealthCheck))
def test_random_query_strings_never_500(params: dict[str, str]) -> None:
    for path in ("/api/offers", "/api/estimate", "/", "/offers.csv"):
        response = CLIENT.get(path, params=params, headers={"accept": "application/json"})
        assert response.status_code < 500, (path, params, response.text[:300])
        assert_names_field(response)


def test_the_wire_level_reading_of_the_schema_rejects_what_the_server_must_reject() -> None:
    """The relaxed negative-data check only forgives requests that are valid as sent."""
    document = CLIENT.get("/openapi.json").json()
    params = {p["name"]: p["schema"] for p in document["paths"]["/api/offers"]["get"]["parameters"]}
    for name, value in (("limit", "abc"), ("limit", "0"), ("max_cost", "-1"), ("billing", "x"),
                        ("gpu_count", "nan"), ("continent", "\x01")):  # fmt: skip
        schema = params[name]
        item = schema.get("items", schema) if schema.get("type") == "array" else schema
        assert not _wire_value_ok(value, item), (name, value)
    for name, value in (("limit", "10"), ("max_cost", ""), ("continent", "-22067598"),
                        ("gpu", "false"), ("billing", "second")):  # fmt: skip
        schema = params[name]
        item = schema.get("items", schema) if schema.get("type") == "array" else schema
        assert _wire_value_ok(value, item), (name, value)
