"""The word lists mnemo still needs (slots, verb classes), loaded once from `assets/words/` (see its README)."""

from __future__ import annotations

from dataclasses import dataclass
from functools import cache
from pathlib import Path

WORDS = Path(__file__).parent / "assets" / "words"


def _lines(name: str) -> list[str]:
    out = []
    for line in (WORDS / name).read_text(encoding="utf-8").splitlines():
        line = line.split("#", 1)[0].strip()
        if line:
            out.append(line)
    return out


def words(name: str) -> frozenset[str]:
    """Return the set of entries of `words/<name>.txt`."""
    return _words(name)


@cache
def _words(name: str) -> frozenset[str]:
    return frozenset(_lines(f"{name}.txt"))


@cache
def aspects() -> dict[str, str]:
    """Return {aspectual verb: "negate" | "keep" | "intend"}."""
    return dict(line.split("\t")[:2] for line in _lines("aspect_verbs.txt"))


@cache
def ending_objects() -> frozenset[str]:
    """Return the aspectual verbs that also end what their direct object names ("quit my job")."""
    return frozenset(line.split("\t")[0] for line in _lines("aspect_verbs.txt") if line.endswith("\tobject"))


@dataclass(frozen=True)
class SlotInfo:
    """What the slot table says of one phrase: its canonical slot, cardinality, category and value type."""

    slot: str
    single: bool
    category: str
    needs: str  # "*" or a value type the phrase needs to mean this slot ("place")


@cache
def slot_table() -> dict[str, SlotInfo]:
    """Return {lemmatised phrase: SlotInfo} from `words/slots.tsv`."""
    table: dict[str, SlotInfo] = {}
    for line in _lines("slots.tsv"):
        phrase, slot, card, category, needs = (line.split("\t") + ["*"] * 5)[:5]
        table[phrase] = SlotInfo(slot, card == "single", category, needs)
    return table


@cache
def multi_slots() -> frozenset[str]:
    """Return the canonical slots that hold several values at once."""
    listed = words("multi_slots")
    return listed | {info.slot for info in slot_table().values() if not info.single}


@cache
def slot_families() -> dict[str, frozenset[str]]:
    """Return {canonical slot: the slots of its family} from `assets/words/slot_families.tsv`."""
    out: dict[str, frozenset[str]] = {}
    for line in _lines("slot_families.tsv"):
        family = frozenset(line.split("\t"))
        for slot in family:
            out[slot] = out.get(slot, frozenset()) | family
    return out


@cache
def pronoun_of() -> dict[str, str]:
    """Return {noun for a person: "he" or "she"} from `assets/words/gendered_nouns.tsv` ("sister" -> "she")."""
    return dict(line.split("\t")[:2] for line in _lines("gendered_nouns.tsv"))


@cache
def kin() -> dict[str, str]:
    """Return {everyday kin word: the word a question uses} from `assets/words/kin_terms.tsv` ("nan" -> "grandmother")."""
    return dict(line.split("\t")[:2] for line in _lines("kin_terms.tsv"))
