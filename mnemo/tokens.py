"""Token counting with a real offline tokenizer: the WordPiece vocabulary shipped for MiniLM.

Recall packs memories under a token budget, so it counts the tokens of every
candidate; `count_many` batch-encodes and both functions cache per text.

The tokenizer is bert-base-uncased WordPiece (30,522 tokens, lowercase), loaded
from `mnemo/assets/all-MiniLM-L6-v2.tokenizer.json` with the `tokenizers`
package. Counts exclude the [CLS] / [SEP] markers and are never truncated: a
1 MB text counts fully. WordPiece turns a "word" longer than 100 characters
(a hash, base64, a minified blob) into a single [UNK]; such a span is counted
as one token per 3 characters instead, so a blob cannot slip into a budget
for free.

If the asset or `tokenizers` cannot be loaded, counting falls back to a
regex estimate (words x 1.3 + punctuation marks) and `tokenizer_name()`
says "regex-estimate", so every artefact records which counter it used.
"""

from __future__ import annotations

import math
import re
import threading
from collections.abc import Iterable
from pathlib import Path
from typing import Any

ASSETS = Path(__file__).parent / "assets"
TOKENIZER_PATH = ASSETS / "all-MiniLM-L6-v2.tokenizer.json"
# sha256 of tokenizer.json in sentence-transformers/all-MiniLM-L6-v2 (bert-base-uncased vocab).
TOKENIZER_SHA256 = "be50c3628f2bf5bb5e3a7f17b1f74611b2561a3a27eeab05e5aa30f411572037"
WORDPIECE_NAME = "bert-base-uncased-wordpiece"
FALLBACK_NAME = "regex-estimate"

_UNK_ID = 100  # [UNK] in the bert-base-uncased vocabulary
_LONG_WORD = 100  # WordPiece's max_input_chars_per_word: longer words become one [UNK]
_CHARS_PER_BLOB_TOKEN = 3
_CACHE_MAX = 100_000  # entries; texts longer than _CACHE_TEXT_MAX are not cached (memory)
_CACHE_TEXT_MAX = 20_000
_WORD = re.compile(r"\w+|[^\w\s]", re.UNICODE)
_SPACE = re.compile(r"\s")
_PIECE = 8_000  # long texts are encoded in pieces of about this many characters

_lock = threading.Lock()
_state: dict[str, Any] = {}
_cache: dict[str, int] = {}


def load_wordpiece(path: Path | None = None) -> Any:
    """Return a fresh `tokenizers.Tokenizer` from the shipped asset (or `path`), padding and truncation off."""
    from tokenizers import Tokenizer

    tok = Tokenizer.from_file(str(path or TOKENIZER_PATH))
    # The upstream file pads and truncates to 128 for the model; callers choose their own limits.
    tok.no_padding()
    tok.no_truncation()
    return tok


def _tokenizer() -> Any | None:
    """Return the shared counting tokenizer, or None when it cannot be loaded (the fallback is used)."""
    if "tok" not in _state:
        with _lock:
            if "tok" not in _state:
                try:
                    _state["tok"] = load_wordpiece()
                # tokenizers raises a plain Exception for a missing or corrupt file, hence the broad catch;
                # the fallback is named by tokenizer_name() and the reason kept in fallback_reason().
                except Exception as exc:
                    _state["tok"] = None
                    _state["why"] = f"{type(exc).__name__}: {exc}"
    return _state["tok"]


def tokenizer_name() -> str:
    """Return the name of the counter in use: "bert-base-uncased-wordpiece" or "regex-estimate"."""
    return WORDPIECE_NAME if _tokenizer() is not None else FALLBACK_NAME


def fallback_reason() -> str | None:
    """Return why the WordPiece tokenizer could not be loaded, or None when it is in use."""
    _tokenizer()
    return _state.get("why")


def estimate(text: str) -> int:
    """Return the regex estimate of `text`'s token count: words x 1.3 plus punctuation marks."""
    words = punct = 0
    for m in _WORD.finditer(text):
        if m.group()[0].isalnum() or m.group()[0] == "_":
            words += 1
        else:
            punct += 1
    return math.ceil(words * 1.3) + punct


def valid_utf8(text: str) -> str:
    """Return `text` as valid UTF-8 (lone surrogates replaced), which the Rust tokenizer requires."""
    try:
        text.encode("utf-8")
        return text
    except UnicodeEncodeError:
        return text.encode("utf-8", "replace").decode("utf-8")


def _pieces(text: str) -> list[str]:
    """Return `text` cut at whitespace into pieces of about _PIECE characters.

    WordPiece never joins tokens across whitespace, so the counts of the pieces
    add up to the count of the whole; the tokenizer is much faster on pieces
    (a 1 MB text: ~0.2 s instead of ~0.9 s) and encodes them in parallel.
    """
    if len(text) <= 2 * _PIECE:
        return [text]
    out, start = [], 0
    while start < len(text):
        m = _SPACE.search(text, start + _PIECE)
        end = m.start() if m else len(text)
        out.append(text[start:end])
        start = end
    return out


def _count_encoding(enc: Any) -> int:
    """Return the token count of one encoding, with over-long [UNK] words counted by length."""
    ids = enc.ids
    n = len(ids)
    if _UNK_ID in ids:
        for i, tid in enumerate(ids):
            if tid == _UNK_ID:
                start, end = enc.offsets[i]
                if end - start > _LONG_WORD:
                    n += math.ceil((end - start) / _CHARS_PER_BLOB_TOKEN) - 1
    return n


def count_many(texts: list[str], *, cache: bool = True) -> list[int]:
    """Return the token count of each text, batch-encoding those not seen before.

    With `cache=False` the per-text cache is neither read nor filled (a bulk count, such as a store
    counting a million rows once, would only churn it).
    """
    out: list[int | None] = [_cache.get(t) for t in texts] if cache else [None] * len(texts)
    todo = sorted({t for t, n in zip(texts, out, strict=True) if n is None})
    if todo:
        tok = _tokenizer()
        if tok is None:
            counts = [estimate(t) for t in todo]
        else:
            pieces = [_pieces(valid_utf8(t)) for t in todo]
            flat = [p for ps in pieces for p in ps]
            encs = iter(tok.encode_batch(flat, add_special_tokens=False))
            counts = [sum(_count_encoding(next(encs)) for _ in ps) for ps in pieces]
        fresh = dict(zip(todo, counts, strict=True))
        if cache:
            learn(fresh.items())
        out = [n if n is not None else fresh[t] for t, n in zip(texts, out, strict=True)]
    return [int(n) for n in out]  # type: ignore[arg-type]


def learn(counts: Iterable[tuple[str, int]]) -> None:
    """Keep counts made elsewhere by this counter (a store keeps each memory's), so `count_many` reuses them.

    Only counts made by the counter `tokenizer_name()` names may be given: the cache is that counter's.
    """
    fresh = [(t, int(n)) for t, n in counts if len(t) <= _CACHE_TEXT_MAX]
    if len(_cache) + len(fresh) > _CACHE_MAX:
        _cache.clear()
    _cache.update(fresh[-_CACHE_MAX:])


def count_tokens(text: str) -> int:
    """Return the number of tokens in `text` (no truncation, no [CLS]/[SEP])."""
    cached = _cache.get(text)
    if cached is not None:
        return cached
    return count_many([text])[0]
