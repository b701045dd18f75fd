"""Schema-driven fuzzing of the HTTP API: schemathesis generates requests from the app's own
OpenAPI document (valid and invalid parameters and bodies) and checks every response — no 5xx,
status codes and bodies as documented, content types right — against a real store filled by
the real pipeline. Bounded (``max_examples``) so the whole file runs in well under a minute.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import hypothesis
import pytest
import schemathesis
from fastapi import FastAPI
from fastapi.testclient import TestClient
from schemathesis import GenerationMode
from schemathesis.config import SchemathesisConfig
from schemathesis.specs.openapi.checks import positive_data_acceptance

from memtoc.config import Settings, load_settings
from memtoc.memory import Memory
from memtoc.surfaces.http.app import create_app

TOKEN = "fuzz-token"
AUTH = {"Authorization": f"Bearer {TOKEN}"}
START_MS = 1_705_572_000_000


@pytest.fixture(scope="module")
def settings(tmp_path_factory: pytest.TempPathFactory) -> Settings:
    home: Path = tmp_path_factory.mktemp("fuzz") / "home"
    s = load_settings({"home": str(home), "embedder": "none", "timezone": "UTC"}, environ={})
    records: list[dict[str, Any]] = [
        {
            "session_id": f"s{i // 10}",
            "timestamp": START_MS + i * 7 * 60_000,
            "role": ("user", "assistant")[i % 2],
            "text": f"Step {i}: tune the fts5 tokenizer and the bm25 ranking of search results.",
            "project": "webapp",
        }
        for i in range(40)
    ]
    with Memory.open(s) as memory:
        memory.ingest_records(records)
        memory.process()
        memory.rollup(force=True)
    return s


@pytest.fixture(scope="module")
def app(settings: Settings) -> Iterator[FastAPI]:
    # schemathesis's ASGI client sends "Host: testserver": served as an --allow-host name
    built = create_app(
        lambda: Memory.open(settings), token=TOKEN, web=False, allow_hosts=["testserver"]
    )
    yield built
    built.state.memtoc.pool.close()


@pytest.fixture(scope="module")
def api_schema(app: FastAPI) -> Any:
    config = SchemathesisConfig.from_dict({"auth": {"openapi": {"HTTPBearer": {"bearer": TOKEN}}}})
    return schemathesis.openapi.from_asgi("/openapi.json", app, config=config)


OPERATIONS = [
    ("GET", "/v1/status"),
    ("GET", "/v1/projects"),
    ("GET", "/v1/toc"),
    ("GET", "/v1/nodes/{node_id}"),
    ("GET", "/v1/grips/{grip_id}"),
    ("GET", "/v1/timeline"),
    ("GET", "/v1/search"),
    ("POST", "/v1/recall"),
    ("GET", "/v1/bookmarks"),
    ("GET", "/v1/context"),
    ("POST", "/v1/remember"),
]


FREE_TEXT_TIMES = {"/v1/timeline", "/v1/search", "/v1/recall"}


def test_every_operation_is_fuzzed(api_schema: Any) -> None:
    documented = {
        (method.upper(), path)
        for path, ops in api_schema.raw_schema["paths"].items()
        for method in ops
    }
    assert documented == set(OPERATIONS)


@pytest.mark.parametrize("mode", [GenerationMode.POSITIVE, GenerationMode.NEGATIVE])
@pytest.mark.parametrize(("method", "path"), OPERATIONS)
def test_api_conforms_and_never_fails(
    api_schema: Any, method: str, path: str, mode: GenerationMode
) -> None:
    """Valid (positive) and invalid (negative) requests get documented, conforming responses;
    invalid ones are rejected with a 4xx, none yields a 5xx."""
    operation = api_schema[path][method]
    # Time parameters (since, until, at) take free text ("last week") that no JSON Schema can
    # describe: a well-formed but meaningless one is rightly a 400, not "valid data rejected".
    excluded = [positive_data_acceptance] if path in FREE_TEXT_TIMES else []

    @hypothesis.given(case=operation.as_strategy(generation_mode=mode))
    @hypothesis.settings(
        max_examples=12,
        deadline=None,
        derandomize=True,
        database=None,
        suppress_health_check=list(hypothesis.HealthCheck),
    )
    def run(case: Any) -> None:
        case.call_and_validate(excluded_checks=excluded)

    run()


def test_without_the_token_every_operation_is_401(app: FastAPI) -> None:
    spec = TestClient(app, base_url="http://127.0.0.1:8765").get("/openapi.json").json()
    with TestClient(app, base_url="http://127.0.0.1:8765") as client:
        for path, operations in spec["paths"].items():
            url = path.replace("{node_id}", "toc:year:2024").replace("{grip_id}", "grip:1:x")
            for method in operations:
                response = client.request(method.upper(), url, json={})
                assert response.status_code == 401, (method, path)
