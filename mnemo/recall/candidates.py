"""Candidates: reading the query the way memories are written, and how much of it a memory covers.

    q = resolve_self("Where does Alice live?", ["Alice"])   # "Where does the user live?"
    v = query_vector(embedder, query, names)                 # the query as asked and as resolved, blended
    coverage(query, memory_text, names, attribute)           # share of the query's content words covered
    asked = ask_soon(q); ...; asked.result()                  # the question read while retrieval runs
    prefetch(store, hits, count_many)                         # ... and the candidates read meanwhile
"""

from __future__ import annotations

import os
import re
import threading
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from functools import lru_cache
from typing import TYPE_CHECKING, Any

import numpy as np

from ..extract.questions import Ask, ask
from ..normalise import canonical_attribute
from . import evidence

if TYPE_CHECKING:
    from ..embed import Embedder
    from ..model import MemoryRecord

_STOPWORDS = frozenset(
    "a an the is are was were be been being am do does did done what whats where when who whom whose "
    "which why how of in on at to for from by with about into over and or but if then than so my your "
    "his her their our its i you he she we they it me us them that this these those there here have has "
    "had can could would should will shall may might must not no any some much many tell know remember "
    "recall please again ever still just also user".split()
)
_WORD = re.compile(r"\w+", re.UNICODE)



def resolve_self(query: str, names: Sequence[str]) -> str:
    """Return `query` with the user's own names replaced by "the user", as memory texts say it.

    Extraction writes first-person facts about "the user"; a question that names the
    user ("Where does Alice live?") would otherwise match the memory holding the name
    rather than the one holding the answer.
    """
    for name in sorted({n.strip() for n in names if n and n.strip()}, key=len, reverse=True):
        pattern = re.compile(rf"\b{re.escape(name)}(?=\W|$)", re.IGNORECASE)
        query = pattern.sub("the user", query)
    return query


_READER: list[Any] = [None, None]  # (process id, executor): a forked child starts its own thread
_READER_LOCK = threading.Lock()


def ask_soon(question: str) -> Future[Ask]:
    """Return the reading of `question` (`extract.questions.ask`) as a future, parsed on a worker thread.

    Parsing a new question (spaCy) costs about what a search of 100k memories costs, and the two
    hardly share the interpreter: the searches run in numpy and DuckDB, which release it. A recall
    reads its question here while it retrieves, and waits for the reading only when it needs it.
    """
    with _READER_LOCK:
        if _READER[0] != os.getpid():
            _READER[:] = [os.getpid(), ThreadPoolExecutor(max_workers=1, thread_name_prefix="mnemo-ask")]
        return _READER[1].submit(ask, question)


def prefetch(store: Any, hits: Sequence[tuple[str, float]], count_many: Callable[[list[str]], list[int]]) -> None:
    """Read the records of `hits` and count their tokens, so that both are kept when recall asks for them.

    Recall calls this while its question is still being read (`ask_soon`): the rows come from the
    store's kept records or one statement, and the tokenizer, like the searches, runs outside the
    interpreter. Nothing is returned; what recall reads after is what it would have read anyway.
    Only a store that keeps the records it reads (`keeps_records`, store.cache) is read here.
    """
    if not getattr(store, "keeps_records", False):
        return  # a store that keeps no records would be read twice
    records = store.get_many(list(dict.fromkeys(m for m, _ in hits)))
    if records:
        count_many([m.text for m in records.values()])


def namesakes(store: Any, query: str, user: str, vector: np.ndarray, records: Mapping[str, MemoryRecord],
              k: int) -> list[tuple[MemoryRecord, float]]:
    """Return the user's memories filed under another name of an entity `query` names, with their cosine, best first.

    The names come from the name claims among the hits (`evidence.namesakes`: "Ferris" is the
    user's mechanic), so a question that names Ferris also finds "The user's mechanic put his rate
    up to 60 GBP", which neither retriever reaches through the name. At most `k`, none already in
    `records`; nothing is read when no hit is a name claim the question reaches.
    """
    keys = evidence.namesakes(query, list(records.values()))
    if not keys:
        return []
    found = [m for m in store.active_for(user, keys) if m.id not in records]
    if not found:
        return []
    sims = store.vectors([m.id for m in found]) @ np.asarray(vector, dtype=np.float32)
    return sorted(zip(found, (float(s) for s in sims), strict=True), key=lambda p: -p[1])[:k]


def query_vector(embedder: Embedder, query: str, names: Sequence[str]) -> np.ndarray:
    """Return the dense query vector: the query as asked, blended with its "the user" form.

    Memories written by extraction say "the user", imported ones may use the name;
    the normalised sum of both embeddings serves either in one search.
    """
    resolved = resolve_self(query, names)
    if resolved == query:
        return embedder.embed([query])[0]
    both = embedder.embed([query, resolved])
    return both.sum(axis=0) / max(float(np.linalg.norm(both.sum(axis=0))), 1e-12)


def coverage(query: str, text: str, names: Sequence[str] = (), attribute: str | None = None) -> float:
    """Return the share of the query's content words found in `text`, in [0, 1].

    Words are lower-cased, stop words and single letters dropped, a plural "s"
    stripped and the rest cut to four letters (crude prefix stemming: "lives",
    "lived" and "live" meet). The user's own names count as stop words, like
    "user": every memory of the user is about them, so naming them is no evidence.
    A query with no content word covers nothing. A typed memory also covers the
    words that name its own attribute ("what diet ..." and a `diet` memory, "do for
    a living" and a `job_title` one, through the slot table (`mnemo.lexicon`)): only
    the memory of that attribute gains, so a question about an attribute the record
    lacks stays uncovered.
    """
    skip = frozenset(w for n in names for w in _WORD.findall(n.casefold()))
    wanted = _terms(query, skip)
    if not wanted:
        return 0.0
    covered = _terms(text, skip)
    if attribute:
        covered |= _terms(" ".join(_attribute_phrases(query).get(attribute, ())), skip)
    return len(wanted & covered) / len(wanted)


@lru_cache(maxsize=256)
def _attribute_phrases(query: str) -> dict[str, tuple[str, ...]]:
    """Return {attribute: phrases of `query` (one to four words) that name it}: once per query, not per memory."""
    words = _WORD.findall(query.casefold())
    out: dict[str, list[str]] = {}
    for n in (1, 2, 3, 4):
        for i in range(len(words) - n + 1):
            phrase = " ".join(words[i:i + n])
            if phrase not in _STOPWORDS:
                out.setdefault(canonical_attribute(phrase), []).append(phrase)
    return {a: tuple(p) for a, p in out.items() if a}


@lru_cache(maxsize=4096)
def _terms(text: str, skip: frozenset[str] = frozenset()) -> frozenset[str]:
    # Kept per (text, names): the same candidates recur across a user's recalls.
    out = set()
    for word in _WORD.findall(text.casefold()):
        if word in _STOPWORDS or word in skip or (len(word) < 2 and not word.isdigit()):
            continue
        if len(word) > 3 and word.endswith("s") and not word.endswith("ss"):
            word = word[:-1]
        out.add(word[:4])
    return frozenset(out)
