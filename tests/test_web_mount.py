"""``mount_web``: the page and its assets are served from package data, without a token."""

from __future__ import annotations

import re

from fastapi import FastAPI
from fastapi.testclient import TestClient

from memtoc.surfaces.web import CSP, STATIC_DIR, mount_web


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
    assert response.headers["content-security-policy"] == CSP
    assert "script-src 'self'" in CSP and "unsafe-inline" not in CSP


def test_every_asset_the_page_references_is_served() -> None:
    client = _client()
    page = client.get("/").text
    assets = re.findall(r'(?:src|href)="(/static/[^"]+)"', page)
    assert assets, "the page references no assets"
    for asset in assets:
        response = client.get(asset)
        assert response.status_code == 200, asset
        assert response.content == (STATIC_DIR / asset.removeprefix("/static/")).read_bytes()


def test_the_page_has_no_inline_script_or_style() -> None:
    """The CSP forbids inline code: everything the page runs must come from /static."""
    page = (STATIC_DIR / "index.html").read_text(encoding="utf-8")
    assert "<script>" not in page and "<style" not in page and " style=" not in page
    assert not re.search(r"\son[a-z]+=", page), "inline event handler"
    for module in STATIC_DIR.glob("*.js"):
        code = module.read_text(encoding="utf-8")
        assert not re.search(r"\.(inner|outer)HTML\s*=|insertAdjacentHTML|document\.write", code), (
            f"{module.name} inserts HTML"
        )


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
