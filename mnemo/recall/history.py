"""History: what the packed memories superseded, what rested on a fact that changed, and citations.

    notes = history_notes(packed, links, records, hops)     # "corrected from 'Berlin' on ... (not current)"
    uncertain = shaken(store, candidates)                   # held only while a root fact did
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING

from ..clock import utc
from ..model import Citation, Link, MemoryRecord, Packed
from .ranking import became_true

if TYPE_CHECKING:
    from ..store import Store


def cite(packed: Sequence[Packed]) -> list[Citation]:
    """Return one citation per packed memory: its session, turn, time and source."""
    return [Citation(p.id, p.memory.session, p.memory.turn_id, became_true(p.memory), p.memory.source) for p in packed]


def history_notes(packed: Sequence[Packed], links: Sequence[Link], records: Mapping[str, MemoryRecord],
                  hops: int) -> list[Packed]:
    """Return the memories the packed ones superseded, up to `hops` steps back, each with a note.

    A note reads "corrected from <old value or text> on <date>, because <cause> (not
    current)"; the cause is the text of the memory a `because` link points to, else
    the old memory's status reason. These are history, never current memories.
    """
    older: dict[str, list[Link]] = {}
    causes: dict[str, str] = {}
    for link in links:
        if link.kind == "supersedes":
            older.setdefault(link.src, []).append(link)
        elif link.kind == "because" and link.dst in records:
            causes.setdefault(link.src, records[link.dst].text)
    out: list[Packed] = []
    seen = {p.id for p in packed}
    frontier = [p.memory for p in packed]
    for _ in range(max(0, hops)):
        nxt = []
        for new in frontier:
            for link in sorted(older.get(new.id, []), key=lambda x: x.dst):
                old = records.get(link.dst)
                if old is None or old.id in seen:
                    continue
                seen.add(old.id)
                nxt.append(old)
                out.append(Packed(old, 0.0, 0, {}, _note(old, new, link, causes)))
        frontier = nxt
    return out


def _note(old: MemoryRecord, new: MemoryRecord, link: Link, causes: Mapping[str, str]) -> str:
    when = link.at or old.status_at or new.created_at
    cause = causes.get(new.id) or causes.get(old.id) or old.status_reason
    was = repr(old.value) if old.value is not None else repr(old.text)
    return (f"corrected from {was}" + (f" on {utc(when).date().isoformat()}" if when else "")
            + (f", because {cause}" if cause else "") + " (not current)")


def shaken(store: Store, candidates: Sequence[MemoryRecord]) -> dict[str, tuple[MemoryRecord, str]]:
    """Return {id: (memory, note)} of candidates linked `depends_on` to a fact that is no longer active."""
    # Only a memory extracted with a condition ("if the team lead changes, ...") can have such a link: the
    # links are read for those alone, so an ordinary recall pays no query for this.
    ids = {m.id for m in candidates if m.meta.get("depends_on")}
    deps = [x for x in store.links(sorted(ids), ("depends_on",)) if x.src in ids] if ids else []
    if not deps:
        return {}
    roots = store.get_many(sorted({x.dst for x in deps}))
    out = {}
    by_id = {m.id: m for m in candidates}
    for x in deps:
        root = roots.get(x.dst)
        if root is not None and not root.active:
            when = f" on {utc(root.status_at).date().isoformat()}" if root.status_at else ""
            out[x.src] = (by_id[x.src], f"uncertain: it held while {root.text.rstrip('.')!r}, which was "
                                        f"{root.status}{when} (not current)")
    return out


def expand(store: Store, packed: list[Packed], hops: int) -> tuple[list[Link], list[Packed]]:
    """Return the supersedes / because links reached from the pack within `hops`, and the history notes."""
    links: list[Link] = []
    records: dict[str, MemoryRecord] = {p.id: p.memory for p in packed}
    frontier = [p.id for p in packed]
    for _ in range(hops):
        fresh = [x for x in store.links(frontier, ("supersedes", "because")) if x not in links] if frontier else []
        links += fresh
        missing = list(dict.fromkeys(i for x in fresh for i in (x.src, x.dst) if i not in records))
        records.update(store.get_many(missing) if missing else {})
        frontier = [x.dst for x in fresh if x.kind == "supersedes" and x.src in frontier]
    return links, history_notes(packed, links, records, hops)
