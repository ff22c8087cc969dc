"""The shared shape of every benchmark loader: where the data lives, the records, dates, checksums.

Loaders in `datasets.dialog` and `datasets.updates` return a `Dataset` made of these plain
dataclasses, so a harness can treat LoCoMo, BEAM or MEME alike: conversations of sessions of
turns, and questions that point back at them by id.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

from mnemo.errors import DatasetError
from mnemo.eval.datasets import checksums
from mnemo.provenance import DATA_ENV, dataset_root

DATASETS = ("locomo", "realtalk", "beam", "mquake_hard", "meme", "prefeval", "longmemeval")

# What a question probes, whatever its dataset calls it (see each loader for the mapping).
PROBES = (
    "recall",  # the answer is in the record and has not changed
    "temporal",  # the answer needs dates (LoCoMo / REALTALK category 2, LongMemEval temporal-reasoning)
    "update",  # a later turn changed the fact: answer with the new value, not the stale one
    "contradiction",  # two turns disagree: surface both, do not pick one silently
    "abstain",  # the record is silent (or the premise is false): say so
    "deletion",  # the user asked to forget the fact: do not reveal it
    "cascade",  # a fact that depends on a changed fact must change with it
    "tracking",  # list every value a fact took, in order
    "preference",  # a stated preference must shape the answer
    "other",  # anything else (summaries, instructions, event ordering)
)


def first_existing(root: Path, candidates: Iterable[str], name: str) -> Path:
    """Return the first of `candidates` (paths relative to `root`) that exists, or raise naming them all."""
    tried = list(candidates)
    for rel in tried:
        if (root / rel).is_file():
            return root / rel
    raise DatasetError(
        f"{name}: none of {', '.join(tried)} under {root}; run `mnemo data download {name}` or fix {DATA_ENV}"
    )


# Every date format the benchmarks use, tried in order.
_DATE_FORMATS = (
    "%I:%M %p on %d %B, %Y",  # LoCoMo: "1:56 pm on 8 May, 2023"
    "%I:%M %p on %d %b, %Y",
    "%d.%m.%Y, %H:%M:%S",  # REALTALK: "29.12.2023, 22:42:04"
    "%Y/%m/%d (%a) %H:%M",  # LongMemEval and MEME: "2023/05/30 (Tue) 23:40"
    "%B-%d-%Y",  # BEAM: "March-15-2024"
    "%d %B, %Y",  # LoCoMo event summaries: "8 May, 2023"
)


def parse_when(raw: str | None) -> datetime | None:
    """Return `raw` parsed as a naive datetime, or None when no known format fits (the raw string is kept by callers)."""
    if not raw or not isinstance(raw, str):
        return None
    text = " ".join(raw.split())
    for fmt in _DATE_FORMATS:
        try:
            return datetime.strptime(text, fmt)
        except ValueError:
            continue
    try:
        return datetime.fromisoformat(text)
    except ValueError:
        return None


@dataclass(frozen=True)
class DialogTurn:
    """One message of a conversation, with the id the benchmark's evidence uses."""

    dia_id: str  # evidence id: "D3:7" (LoCoMo), "42" (BEAM message id), "<session>_<i>" (LongMemEval)
    speaker: str  # the speaker's name, or "user" / "assistant"
    text: str  # what to index: the utterance + "\n[shares <caption>]" for a shared image, as upstream
    role: str = "user"  # "user" | "assistant"; both people in LoCoMo / REALTALK are users
    raw_text: str = ""  # the utterance as stored upstream, without the caption
    caption: str | None = None  # blip_caption of a shared image
    date_time: datetime | None = None  # the turn's own timestamp, where the dataset has one
    meta: dict[str, Any] = field(default_factory=dict)  # has_answer, question_type, plan index, ...

    @property
    def document(self) -> str:
        """Return the turn as upstream renders it for retrieval: "<speaker>: <text>"."""
        return f"{self.speaker}: {self.text}"


@dataclass(frozen=True)
class Session:
    """A stretch of conversation with one date: a LoCoMo session, a BEAM batch, a LongMemEval haystack session."""

    id: str
    date_time: datetime | None  # parsed where parseable
    date_raw: str | None  # the date exactly as the dataset writes it
    turns: list[DialogTurn]
    meta: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class Conversation:
    """One conversation (or episode, or case) that questions are asked about."""

    id: str
    speakers: list[str]
    sessions: list[Session]
    meta: dict[str, Any] = field(default_factory=dict)

    @property
    def turns(self) -> list[DialogTurn]:
        """Return every turn in order."""
        return [t for s in self.sessions for t in s.turns]

    @property
    def turn_ids(self) -> set[str]:
        """Return the set of every turn's dia_id (what evidence is checked against)."""
        return {t.dia_id for s in self.sessions for t in s.turns}

    def session_of(self, dia_id: str) -> str | None:
        """Return the id of the session holding turn `dia_id`, or None."""
        for s in self.sessions:
            if any(t.dia_id == dia_id for t in s.turns):
                return s.id
        return None


@dataclass(frozen=True)
class Question:
    """One probe, with its gold answer and the turn ids that support it."""

    id: str
    conversation_id: str
    question: str
    answer: str | None  # None where the dataset gives none (most LoCoMo category 5, PrefEval)
    category: int  # the dataset's own category number (see each loader)
    category_name: str
    evidence: list[str]  # cleaned dia_ids of supporting turns, in the dataset's order
    probe: str = "recall"  # one of PROBES
    extra: dict[str, Any] = field(default_factory=dict)  # adversarial_answer, stale ids, ...


@dataclass
class Dataset:
    """What a loader returns: conversations, questions, what was left out and why, and file checksums."""

    name: str
    conversations: list[Conversation]
    questions: list[Question]
    dropped: list[tuple[str, str]] = field(default_factory=list)  # (question id, why), e.g. no evidence
    heldout_excluded: list[str] = field(default_factory=list)  # held-out ids present but left out
    checksums: dict[str, str] = field(default_factory=dict)  # "<folder>/<path>" -> sha256 of each file read
    meta: dict[str, Any] = field(default_factory=dict)  # source layout, upstream repo and commit, notes

    def conversation(self, conversation_id: str) -> Conversation:
        """Return the conversation with id `conversation_id`."""
        for c in self.conversations:
            if c.id == conversation_id:
                return c
        raise KeyError(conversation_id)


def sha256_file(path: Path) -> str:
    """Return the hex sha256 of the file at `path`, read in chunks."""
    digest = hashlib.sha256()
    with open(path, "rb") as fh:
        for chunk in iter(lambda: fh.read(1 << 20), b""):
            digest.update(chunk)
    return digest.hexdigest()


def checksum(name: str, root: Path, paths: Iterable[Path], verify: bool = True) -> dict[str, str]:
    """Return {path relative to root's parent: sha256} for `paths`, raising DatasetError on a known mismatch.

    The key is "<folder>/<path>" (for example "locomo/locomo10_shared_8conv.json") so a result
    records which copy it was computed on.
    """
    expected = checksums.known(name)
    out: dict[str, str] = {}
    for path in paths:
        rel = path.relative_to(root).as_posix()
        actual = sha256_file(path)
        want = expected.get(rel)
        if verify and want is not None and want != actual:
            raise DatasetError(
                f"{name}: {path} has sha256 {actual}, expected {want}; re-download it "
                f"(`mnemo data download {name}`) or pass verify=False to load it anyway"
            )
        out[f"{root.name}/{rel}"] = actual
    return out


def verify_checksums(name: str, path: str | Path | None = None) -> dict[str, dict[str, Any]]:
    """Check every file of dataset `name` whose sha256 the READMEs give; return a report keyed by path.

    Each entry is {"expected": sha256, "actual": sha256, "ok": bool} for a file that is present.
    Files of either layout (this folder's or upstream's) are checked where present, so a partial
    copy reports only what it holds; a folder with none of the dataset's files raises DatasetError.
    `path` is the dataset folder (default `$MNEMO_DATA_DIR/<name>`).
    """
    root = dataset_root(name, path)
    report: dict[str, dict[str, Any]] = {}
    for rel, want in sorted(checksums.known(name).items()):
        file = root / rel
        if file.is_file():
            actual = sha256_file(file)
            report[rel] = {"expected": want, "actual": actual, "ok": actual == want}
    if not report:
        raise DatasetError(
            f"{name}: no file with a known checksum under {root}; run `mnemo data download {name}`"
        )
    return report
