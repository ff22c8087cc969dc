"""Claim keys: what the parser reads in a stored turn, indexed as extra keys that point at the turn.

    key_of = add_keys(mem, conv, times, dia_of)      # after add_turns: each turn's claims stored as keys
    dense, lexical = fold_keys(dense, key_of, k), fold_keys(lexical, key_of, k)

A turn stored verbatim is found by its own words. A claim the offline parser reads in it says the
same thing in the record's words, with the speaker named where the turn says "I": "Mel: I just
started at the animal shelter" has the key "Mel just started at the animal shelter". Keys are stored
in the turn's store (one corpus for the lexical index, so their BM25 scores compare with the turns'),
at the turn's time (the time scope finds them), with meta {"key_of": the turn's memory id}; a search's
key hits count as hits of their turn, at the better of the two scores (`fold_keys`).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from datetime import datetime
from typing import Any

from mnemo.config import WriteConfig
from mnemo.eval import datasets
from mnemo.extract import AHEAD, extract_offline, parsed_texts, read_ahead

_USER = re.compile(r"\bthe user(?='s\b|\b)", re.IGNORECASE)


def keys_of(text: str, speaker: str) -> list[str]:
    """Return the claim texts the offline parser reads in one turn, with "the user" as `speaker`.

    Notes (sentences kept whole, no claim read) are left out: they repeat the turn's own words.
    """
    out = []
    for c in extract_offline(text):
        if c.attribute is None or c.meta.get("rule", "").startswith("note"):
            continue
        key = _USER.sub(speaker, c.text)
        if key not in out:
            out.append(key)
    return out


def add_keys(writer: Any, conv: datasets.Conversation, times: Sequence[datetime], dia_of: dict[str, str],
             embed: Any) -> dict[str, str]:
    """Store the claim keys of every turn of `conv` (stored by `add_turns`, `dia_of`); return {key id: turn id}."""
    turn_of = {d: m for m, d in dia_of.items()}
    key_of: dict[str, str] = {}
    for s, when in zip(conv.sessions, times, strict=True):
        # A session's sentences parsed in one batch; the parser keeps the last few hundred, not a conversation's.
        read_ahead([x for t in s.turns for x in parsed_texts(t.text, (), WriteConfig(), None)][:AHEAD])
        texts, metas = [], []
        for t in s.turns:
            for key in keys_of(t.text, t.speaker):
                texts.append(key)
                metas.append({"key_of": turn_of[t.dia_id], "dia_id": t.dia_id, "speaker": t.speaker})
        if texts:
            made = writer.insert_many(texts, user=conv.id, kind="episodic", category="event", metas=metas, at=when,
                                     vectors=embed(texts))
            key_of.update(zip((r.id for r in made), (m["key_of"] for m in metas), strict=True))
    return key_of


def fold_keys(hit_list: list[tuple[str, float]], key_of: dict[str, str], k: int) -> list[tuple[str, float]]:
    """Return `hit_list` with each key hit counted as its turn's, each turn at its best score, best first, cut to `k`."""
    best: dict[str, float] = {}
    for m, score in hit_list:
        turn = key_of.get(m, m)
        if score > best.get(turn, float("-inf")):
            best[turn] = score
    return sorted(best.items(), key=lambda kv: -kv[1])[:k]
