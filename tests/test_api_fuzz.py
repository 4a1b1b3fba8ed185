"""Property-based API tests: schemathesis over the OpenAPI schema, hypothesis on raw params.

No input may produce a 500, and every 422 must name the field that is wrong.
"""

from __future__ import annotations

import tempfile
from pathlib import Path
from typing import Any

import schemathesis
from fastapi.testclient import TestClient
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

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


@schema.parametrize()
@settings(max_examples=25, deadline=None, suppress_health_check=list(HealthCheck))
def test_openapi_operations_never_500(case: schemathesis.Case[Any]) -> None:
    response = case.call()
    assert response.status_code < 500, (case.as_curl_command(), response.text[:500])
    assert_names_field(response)


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
