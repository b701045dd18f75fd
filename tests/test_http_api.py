"""The HTTP API (``memtoc.surfaces.http``) over a real SQLite store filled by the real pipeline.

Every ``/v1`` route is called through FastAPI's TestClient (the real app, the real Memory pool);
auth (401 without or with a wrong token), validation (422), bad input (400), unknown ids (404)
and the loopback/token rules are checked, as are the token file and the Memory pool.
"""

from __future__ import annotations

import stat
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient

from memtoc.config import Settings, load_settings
from memtoc.errors import ConfigError
from memtoc.memory import Memory
from memtoc.surfaces.http.app import create_app
from memtoc.surfaces.http.auth import (
    check_bind,
    ensure_token,
    is_loopback,
    read_token,
    token_path,
    write_token,
)
from memtoc.surfaces.http.guard import RequestGuard, allowed_hosts
from memtoc.surfaces.http.pool import MemoryPool

TOKEN = "test-token-0123456789"
AUTH = {"Authorization": f"Bearer {TOKEN}"}
LOCAL = "http://127.0.0.1:8765"
"""Where the test client sends requests: a loopback Host, as a browser on this machine would."""
DAY_MS = 86_400_000
START_MS = 1_705_572_000_000  # 2024-01-18T10:00:00Z


def history() -> list[dict[str, Any]]:
    """Three days of a 'webapp' project about a postgres migration, one 'infra' event."""
    records: list[dict[str, Any]] = []
    for day in range(3):
        for i in range(12):
            records.append(
                {
                    "session_id": f"web-{day}",
                    "timestamp": START_MS + day * DAY_MS + i * 60_000,
                    "role": "user" if i % 2 == 0 else "assistant",
                    "text": f"The postgres migration adds an index on orders (step {i}); "
                    "vacuum the table and check the query planner afterwards.",
                    "project": "webapp",
                }
            )
    records.append(
        {
            "session_id": "ops-1",
            "timestamp": START_MS,
            "role": "user",
            "text": "Rotate the vault keys every quarter.",
            "project": "infra",
        }
    )
    return records


def make_settings(home: Path) -> Settings:
    return load_settings({"home": str(home), "embedder": "none", "timezone": "UTC"}, environ={})


@pytest.fixture(scope="module")
def settings(tmp_path_factory: pytest.TempPathFactory) -> Settings:
    s = make_settings(tmp_path_factory.mktemp("http") / "home")
    with Memory.open(s) as memory:
        report = memory.ingest_records(history())
        assert report.ingested == 37
        memory.process()
        memory.rollup(force=True)
    return s


@pytest.fixture(scope="module")
def client(settings: Settings) -> Iterator[TestClient]:
    app = create_app(lambda: Memory.open(settings), token=TOKEN, pool_size=2)
    with TestClient(app, base_url=LOCAL) as c:
        yield c


def get(client: TestClient, url: str, **params: Any) -> Any:
    response = client.get(url, params=params, headers=AUTH)
    assert response.status_code == 200, response.text
    return response.json()


def first_grip(client: TestClient) -> str:
    day = get(client, "/v1/timeline", project="webapp", since="2024-01-18", until="2024-01-19")
    segment_id = get(client, f"/v1/nodes/{day['nodes'][0]['node_id']}", project="webapp")[
        "children"
    ][0]["node_id"]
    segment = get(client, f"/v1/nodes/{segment_id}", project="webapp")
    return str(segment["node"]["bullets"][0]["grip_ids"][0])


# -- auth -------------------------------------------------------------------------------------------
ROUTES = [
    ("GET", "/v1/status", None),
    ("GET", "/v1/projects", None),
    ("GET", "/v1/toc?project=webapp", None),
    ("GET", "/v1/nodes/toc:year:2024?project=webapp", None),
    ("GET", "/v1/grips/grip:0000000000000:x", None),
    ("GET", "/v1/timeline?project=webapp", None),
    ("GET", "/v1/search?q=postgres", None),
    ("POST", "/v1/recall", {"query": "postgres"}),
    ("GET", "/v1/bookmarks", None),
    ("GET", "/v1/context", None),
    ("POST", "/v1/remember", {"text": "never stored"}),
]


@pytest.mark.parametrize(("method", "url", "body"), ROUTES)
@pytest.mark.parametrize(
    "headers",
    [
        {},
        {"Authorization": "Bearer wrong-token"},
        {"Authorization": f"Basic {TOKEN}"},
        {"Authorization": TOKEN},
    ],
    ids=["none", "wrong", "basic-scheme", "no-scheme"],
)
def test_every_route_needs_the_token(
    client: TestClient, method: str, url: str, body: Any, headers: dict[str, str]
) -> None:
    response = client.request(method, url, json=body, headers=headers)
    assert response.status_code == 401
    assert "bearer token" in response.json()["error"]
    assert response.headers["www-authenticate"] == "Bearer"


def test_rejected_writes_store_nothing(client: TestClient) -> None:
    before = get(client, "/v1/status")["events"]
    client.post("/v1/remember", json={"text": "sneaky"}, headers={"Authorization": "Bearer no"})
    assert get(client, "/v1/status")["events"] == before


def test_openapi_is_public_and_declares_bearer_auth(client: TestClient) -> None:
    spec = client.get("/openapi.json").json()
    paths = set(spec["paths"])
    assert {
        "/v1/status",
        "/v1/projects",
        "/v1/toc",
        "/v1/nodes/{node_id}",
        "/v1/grips/{grip_id}",
        "/v1/timeline",
        "/v1/search",
        "/v1/recall",
        "/v1/bookmarks",
        "/v1/context",
        "/v1/remember",
    } <= paths
    assert spec["components"]["securitySchemes"]["HTTPBearer"]["scheme"] == "bearer"
    assert spec["paths"]["/v1/search"]["get"]["security"] == [{"HTTPBearer": []}]


def test_no_auth_mode_serves_without_a_token(settings: Settings) -> None:
    app = create_app(lambda: Memory.open(settings), token=None, web=False)
    with TestClient(app, base_url=LOCAL) as c:
        assert c.get("/v1/projects").status_code == 200


# -- routes -------------------------------------------------------------------------------------
def test_status_reports_queue_rollups_and_backends(client: TestClient) -> None:
    data = get(client, "/v1/status")
    assert data["events"] == 37
    assert data["outbox"]["pending"] == 0
    assert data["rollups"]["day"]["forced"] is True
    assert data["embedder"] is None and "none configured" in data["embedder_degraded"]
    assert data["summarizer"].startswith("extractive")
    assert data["daemon"] is None  # no `memtoc serve` around this app


def test_status_includes_daemon_info(settings: Settings) -> None:
    app = create_app(
        lambda: Memory.open(settings), token=TOKEN, daemon=lambda: {"pid": 42}, web=False
    )
    with TestClient(app, base_url=LOCAL) as c:
        assert c.get("/v1/status", headers=AUTH).json()["daemon"] == {"pid": 42}


def test_projects(client: TestClient) -> None:
    projects = get(client, "/v1/projects")["projects"]
    assert [(p["project"], p["name"], p["events"]) for p in projects] == [
        ("infra", "infra", 1),
        ("webapp", "webapp", 36),
    ]


def test_toc_returns_the_years(client: TestClient) -> None:
    data = get(client, "/v1/toc", project="webapp")
    assert data["project"] == "webapp"
    assert [n["node_id"] for n in data["nodes"]] == ["toc:year:2024"]
    assert data["nodes"][0]["child_node_ids"] == ["toc:month:2024-01"]


def test_toc_needs_a_project_when_there_are_several(client: TestClient) -> None:
    response = client.get("/v1/toc", headers=AUTH)
    assert response.status_code == 400
    assert "several projects" in response.json()["error"]
    missing = client.get("/v1/toc", params={"project": "nope"}, headers=AUTH)
    assert missing.status_code == 404 and "nope" in missing.json()["error"]


def test_node_with_children_and_tiers(client: TestClient) -> None:
    month = get(client, "/v1/nodes/toc:month:2024-01", project="webapp")
    assert month["node"]["level"] == "month"
    assert month["tier"] == "L0" and "overview" not in month["node"]
    assert [c["level"] for c in month["children"]] == ["week"]  # 18-20 Jan 2024: one ISO week
    l1 = get(client, "/v1/nodes/toc:month:2024-01", project="webapp", tier="L1")
    assert "overview" in l1["node"] and l1["tokens"] >= month["tokens"]


def test_node_errors(client: TestClient) -> None:
    unknown = client.get("/v1/nodes/toc:day:1999-01-01", params={"project": "webapp"}, headers=AUTH)
    assert unknown.status_code == 404 and "toc:day:1999-01-01" in unknown.json()["error"]
    bad_tier = client.get("/v1/nodes/toc:year:2024", params={"tier": "L9"}, headers=AUTH)
    assert bad_tier.status_code == 422 and "tier" in bad_tier.json()["error"]


def test_grip_expands_to_its_events(client: TestClient) -> None:
    grip_id = first_grip(client)
    data = get(client, f"/v1/grips/{grip_id}", before=1, after=1)
    assert data["grip"]["grip_id"] == grip_id
    inside = [e for e in data["events"] if e["in_grip"]]
    assert inside and all("postgres" in e["text"] for e in inside)
    assert len(data["events"]) <= len(inside) + 2


def test_grip_errors(client: TestClient) -> None:
    unknown = client.get("/v1/grips/grip:0000000000000:zz", headers=AUTH)
    assert unknown.status_code == 404
    assert client.get("/v1/grips/x", params={"before": -1}, headers=AUTH).status_code == 422
    assert client.get("/v1/grips/x", params={"after": 51}, headers=AUTH).status_code == 422


def test_timeline(client: TestClient) -> None:
    days = get(
        client, "/v1/timeline", project="webapp", since="2024-01-18", until="2024-01-19"
    )  # dates inclusive
    assert [n["node_id"] for n in days["nodes"]] == ["toc:day:2024-01-18", "toc:day:2024-01-19"]
    weeks = get(client, "/v1/timeline", project="webapp", level="week", since="2024-01-01")
    assert [n["node_id"] for n in weeks["nodes"]] == ["toc:week:2024-W03"]


@pytest.mark.parametrize(
    ("params", "code", "needle"),
    [
        ({"since": "the day the music died"}, 400, "since="),
        ({"since": "99999999999999999999999"}, 400, "out of range"),
        ({"since": "2024-02-01", "until": "2024-01-01"}, 400, "before since"),
        ({"level": "decade"}, 422, "level"),
    ],
)
def test_timeline_bad_input(
    client: TestClient, params: dict[str, str], code: int, needle: str
) -> None:
    response = client.get("/v1/timeline", params={"project": "webapp", **params}, headers=AUTH)
    assert response.status_code == code
    assert needle in response.json()["error"]


def test_search(client: TestClient) -> None:
    data = get(client, "/v1/search", q="vacuum planner", project="webapp", limit=3)
    assert 0 < len(data["items"]) <= 3
    assert data["items"][0]["project"] == "webapp"
    events = get(client, "/v1/search", q="vault keys", kind="event", all="true")
    assert [i["kind"] for i in events["items"]] == ["event"]
    assert "vault" in events["items"][0]["text"]
    days = get(client, "/v1/search", q="postgres", level="day", depth="L1", project="webapp")
    assert {i["id"].split(":")[1] for i in days["items"]} == {"day"}
    # no project on a store of several: an error naming them (the API has no working directory)
    several = client.get("/v1/search", params={"q": "postgres"}, headers=AUTH)
    assert several.status_code == 400 and "(infra, webapp)" in several.json()["error"]
    unknown = client.get("/v1/search", params={"q": "x", "project": "nope"}, headers=AUTH)
    assert unknown.status_code == 404
    assert unknown.json()["error"] == "unknown project 'nope' (known projects: infra, webapp)"


@pytest.mark.parametrize(
    ("params", "code"),
    [
        ({}, 422),
        ({"q": ""}, 422),
        ({"q": "x", "limit": 0}, 422),
        ({"q": "x", "depth": "L7"}, 422),
        ({"q": "x", "kind": "planet"}, 422),
        ({"q": "x", "since": "not a time"}, 400),
    ],
)
def test_search_bad_input(client: TestClient, params: dict[str, Any], code: int) -> None:
    response = client.get("/v1/search", params=params, headers=AUTH)
    assert response.status_code == code
    assert response.json()["error"]


def test_search_takes_any_text(client: TestClient) -> None:
    for q in ['"unbalanced', "AND OR NOT", "col:umn*", "💥 ^~ (", "\x00"]:
        params = {"q": q, "all": "true"}
        assert client.get("/v1/search", params=params, headers=AUTH).status_code == 200


def test_recall(client: TestClient) -> None:
    response = client.post(
        "/v1/recall",
        json={"query": "postgres migration", "budget": 300, "all_projects": True},
        headers=AUTH,
    )
    assert response.status_code == 200, response.text
    data = response.json()
    assert data["budget"] == 300 and 0 < data["tokens"] <= 300


def test_recall_validates_its_body(client: TestClient) -> None:
    for body in ({}, {"query": ""}, {"query": "x", "budget": 0}, {"query": "x", "extra": 1}):
        response = client.post("/v1/recall", json=body, headers=AUTH)
        assert response.status_code == 422, body


def test_bookmarks_and_context(client: TestClient) -> None:
    marks = get(client, "/v1/bookmarks", project="webapp", limit=5)
    assert marks["project"] == "webapp" and len(marks["bookmarks"]) <= 5
    context = get(client, "/v1/context", project="webapp", budget=300)
    assert context["project"] == "webapp" and 0 < context["tokens"] <= 300
    assert "postgres" in context["text"].lower()
    assert client.get("/v1/context", params={"budget": -1}, headers=AUTH).status_code == 422


def test_remember_stores_an_event(tmp_path: Path) -> None:
    s = make_settings(tmp_path / "home")
    app = create_app(lambda: Memory.open(s), token=TOKEN, web=False)
    with TestClient(app, base_url=LOCAL) as c:
        response = c.post(
            "/v1/remember",
            json={"text": "We chose SQLite for the embedded store.", "kind": "decision"},
            headers=AUTH,
        )
        assert response.status_code == 200, response.text
        event = response.json()["event"]
        assert event["project"] == "default" and event["metadata"]["kind"] == "decision"
        projects = c.get("/v1/projects", headers=AUTH).json()["projects"]
        assert [(p["project"], p["events"]) for p in projects] == [("default", 1)]
        bad = c.post("/v1/remember", json={"text": "x", "role": "robot"}, headers=AUTH)
        assert bad.status_code == 422 and "role" in bad.json()["error"]
        # the values the importer refuses are refused here too, with the reason, never a 500
        for body, why in [
            ({"text": "x", "session_id": "a\u0000b"}, "session_id contains a NUL character"),
            ({"text": "x", "project": "p" * 1500}, "project"),
        ]:
            refused = c.post("/v1/remember", json=body, headers=AUTH)
            assert 400 <= refused.status_code < 500 and why in refused.text, refused.text
    with Memory.open(s) as memory:
        assert [e.text for e in memory.events()] == ["We chose SQLite for the embedded store."]


def test_empty_store_answers_4xx_not_5xx(tmp_path: Path) -> None:
    s = make_settings(tmp_path / "home")
    app = create_app(lambda: Memory.open(s), token=TOKEN, web=False)
    with TestClient(app, base_url=LOCAL) as c:
        assert c.get("/v1/toc", headers=AUTH).status_code == 400
        assert c.get("/v1/timeline", headers=AUTH).status_code == 400
        assert c.get("/v1/search", params={"q": "x"}, headers=AUTH).json()["items"] == []
        assert c.get("/v1/context", headers=AUTH).json()["project"] is None


def test_web_ui_is_mounted_without_auth(client: TestClient) -> None:
    page = client.get("/")
    assert page.status_code == 200 and "text/html" in page.headers["content-type"]


# -- token, binding, pool ---------------------------------------------------------------------------
def test_token_file_is_private_random_and_stable(tmp_path: Path) -> None:
    home = tmp_path / "home"
    assert read_token(home) is None
    token = ensure_token(home)
    assert len(token) >= 40
    assert stat.S_IMODE(token_path(home).stat().st_mode) == 0o600
    assert ensure_token(home) == token == read_token(home)
    rotated = write_token(home)
    assert rotated != token and read_token(home) == rotated
    assert stat.S_IMODE(token_path(home).stat().st_mode) == 0o600


def test_loopback_rules() -> None:
    for host in ("127.0.0.1", "127.8.0.1", "::1", "[::1]", "localhost"):
        assert is_loopback(host), host
        check_bind(host, None)
    for host in ("0.0.0.0", "::", "192.168.1.5", "example.org"):
        assert not is_loopback(host), host
        with pytest.raises(ConfigError, match="refusing to bind"):
            check_bind(host, None)
        check_bind(host, "a-token")


def test_request_guard_checks_the_token_of_every_path_it_guards() -> None:
    from starlette.applications import Starlette
    from starlette.responses import PlainTextResponse
    from starlette.routing import Route

    async def hello(_request: Any) -> PlainTextResponse:
        return PlainTextResponse("hi")

    inner = Starlette(routes=[Route("/mcp", hello)])
    guarded = RequestGuard(
        inner, hosts=allowed_hosts("127.0.0.1"), token=TOKEN, token_prefixes=("/",)
    )
    with TestClient(guarded, base_url=LOCAL) as c:
        assert c.get("/mcp").status_code == 401
        assert c.get("/mcp", headers={"Authorization": "Bearer nope"}).status_code == 401
        assert c.get("/mcp", headers=AUTH).text == "hi"


def test_pool_never_shares_a_memory_between_threads(settings: Settings) -> None:
    pool = MemoryPool(lambda: Memory.open(settings), size=2)
    in_use: set[int] = set()
    guard = threading.Lock()
    clashes: list[int] = []

    def work() -> None:
        for _ in range(5):
            with pool.lease() as memory:
                with guard:
                    if id(memory) in in_use:
                        clashes.append(id(memory))
                    in_use.add(id(memory))
                memory.store.count_events()
                time.sleep(0.002)
                with guard:
                    in_use.discard(id(memory))

    threads = [threading.Thread(target=work) for _ in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert clashes == []
    assert pool.opened == 2
    pool.close()


def test_concurrent_requests_are_all_answered(client: TestClient) -> None:
    results: list[int] = []

    def hit() -> None:
        r = client.get("/v1/search", params={"q": "postgres index", "all": "1"}, headers=AUTH)
        results.append(r.status_code)

    threads = [threading.Thread(target=hit) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert results == [200] * 8


def test_unknown_query_parameters_are_rejected(client: TestClient) -> None:
    response = client.get("/v1/toc", params={"projct": "webapp"}, headers=AUTH)
    assert response.status_code == 422
    assert "projct" in response.json()["error"] and "project" in response.json()["error"]


def test_the_app_restarts_after_its_lifespan_ends(settings: Settings) -> None:
    app = create_app(lambda: Memory.open(settings), token=TOKEN, web=False)
    for _ in range(2):  # each `with` runs startup and shutdown (the pool closes, then reopens)
        with TestClient(app, base_url=LOCAL) as c:
            assert c.get("/v1/projects", headers=AUTH).status_code == 200
