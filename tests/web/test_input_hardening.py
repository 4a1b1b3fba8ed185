"""Bad input is a 4xx, always: control characters (NUL first) in any path, query or form field
of any route are a 422 naming the field, on SQLite and Postgres; ids out of range are 404."""

from __future__ import annotations

import re
from urllib.parse import quote, urlencode

import pytest
from fastapi import FastAPI
from fastapi.routing import APIRoute
from fastapi.testclient import TestClient
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from app.main import ROUTERS
from tests.web.helpers import csrf_of

# Every route of every feature router (app.main.ROUTERS), so routes added later are covered.
ROUTES = sorted(
    (route.path, method)
    for router in ROUTERS
    for route in router.routes
    if isinstance(route, APIRoute)
    for method in route.methods
)
CONTROLS = [chr(c) for c in (*range(0x20), 0x7F)]
# Text around one control character; no lone surrogates (they cannot be percent-encoded) and
# no "/" (a path segment with one is another path: a 404 before any field exists).
_plain = st.text(st.characters(blacklist_categories=("Cs",), blacklist_characters="/"), max_size=6)
poisoned = st.builds(lambda a, c, b: a + c + b, _plain, st.sampled_from(CONTROLS), _plain)
FORM_CONTROLS = set(CONTROLS) - set("\t\n\r")  # forms may hold tabs and line breaks
QUERY_KEYS = ["q", "gpu", "provider", "region", "model", "sort", "limit", "params_b", "name"]


def _fill(path: str, value: str = "x" * 43) -> str:
    return re.sub(r"\{[^}]+\}", quote(value, safe=""), path)


def _fields(response_json: dict[str, object]) -> list[str]:
    detail = response_json["detail"]
    assert isinstance(detail, list)
    return [str(item["field"]) for item in detail]  # type: ignore[index]


def test_every_route_is_covered() -> None:
    paths = {path for path, _ in ROUTES}
    assert {"/", "/api/offers", "/offers/{offer_id}", "/saved/{share_token}/rename"} <= paths
    assert ("/saved", "POST") in ROUTES


@pytest.mark.parametrize(("path", "method"), ROUTES)
def test_control_characters_anywhere_are_a_422_naming_the_field(
    path: str, method: str, client: TestClient
) -> None:
    owner_page = client.get("/")  # a browser with an owner cookie and a form token
    token = csrf_of(owner_page.text)
    names = re.findall(r"\{([^}:]+)", path)

    @given(value=poisoned, key=st.sampled_from(QUERY_KEYS))
    @settings(max_examples=8, deadline=None, suppress_health_check=list(HealthCheck))
    def check(value: str, key: str) -> None:
        headers = {"accept": "application/json"}
        responses = []
        if names:  # the poison in the path
            url = re.sub(r"\{[^}]+\}", lambda _: quote(value, safe=""), path)
            responses.append((f"path.{names[0]}", client.request(method, url, headers=headers)))
        url = _fill(path) + "?" + urlencode({key: value})  # in the query string
        responses.append((key, client.request(method, url, headers=headers)))
        if method == "POST" and any(c in FORM_CONTROLS for c in value):
            # and in a form field, the form otherwise valid (tabs and line breaks are fine there)
            form = {"csrf": token, "name": value, "query": "gpu=h100-sxm"}
            responses.append(("name", client.post(_fill(path), data=form, headers=headers)))
        for field, response in responses:
            assert response.status_code == 422, (field, response.status_code, response.text)
            assert field.split(".")[-1] in _fields(response.json()), response.text

    check()


def test_form_text_may_hold_tabs_and_line_breaks(client: TestClient) -> None:
    token = csrf_of(client.get("/").text)
    form = {"csrf": token, "name": "line one\n\tline two", "query": "gpu=h100-sxm"}
    assert client.post("/saved", data=form, follow_redirects=False).status_code == 303
    assert client.get("/api/saved").json()["saved"][0]["name"] == "line one line two"


def test_nul_in_html_page_query_is_an_error_page_not_a_500(client: TestClient) -> None:
    response = client.get("/?gpu=h100%00", headers={"accept": "text/html"})
    assert response.status_code == 422
    assert "gpu" in response.text and "control characters" in response.text


def test_static_files_with_control_characters_are_not_a_500(client: TestClient) -> None:
    for path in ("/static/app%00.css", "/static/%0a", "/%00", "/api/%00/x"):
        assert 400 <= client.get(path).status_code < 500, path


@pytest.mark.parametrize("offer_id", [2**31, 2**31 - 1, 2**63, 10**30, 0, -1])
def test_ids_out_of_range_are_404(client: TestClient, offer_id: int) -> None:
    for path in (f"/offers/{offer_id}", f"/api/offers/{offer_id}"):
        response = client.get(path, headers={"accept": "application/json"})
        assert response.status_code == 404, (path, response.text)


def test_a_forged_owner_cookie_is_ignored_not_a_500(app: FastAPI) -> None:
    with TestClient(app) as client:
        client.cookies.set("gpufit_owner", "x" * 30 + "'; DROP TABLE x; --")
        assert client.get("/api/saved").json() == {"saved": []}
        assert client.get("/saved").status_code == 200


@pytest.mark.parametrize(
    ("url", "field"),
    [
        ("/api/offers?q=a100&q=h100", "q"),
        ("/offers.csv?sort=price&sort=vram", "sort"),
        ("/api/estimate?model=llama-3.1-8b&model=llama-3.1-70b", "model"),
        ("/?q=a&q=b", "q"),
    ],
)
def test_a_single_valued_parameter_given_twice_is_a_422(
    client: TestClient, url: str, field: str
) -> None:
    """FastAPI keeps the last of repeated values silently; the API says which one is doubled."""
    response = client.get(url, headers={"accept": "application/json"})
    assert response.status_code == 422
    assert field in _fields(response.json())


def test_list_parameters_may_repeat(client: TestClient) -> None:
    response = client.get("/api/offers?gpu=h100-sxm&gpu=a100-80gb&provider=aws&provider=gcp")
    assert response.status_code == 200
