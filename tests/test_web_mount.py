"""``mount_web``: the page and its assets are served from package data, without a token."""

from __future__ import annotations

import re

from fastapi import FastAPI
from fastapi.testclient import TestClient

from memtoc.surfaces.web import STATIC_DIR, mount_web


def _client() -> TestClient:
    app = FastAPI()
    mount_web(app)
    return TestClient(app)


def test_index_is_the_page_and_not_cached() -> None:
    response = _client().get("/")
    assert response.status_code == 200
    assert response.headers["content-type"].startswith("text/html")
    assert response.headers["cache-control"] == "no-cache"
    assert "<title>memtoc" in response.text


def test_every_asset_the_page_references_is_served() -> None:
    client = _client()
    page = client.get("/").text
    assets = re.findall(r'(?:src|href)="(/static/[^"]+)"', page)
    assert assets, "the page references no assets"
    for asset in assets:
        response = client.get(asset)
        assert response.status_code == 200, asset
        assert response.content == (STATIC_DIR / asset.removeprefix("/static/")).read_bytes()


def test_javascript_modules_are_served_as_javascript() -> None:
    client = _client()
    modules = sorted(p.name for p in STATIC_DIR.glob("*.js"))
    assert modules
    for name in modules:
        response = client.get(f"/static/{name}")
        assert response.status_code == 200
        assert "javascript" in response.headers["content-type"]


def test_unknown_asset_is_404() -> None:
    assert _client().get("/static/nope.js").status_code == 404
