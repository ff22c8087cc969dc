"""Embedders: the hash bag of words, the real MiniLM (fidelity to the fp32 model), the OpenAI seam, specs."""

import json
import os
import shutil
import subprocess
import sys

import numpy as np
import pytest
from stub_openai import StubOpenAI

from mnemo import embed
from mnemo.embed import HashEmbedder, MiniLMEmbedder, OpenAIEmbedder, make_embedder
from mnemo.errors import ConfigError, LLMUnavailable
from mnemo.tokens import ASSETS

CAT = "The cat sits on the mat"
CAT2 = "A cat is sitting on a mat"
OTHER = "The quarterly budget report is due on Friday."
TEXTS = [CAT, CAT2, OTHER, "Lead time for AX-7 is 14 days", "alice prefers green tea"]

needs_minilm = pytest.mark.skipif(not embed._minilm_installed(), reason="needs mnemo-ltm[local]")


@pytest.fixture(scope="module")
def minilm():
    return MiniLMEmbedder()


def cos(a, b):
    return float(np.dot(a, b))


# --- hash ---------------------------------------------------------------------------------------


def test_hash_shape_dtype_and_norm():
    emb = HashEmbedder()
    vecs = emb.embed(TEXTS)
    assert emb.name == "hash-bow-384" and emb.dim == 384
    assert vecs.shape == (5, 384) and vecs.dtype == np.float32
    assert np.allclose(np.linalg.norm(vecs, axis=1), 1.0, atol=1e-5)
    assert emb.embed([]).shape == (0, 384)


@pytest.mark.parametrize("text", ["", "   ", "!!! ???", "\n\t"])
def test_hash_text_without_words_is_the_zero_vector(text):
    vec = HashEmbedder().embed([text, CAT])
    assert not np.isnan(vec).any()
    assert np.all(vec[0] == 0) and cos(vec[0], vec[1]) == 0.0


def test_hash_similarity_follows_shared_content_words():
    v = HashEmbedder().embed([CAT, CAT2, OTHER])
    assert cos(v[0], v[1]) > cos(v[0], v[2]) + 0.2
    assert cos(v[0], v[2]) < 0.15  # sharing only "the" and "on" is not similarity


def test_hash_dim_spec_and_case_insensitive():
    emb = make_embedder("hash:64")
    assert (emb.name, emb.dim) == ("hash-bow-64", 64)
    a, b = emb.embed(["Lisbon Berlin", "lisbon BERLIN"])
    assert np.allclose(a, b)


def test_hash_is_deterministic_across_processes(tmp_path):
    code = (
        "import json; from mnemo.embed import HashEmbedder; "
        f"print(json.dumps(HashEmbedder().embed({TEXTS!r}).tolist()))"
    )
    runs = []
    # Different hash seeds: the vectors must not depend on Python's randomised hash().
    for seed in ("1", "2"):
        env = {**os.environ, "PYTHONHASHSEED": seed}
        done = subprocess.run(
            [sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=tmp_path, env=env
        )
        runs.append(json.loads(done.stdout))
    here = HashEmbedder().embed(TEXTS)
    assert np.array_equal(np.asarray(runs[0], dtype=np.float32), here)
    assert runs[0] == runs[1]


def test_hash_survives_odd_unicode():
    vecs = HashEmbedder().embed(["a\ud800b", "emoji 🧠 שלום 東京", "\x00\xff"])
    assert vecs.shape == (3, 384) and not np.isnan(vecs).any()


# --- MiniLM ---------------------------------------------------------------------------------------


@needs_minilm
def test_minilm_semantic_ordering(minilm):
    v = minilm.embed([CAT, CAT2, OTHER])
    assert v.shape == (3, 384) and v.dtype == np.float32
    assert np.allclose(np.linalg.norm(v, axis=1), 1.0, atol=1e-5)
    assert cos(v[0], v[1]) > 0.9
    assert cos(v[0], v[2]) < 0.2


@needs_minilm
def test_minilm_matches_the_original_fp32_model(minilm):
    ref = json.loads((ASSETS / "minilm-reference.json").read_text(encoding="utf-8"))
    got = minilm.embed(ref["sentences"])
    want = np.asarray(ref["vectors"], dtype=np.float32)
    fidelity = (got * want).sum(axis=1)
    assert fidelity.min() > 0.999, dict(zip(ref["sentences"], fidelity.round(5).tolist(), strict=True))


@needs_minilm
def test_minilm_deterministic_and_batch_equals_single(minilm):
    batch = minilm.embed(TEXTS)
    again = minilm.embed(TEXTS)
    single = np.vstack([minilm.embed([t]) for t in TEXTS])
    assert np.array_equal(batch, again)
    assert np.allclose(batch, single, atol=1e-5)
    assert minilm.embed([]).shape == (0, 384)


@needs_minilm
def test_minilm_long_and_odd_text(minilm):
    long = " ".join(["memory"] * 5000)
    v = minilm.embed([long, "", "a\ud800b", "\x00\x01"])
    assert v.shape == (4, 384) and not np.isnan(v).any()
    assert np.allclose(np.linalg.norm(v, axis=1), 1.0, atol=1e-5)


@needs_minilm
def test_minilm_truncates_to_256_tokens(minilm):
    head = " ".join(f"word{i}" for i in range(300))
    a, b, c = minilm.embed([head, head + " tail" * 20_000, head.replace(" ", "\n") + "\nmore"])
    # Everything past the 256th token is ignored, however long the text and wherever it is cut.
    assert np.allclose(a, b, atol=1e-6) and np.allclose(a, c, atol=1e-6)


@needs_minilm
def test_minilm_refuses_an_altered_tokenizer(tmp_path):
    bad = tmp_path / "tokenizer.json"
    bad.write_text((ASSETS / "all-MiniLM-L6-v2.tokenizer.json").read_text().replace('"cat"', '"dog"', 1))
    with pytest.raises(ConfigError, match="altered"):
        MiniLMEmbedder(tokenizer_path=bad)


@needs_minilm
def test_minilm_refuses_a_tampered_model(tmp_path):
    bad = tmp_path / "model.onnx"
    shutil.copyfile(embed.minilm_model_path(), bad)
    with bad.open("r+b") as fh:
        fh.seek(1_000_000)
        byte = fh.read(1)
        fh.seek(1_000_000)
        fh.write(bytes([byte[0] ^ 0xFF]))
    with pytest.raises(ConfigError, match="sha256"):
        MiniLMEmbedder(model_path=bad)


def test_minilm_missing_model_file(tmp_path):
    with pytest.raises(ConfigError):
        MiniLMEmbedder(model_path=tmp_path / "nope.onnx")


# --- make_embedder ------------------------------------------------------------------------------------


def test_make_embedder_specs():
    assert make_embedder("hash").name == "hash-bow-384"
    assert make_embedder(" hash:128 ").dim == 128
    custom = HashEmbedder(32)
    assert make_embedder(custom) is custom
    auto = make_embedder("auto")
    assert make_embedder(None).name == auto.name
    assert auto.name == ("minilm-l6-int8" if embed._minilm_installed() else "hash-bow-384")


@needs_minilm
def test_make_embedder_minilm():
    emb = make_embedder("minilm")
    assert (emb.name, emb.dim) == ("minilm-l6-int8", 384)


def test_auto_is_hash_when_minilm_is_not_installed(monkeypatch):
    monkeypatch.setattr(embed, "_minilm_installed", lambda: False)
    assert make_embedder("auto").name == "hash-bow-384"


@pytest.mark.parametrize(
    "spec", ["bogus", "hash:x", "hash:4", "minilm:big", "openai", "openai:", "", "auto:1"]
)
def test_make_embedder_errors_list_the_options(spec):
    with pytest.raises(ConfigError) as err:
        make_embedder(spec if spec else "   ")
    if spec in ("bogus", "minilm:big", "openai", "openai:", "auto:1"):
        assert "hash:DIM" in str(err.value) and "openai:MODEL" in str(err.value)


def test_make_embedder_rejects_a_non_embedder():
    with pytest.raises(ConfigError, match="name, dim and embed"):
        make_embedder(42)


# --- OpenAI-compatible ---------------------------------------------------------------------------------


def _clear_keys(monkeypatch):
    for var in ("DASHSCOPE_API_KEY", "OPENAI_API_KEY", "MNEMO_BASE_URL", "MNEMO_LLM"):
        monkeypatch.delenv(var, raising=False)


def test_openai_embedder_without_key_says_what_to_set(monkeypatch):
    _clear_keys(monkeypatch)
    with pytest.raises(LLMUnavailable, match="DASHSCOPE_API_KEY"):
        make_embedder("openai:text-embedding-v4")
    monkeypatch.setenv("MNEMO_BASE_URL", "http://127.0.0.1:9/v1")
    with pytest.raises(LLMUnavailable, match="OPENAI_API_KEY"):
        make_embedder("openai:text-embedding-v4")


def test_openai_embedder_against_a_real_http_server(monkeypatch):
    _clear_keys(monkeypatch)
    with StubOpenAI() as stub:
        monkeypatch.setenv("MNEMO_BASE_URL", stub.base_url)
        monkeypatch.setenv("OPENAI_API_KEY", "test-key")
        emb = make_embedder("openai:text-embedding-v4")
        assert (emb.name, emb.dim) == ("openai:text-embedding-v4", 1024)
        texts = [f"memory number {i}" for i in range(23)] + [""]
        vecs = emb.embed(texts)
        assert vecs.shape == (24, 1024) and vecs.dtype == np.float32
        assert np.allclose(np.linalg.norm(vecs, axis=1), 1.0, atol=1e-5)
        bodies = [b for p, b in stub.requests if p.endswith("/embeddings")]
        # DashScope's limit: at most 10 texts a request, with the dimensions asked for.
        assert [len(b["input"]) for b in bodies] == [10, 10, 4]
        assert all(b["dimensions"] == 1024 and b["model"] == "text-embedding-v4" for b in bodies)
        # Rows come back reversed from the stub: order must follow the input, and repeat exactly.
        assert np.array_equal(emb.embed(texts[3:4])[0], vecs[3])
        assert emb.models_echoed == {"text-embedding-v4-echo"}
        assert emb.embed([]).shape == (0, 1024)


def test_openai_embedder_probes_an_unknown_models_dimension():
    with StubOpenAI(embed_dim=24) as stub:
        emb = OpenAIEmbedder(model="local-embedder", base_url=stub.base_url, api_key="k")
        assert emb.dim == 24
        assert emb.embed(["a", "b"]).shape == (2, 24)
        assert "dimensions" not in stub.requests[-1][1]


# --- phrase cache (write.slot_similarity) ------------------------------------------------------


class Counting:
    """A hash embedder that remembers every batch it was asked for."""

    def __init__(self):
        self.inner = HashEmbedder()
        self.name, self.dim = self.inner.name, self.inner.dim
        self.asked: list[list[str]] = []

    def embed(self, texts):
        self.asked.append(list(texts))
        return self.inner.embed(texts)


def test_phrase_vectors_embeds_each_phrase_once_per_embedder_and_gives_its_vector():
    cache, emb, other = embed.PhraseVectors(), Counting(), Counting()
    first = cache.embed(emb, ["warranty period", "home city", "warranty period"])
    again = cache.embed(emb, ["home city", "manager", "warranty period"])
    assert emb.asked == [["home city", "warranty period"], ["manager"]]
    for p, v in {**first, **again}.items():
        assert np.array_equal(v, HashEmbedder().embed([p])[0])
    cache.embed(other, ["home city"])  # another model: its own vectors, never this one's
    assert other.asked == [["home city"]]


def test_phrase_vectors_drops_the_least_recently_used_past_its_size():
    cache, emb = embed.PhraseVectors(size=2), Counting()
    cache.embed(emb, ["a b", "c d"])
    cache.embed(emb, ["a b"])  # used again: "c d" is now the oldest
    cache.embed(emb, ["e f"])
    emb.asked.clear()
    cache.embed(emb, ["a b", "c d", "e f"])
    assert emb.asked == [["c d"]]


def test_phrase_vectors_without_a_weak_reference_asks_every_time():
    class Slotted:
        __slots__ = ("name", "dim", "asked")

        def __init__(self):
            self.name, self.dim, self.asked = "hash-bow-384", 384, 0

        def embed(self, texts):
            self.asked += 1
            return HashEmbedder().embed(texts)

    cache, emb = embed.PhraseVectors(), Slotted()
    cache.embed(emb, ["home city"])
    cache.embed(emb, ["home city"])
    assert emb.asked == 2
