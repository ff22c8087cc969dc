"""Token counting: real WordPiece counts, no truncation, odd input, and the named fallback."""

import time

import pytest

from mnemo import tokens


def test_uses_the_shipped_wordpiece_tokenizer():
    assert tokens.tokenizer_name() == "bert-base-uncased-wordpiece"
    assert tokens.fallback_reason() is None


@pytest.mark.parametrize(
    "text,expected",
    [
        ("", 0),
        ("hello world", 2),
        ("Hello, world!", 4),  # hello , world !
        ("The cat sits on the mat", 6),
        ("unaffable", 3),  # una ##ffa ##ble
        ("I moved from Berlin to Lisbon last week.", 9),
        ("Tokenization isn't trivial: 3.14", 10),  # token ##ization isn ' t trivial : 3 . 14
        ("東京は日本", 5),  # CJK characters are split one by one
    ],
)
def test_known_wordpiece_counts(text, expected):
    assert tokens.count_tokens(text) == expected


def test_count_many_matches_count_tokens_and_keeps_order():
    texts = ["hello world", "", "The cat sits on the mat", "hello world", "unaffable"]
    assert tokens.count_many(texts) == [tokens.count_tokens(t) for t in texts] == [2, 0, 6, 2, 3]
    assert tokens.count_many([]) == []


def test_a_megabyte_counts_fully_and_fast():
    sentence = "The quick brown fox jumps over the lazy dog. "  # 10 tokens
    text = sentence * 23_000  # ~1 MB
    start = time.perf_counter()
    assert tokens.count_tokens(text) == 230_000
    assert time.perf_counter() - start < 10


def test_long_words_are_not_free():
    # WordPiece maps a >100-character word to one [UNK]; a blob must still cost its length.
    blob = "ab12" * 300  # 1,200 characters, no spaces
    assert tokens.count_tokens(blob) == 400
    assert tokens.count_tokens("key: " + blob) == 402


@pytest.mark.parametrize(
    "text",
    [
        "a\ud800b",  # a lone surrogate (not valid UTF-8)
        "\x00\x01\x02binary\xff\xfe",
        "emoji 🧠🧠 and combining e\u0301 and RTL שלום",
        "\u200b\u200b zero width",
        bytes(range(256)).decode("latin-1"),
    ],
)
def test_odd_text_does_not_crash(text):
    n = tokens.count_tokens(text)
    assert isinstance(n, int) and n >= 1
    assert tokens.count_many([text, text]) == [n, n]


def test_regex_estimate_is_the_named_fallback(monkeypatch):
    monkeypatch.setattr(tokens, "_state", {"tok": None, "why": "OSError: gone"})
    monkeypatch.setattr(tokens, "_cache", {})
    assert tokens.tokenizer_name() == "regex-estimate"
    assert tokens.fallback_reason() == "OSError: gone"
    # 4 words x 1.3 -> 6, plus 2 punctuation marks.
    assert tokens.count_tokens("Hello, world! I moved") == 6 + 2
    assert tokens.estimate("") == 0


def test_fallback_when_the_asset_is_missing(monkeypatch, tmp_path):
    monkeypatch.setattr(tokens, "TOKENIZER_PATH", tmp_path / "missing.json")
    monkeypatch.setattr(tokens, "_state", {})
    monkeypatch.setattr(tokens, "_cache", {})
    assert tokens.tokenizer_name() == "regex-estimate"
    assert "No such file" in tokens.fallback_reason()
    assert tokens.count_tokens("hello world") == 3
