"""Portable memory: export a store to JSON (lossless, with vectors) or Markdown (for people), and import it.

The JSON export is JSON Lines: UTF-8, one JSON object a line, written and read as
a stream, so an export of any size needs one batch of memory, not the whole store.
Format version 1:

    {"format": "mnemo-export", "version": 1, "embedder": "hash-bow-256", "dim": 256, "user": null}
    {"type": "turn", "id": "t-...", "user": "alice", "text": "...", "at": "2025-01-01T00:00:00+00:00", ...}
    {"type": "memory", ...every MemoryRecord field..., "embedding": "<base64 of float32, little-endian>"}
    {"type": "event", "id": "e-...", "memory_id": "m-...", "at": "...", "action": "superseded", ...}
    {"type": "link", "src": "m-...", "dst": "m-...", "kind": "supersedes", "at": "..."}
    {"type": "end", "counts": {"turn": 1, "memory": 2, "event": 3, "link": 1}, "sha256": "..."}

- Vectors are the stored float32 bytes in base64: exact (no re-embedding on import)
  and four times smaller than decimal lists. Tombstones keep every field.
- The trailer's counts and sha256 (of every earlier line's bytes) detect a truncated
  or damaged file; such a file is refused and nothing is imported. Anyone can recompute
  them, so they do not prove where a file came from: with a key the operator holds
  (`key=`, or MNEMO_EXPORT_KEY for the CLI and the servers: `export_key`), the trailer
  also carries "hmac_sha256", an HMAC-SHA256 of the same bytes under that key, and an
  import given a key refuses a file whose HMAC differs (one changed byte) or that has none.
  A file that is signed but imported without a key is checked by its sha256 only.
- Every value is checked on import, signed or not (`check_record`): statuses, kinds,
  categories and sources in their sets, a finite importance in [0, 1], finite vectors
  of the store's dimension, user names and texts the store can hold (`mnemo.validate`),
  non-negative counts, times that are times. A file with one bad value imports nothing.
- No time or path is written: the same content always gives the same bytes, so
  export -> import -> export is byte-identical and two exports diff meaningfully.
- A file of a newer format version is refused with a message to upgrade mnemo.
- Importing into a store with another embedder (name or dimension) raises
  EmbedderMismatch: vectors of different models cannot be mixed.
- Ids that already exist in the target store (turns, memories, events; identical
  links) are refused by default (`on_conflict="error"`: InvalidInput, nothing
  imported, since the memories table has no primary key to do it for us), or
  skipped explicitly with `on_conflict="skip"`, which reports what it skipped.

The Markdown export groups memories by user, status and kind, each with its
history of events and reasons. It is for reading and cannot be imported.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import logging
import os
import re
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field, fields
from datetime import datetime
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any

import numpy as np

from . import validate
from .clock import utc
from .errors import ConfigError, EmbedderMismatch, InvalidInput
from .model import CATEGORIES, KINDS, SOURCES, STATUSES, Event, Link, MemoryRecord, Turn, TurnOutcome
from .store import Store, recorded_embedder

if TYPE_CHECKING:
    from .embed import Embedder

FORMAT = "mnemo-export"
FORMAT_VERSION = 1
FORMATS = ("json", "markdown")
CONFLICTS = ("error", "skip")
TYPES: dict[str, type] = {"turn": Turn, "memory": MemoryRecord, "event": Event, "link": Link}
# The store's batch names, in the order the file holds them.
SECTIONS = {"turns": "turn", "memories": "memory", "events": "event", "links": "link"}
_TIMES = {"created_at", "valid_from", "last_accessed", "expires_at", "status_at", "at"}
KEY_ENV = "MNEMO_EXPORT_KEY"  # the operator's signing key for exports (read only by `export_key`)
MIN_KEY_BYTES = 16
MAC = "hmac_sha256"  # the trailer field holding the signature
log = logging.getLogger(__name__)


# ----------------------------------------------------------------- signing (pure)
def signing_key(key: str | bytes | None) -> bytes | None:
    """Return `key` as bytes (None for no key); ConfigError for a key too short to sign with."""
    if key is None:
        return None
    raw = key.encode("utf-8") if isinstance(key, str) else bytes(key)
    if len(raw) < MIN_KEY_BYTES:
        raise ConfigError(f"an export signing key needs at least {MIN_KEY_BYTES} bytes; use a long random one "
                          "(python -c 'import secrets; print(secrets.token_urlsafe(32))')")
    return raw


def export_key(env: dict[str, str] | None = None) -> str | None:
    """Return the operator's export signing key from MNEMO_EXPORT_KEY (None when unset): the one place it is read."""
    value = (os.environ if env is None else env).get(KEY_ENV, "").strip()
    return value or None


class _Digests:
    """The sha256 of an export's bytes and, with a key, their HMAC: fed the same bytes, line by line."""

    def __init__(self, key: bytes | None):
        self.sha = hashlib.sha256()
        self.mac = hmac.new(key, digestmod=hashlib.sha256) if key is not None else None

    def update(self, data: bytes) -> None:
        self.sha.update(data)
        if self.mac is not None:
            self.mac.update(data)

    def trailer(self, counts: dict[str, int]) -> dict[str, Any]:
        out: dict[str, Any] = {"type": "end", "counts": counts, "sha256": self.sha.hexdigest()}
        if self.mac is not None:
            out[MAC] = self.mac.hexdigest()
        return out


# ----------------------------------------------------------------- encoding (pure)
def encode(kind: str, value: Any, vector: np.ndarray | None = None) -> dict[str, Any]:
    """Return the JSON object of one turn, memory (with its vector), event or link."""
    obj: dict[str, Any] = {"type": kind}
    for f in fields(TYPES[kind]):
        v = getattr(value, f.name)
        obj[f.name] = v.isoformat() if isinstance(v, datetime) else list(v) if isinstance(v, tuple) else v
    if kind == "memory":
        raw = np.asarray(vector, dtype="<f4").tobytes()
        obj["embedding"] = base64.b64encode(raw).decode("ascii")
    return obj


def decode(obj: dict[str, Any], dim: int) -> tuple[str, Any, np.ndarray | None]:
    """Return (kind, value, vector or None) from one JSON object; raise InvalidInput on anything off."""
    kind = obj.get("type")
    if kind not in TYPES:
        raise InvalidInput(f"unknown record type {kind!r}; expected one of {', '.join(TYPES)}")
    cls = TYPES[kind]
    names = {f.name for f in fields(cls)}
    extra = set(obj) - names - {"type", "embedding"}
    if extra:
        raise InvalidInput(f"unknown {kind} field(s) {sorted(extra)}")
    values = {k: v for k, v in obj.items() if k in names}
    for name in _TIMES & set(values):
        if values[name] is not None:
            values[name] = datetime.fromisoformat(values[name])
    if "references" in values:
        values["references"] = tuple(values["references"] or ())
    vector = None
    if kind == "memory":
        raw = base64.b64decode(obj.get("embedding") or "", validate=True)
        vector = np.frombuffer(raw, dtype="<f4").astype(np.float32)
        if vector.shape != (dim,):
            raise InvalidInput(f"memory {values.get('id')!r} has a vector of {vector.size} dims, expected {dim}")
    value = cls(**values)
    check_record(kind, value, vector)
    return kind, value, vector


def check_record(kind: str, value: Any, vector: np.ndarray | None = None) -> None:
    """Raise InvalidInput unless a decoded turn, memory (with its vector), event or link could have been stored."""
    if kind == "turn":
        validate.name(value.id, "turn id")
        validate.name(value.user, "turn user")
        validate.storable(value.text, "turn text")
        _length(value.text, "turn text")
        _names(value, "session", "agent", "role")
        _time(value.at, "turn at", required=True)
        validate.meta(value.meta, "turn meta")
    elif kind == "memory":
        validate.name(value.id, "memory id")
        validate.name(value.user, "memory user")
        validate.storable(value.text, "memory text")
        _length(value.text, "memory text")
        validate.one_of(value.kind, KINDS, "kind")
        validate.one_of(value.category, CATEGORIES, "category")
        validate.one_of(value.source, SOURCES, "source")
        validate.one_of(value.status, STATUSES, "status")
        _names(value, "subject", "attribute", "value", "record_id", "agent", "session", "turn_id", "successor_id")
        if not isinstance(value.references, tuple) or len(value.references) > validate.MAX_REFERENCES:
            raise InvalidInput(f"references must be a list of at most {validate.MAX_REFERENCES} ids")
        for ref in value.references:
            validate.name(ref, "a reference")
        if not 0.0 <= validate.importance(value.importance) <= 1.0:
            raise InvalidInput(f"importance must be in [0, 1], got {value.importance!r}")
        for flag in ("pinned", "single_valued"):
            if not isinstance(getattr(value, flag), bool):
                raise InvalidInput(f"{flag} must be true or false, got {getattr(value, flag)!r}")
        for count in ("access_count", "corroborations"):
            n = getattr(value, count)
            if isinstance(n, bool) or not isinstance(n, int) or not 0 <= n < 2**31:
                raise InvalidInput(f"{count} must be a whole number from 0, got {n!r}")
        if value.status_reason is not None:
            validate.storable(value.status_reason, "status_reason")
        for name in ("created_at", "valid_from", "last_accessed", "expires_at", "status_at"):
            _time(getattr(value, name), name)
        validate.meta(value.meta, "memory meta")
        if vector is not None and not np.isfinite(vector).all():
            raise InvalidInput(f"memory {value.id!r} has a vector with NaN or infinite values")
    elif kind == "event":
        validate.name(value.id, "event id")
        validate.name(value.memory_id, "event memory_id")
        validate.name(value.action, "event action")
        for name in ("status_from", "status_to"):
            if getattr(value, name) is not None:
                validate.one_of(getattr(value, name), STATUSES, f"event {name}")
        if value.reason is not None:
            validate.storable(value.reason, "event reason")
        _names(value, "other_id")
        _time(value.at, "event at", required=True)
        validate.meta(value.evidence, "event evidence")
    else:
        validate.name(value.src, "link src")
        validate.name(value.dst, "link dst")
        validate.name(value.kind, "link kind")
        _time(value.at, "link at")


def _names(value: Any, *fields_: str) -> None:
    for name in fields_:
        validate.optional_name(getattr(value, name), name)


def _length(text: str, what: str) -> None:
    if len(text) > validate.MAX_TEXT_CHARS:
        raise InvalidInput(f"{what} has {len(text):,} characters, over the limit of {validate.MAX_TEXT_CHARS:,}")


def _time(value: Any, what: str, *, required: bool = False) -> None:
    if value is None and not required:
        return
    if not isinstance(value, datetime):
        raise InvalidInput(f"{what} must be an ISO time, got {value!r}")


def line(obj: dict[str, Any]) -> bytes:
    """Return one record of a JSON export as the bytes of its line (what a signature covers)."""
    # ensure_ascii=False keeps odd Unicode readable; JSON escapes \n and \r, so one object is one line.
    return (json.dumps(obj, ensure_ascii=False, separators=(",", ":")) + "\n").encode("utf-8")


# ----------------------------------------------------------------- export
def json_lines(store: Store, user: str | None = None, *, batch_size: int = 1000,
               key: str | bytes | None = None) -> Iterator[bytes]:
    """Yield the JSON export of `store` (or one user's part) line by line, trailer included (signed with `key`)."""
    digest = _Digests(signing_key(key))
    counts = dict.fromkeys(TYPES, 0)
    header = line({"format": FORMAT, "version": FORMAT_VERSION, "embedder": store.embedder, "dim": store.dim,
                    "user": user})
    digest.update(header)
    yield header
    for section, batch in store.dump(user, batch_size=batch_size):
        kind = SECTIONS[section]
        chunk = b"".join(line(encode(kind, *item) if kind == "memory" else encode(kind, item)) for item in batch)
        counts[kind] += len(batch)
        digest.update(chunk)
        yield chunk
    yield line(digest.trailer(counts))


def markdown_lines(store: Store, user: str | None = None) -> Iterator[bytes]:
    """Yield a Markdown rendering for people: memories by user, status and kind, with history and reasons."""
    yield (f"# mnemo export{f' for {_md(user)}' if user else ''}\n\n"
           f"Embedder `{store.embedder}` ({store.dim} dims). Status, reasons and successors are as stored; "
           "nothing here was ever hard-deleted.\n").encode()
    last: tuple[str | None, str | None, str | None] = (None, None, None)
    for batch in store.review(user):
        parts: list[str] = []
        for rec, events in batch:
            key = (rec.user, rec.status, rec.kind)
            if key[0] != last[0]:
                parts.append(f"\n## {_md(rec.user)}\n")
            if key[:2] != last[:2]:
                parts.append(f"\n### {rec.status.capitalize()}\n")
            if key != last:
                parts.append(f"\n#### {rec.kind}\n\n")
            last = key
            parts.append(_md_memory(rec, events))
        yield "".join(parts).encode("utf-8")


def _md(text: str | None) -> str:
    """Return `text` on one line with Markdown's active characters escaped."""
    flat = " ".join((text or "").split())
    return re.sub(r"([\\`*_\[\]<>#|~])", r"\\\1", flat)


def _md_memory(rec: MemoryRecord, events: list[Event]) -> str:
    text = _md(rec.text) if rec.active else f"~~{_md(rec.text)}~~"
    facts = [f"`{rec.id}`", rec.category]
    if rec.subject or rec.attribute:
        facts.append(f"{_md(rec.subject)}.{_md(rec.attribute)} = {_md(rec.value)}")
    facts += [f"importance {rec.importance:g}", f"source {rec.source}",
              f"created {rec.created_at:%Y-%m-%d %H:%M}" if rec.created_at else "created ?"]
    if rec.pinned:
        facts.append("pinned")
    out = [f"- **{text}** · {' · '.join(facts)}\n"]
    if not rec.active:
        when = f" on {rec.status_at:%Y-%m-%d %H:%M}" if rec.status_at else ""
        by = f" by `{rec.successor_id}`" if rec.successor_id else ""
        out.append(f"  - {rec.status}{by}{when}: {_md(rec.status_reason) or 'no reason recorded'}\n")
    if rec.meta:
        out.append(f"  - meta: `{_md(json.dumps(rec.meta, ensure_ascii=False, default=str))}`\n")
    for e in events:
        other = f" ({e.other_id})" if e.other_id else ""
        out.append(f"  - {e.at:%Y-%m-%d %H:%M} {e.action}{other}: {_md(e.reason) or '-'}\n")
    return "".join(out)


def write(chunks: Iterable[bytes], path: str | Path) -> Path:
    """Write `chunks` to `path` through a temporary file, so a failed export leaves no partial file."""
    path = Path(path)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    try:
        with open(tmp, "wb") as out:
            for chunk in chunks:
                out.write(chunk)
        os.replace(tmp, path)
    finally:
        tmp.unlink(missing_ok=True)
    return path


def export(store: Store, path: str | Path, *, user: str | None = None, fmt: str = "json",
           key: str | bytes | None = None) -> Path:
    """Write `store` (or one user's memories) to `path` as JSON Lines or Markdown; return the path.

    With `key`, the JSON export's trailer carries an HMAC-SHA256 under it (see the module).
    """
    if fmt not in FORMATS:
        raise ConfigError(f"unknown export format {fmt!r}; use 'json' (lossless, importable) or 'markdown' (for people)")
    if key is not None and fmt != "json":
        raise ConfigError("only the JSON export is signed; drop the key or use fmt='json'")
    chunks = json_lines(store, user, key=key) if fmt == "json" else markdown_lines(store, user)
    return write(chunks, path)


# ----------------------------------------------------------------- import
@dataclass
class ImportReport:
    """What an import added and what it skipped (on_conflict="skip"), by record type."""

    path: str
    added: dict[str, int] = field(default_factory=lambda: dict.fromkeys(TYPES, 0))
    skipped: dict[str, list[str]] = field(default_factory=lambda: {k: [] for k in TYPES})


def read_header(source: str | Path | IO[bytes]) -> dict[str, Any]:
    """Return the header of a JSON export, refusing other files and newer format versions."""
    if isinstance(source, (str, Path)):
        with open(source, "rb") as f:
            return _header(f.readline(), str(source))
    return _header(source.readline(), "export")


def _header(raw: bytes, where: str) -> dict[str, Any]:
    if raw.lstrip().startswith(b"#"):
        raise InvalidInput(f"{where} is a Markdown export, which is for people; import the JSON export instead")
    try:
        head = json.loads(raw)
    except ValueError:
        head = None
    if not isinstance(head, dict) or head.get("format") != FORMAT:
        raise InvalidInput(f"{where} is not a mnemo export (its first line is not a mnemo-export header)")
    version = head.get("version")
    if not isinstance(version, int) or version > FORMAT_VERSION:
        raise InvalidInput(f"{where} uses export format version {version}, newer than this mnemo reads "
                           f"(up to {FORMAT_VERSION}); upgrade mnemo to import it")
    return head


def load(store: Store, path: str | Path, *, on_conflict: str = "error", batch_size: int = 1000,
         key: str | bytes | None = None, name: str | None = None) -> ImportReport:
    """Load a JSON export into the open `store` in one transaction; return what was added and skipped.

    With `key`, the file must carry a signature under that key (`hmac_sha256` in its trailer)
    that matches its bytes; every value is checked either way (`check_record`). Errors name the
    file as `name` when given (a server names the request body, not its temporary file).
    """
    where = name or str(path)
    if on_conflict not in CONFLICTS:
        raise ConfigError(f"on_conflict must be 'error' or 'skip', not {on_conflict!r}")
    secret = signing_key(key)
    report = ImportReport(str(path))
    with open(path, "rb") as f:
        first = f.readline()
        head = _header(first, where)
        if head.get("embedder") != store.embedder or head.get("dim") != store.dim:
            raise EmbedderMismatch(
                f"{where} was exported with embedder {head.get('embedder')!r} ({head.get('dim')} dims) but the "
                f"target store uses {store.embedder!r} ({store.dim} dims); import into a new store "
                "(Memory.import_ picks the export's embedder) or open one with the export's embedder")
        digest = _Digests(secret)
        digest.update(first)
        pending: dict[str, list] = {k: [] for k in TYPES}
        trailer = None
        # One transaction: a clash, a bad line or a failed checksum rolls the whole import back.
        with store.transaction():
            for lineno, raw in enumerate(f, start=2):
                if trailer is not None:
                    raise InvalidInput(f"{where}:{lineno}: data after the end line")
                try:
                    obj = json.loads(raw)
                    if obj.get("type") == "end":
                        trailer = obj
                        continue
                    kind, value, vector = decode(obj, store.dim)
                except InvalidInput as exc:
                    raise InvalidInput(f"{where}:{lineno}: {exc}") from exc
                except (ValueError, TypeError, AttributeError) as exc:
                    raise InvalidInput(f"{where}:{lineno}: not a valid export line ({exc})") from exc
                digest.update(raw)
                pending[kind].append((value, vector))
                if len(pending[kind]) >= batch_size:
                    _flush(store, kind, pending[kind], on_conflict, report)
            for kind in TYPES:
                _flush(store, kind, pending[kind], on_conflict, report)
            _verify(trailer, report, digest, where)
    if any(report.skipped.values()):
        log.info("import of %s skipped existing ids: %s", path, {k: len(v) for k, v in report.skipped.items()})
    return report


def _verify(trailer: dict | None, report: ImportReport, digests: _Digests, where: str) -> None:
    if trailer is None:
        raise InvalidInput(f"{where} has no end line: the export is truncated; export it again")
    seen = {k: report.added[k] + len(report.skipped[k]) for k in TYPES}
    if trailer.get("counts") != seen or trailer.get("sha256") != digests.sha.hexdigest():
        raise InvalidInput(f"{where} does not match its end line (counts {trailer.get('counts')} vs {seen}, or "
                           "checksum): the file was truncated or edited; export it again")
    if digests.mac is None:
        if MAC in trailer:
            log.info("%s is signed; imported without a key, so only its sha256 was checked", where)
        return
    signature = trailer.get(MAC)
    if not isinstance(signature, str):
        raise InvalidInput(f"{where} is not signed, and this import requires a signature (a key was given); "
                           "export it again with the key (mnemo export --sign-key, or MNEMO_EXPORT_KEY)")
    if not hmac.compare_digest(signature, digests.mac.hexdigest()):
        raise InvalidInput(f"{where} does not match its signature under the given key: it was changed after it "
                           "was exported, or signed with another key; nothing was imported")


def _flush(store: Store, kind: str, items: list, on_conflict: str, report: ImportReport) -> None:
    """Insert one batch, after refusing or skipping records whose ids (or identical links) already exist."""
    if not items:
        return
    if kind == "link":
        taken = {(s, d, k, utc(a) if a else None) for s, d, k, a in store.existing_links([v for v, _ in items])}
    else:
        table = {"turn": "turns", "memory": "memories", "event": "events"}[kind]
        taken = store.existing(table, [v.id for v, _ in items])
    keep: list = []
    for value, vector in items:
        # A link has no id: the whole row is its identity.
        k = (value.src, value.dst, value.kind, utc(value.at) if value.at else None) if kind == "link" else value.id
        if k in taken:
            if on_conflict == "error":
                raise InvalidInput(f"{kind} {k!r} already exists in the target store; nothing was imported. "
                                   "Import into a new store, or pass on_conflict='skip' to skip existing ids")
            report.skipped[kind].append(str(k))
            continue
        taken.add(k)
        keep.append((value, vector))
    values = [v for v, _ in keep]
    if kind == "memory" and keep:
        store.insert_memories(values, np.stack([vec for _, vec in keep]))
    elif kind != "memory":
        {"turn": store.insert_turns, "event": store.insert_events, "link": store.insert_links}[kind](values)
    if kind == "turn":
        # What came of them is in the export already (its memories): they are not pending in this store.
        store.mark_turns(TurnOutcome(t.id, t.at, "imported", "imported from an export") for t in values)
    report.added[kind] += len(keep)
    items.clear()


def embedder_spec(name: str) -> str:
    """Return the `make_embedder` spec that builds the embedder recorded as `name`."""
    if m := re.fullmatch(r"hash-bow-(\d+)", name):
        return f"hash:{m.group(1)}"
    if name.startswith("minilm"):
        return "minilm"
    if name.startswith("openai:"):
        return name
    raise ConfigError(f"cannot tell which embedder builds {name!r}; pass embedder=... to Memory.import_")


def target_embedder(path: str | Path, store: str | Path = ":memory:",
                    embedder: str | Embedder | None = None) -> str | Embedder:
    """Return the embedder to open `store` with for importing the export at `path`.

    The one given wins; else an existing store keeps its own, and a new one takes the
    export's. The export's header is read first, so a file that is not one is refused
    before any store is opened or created.
    """
    head = read_header(path)
    if embedder is not None:
        return embedder
    return embedder_spec(recorded_embedder(store) or str(head.get("embedder")))
