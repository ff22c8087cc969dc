"""The `Memory` facade: open a store and wire the stages together. No decisions live here."""

from __future__ import annotations

import itertools
import logging
import warnings
from collections.abc import Iterable, Mapping, Sequence
from contextlib import ExitStack
from datetime import datetime
from pathlib import Path
from typing import Any

import numpy as np

from . import answer as answer_stage
from . import assess as assess_stage
from . import audit as audit_stage
from . import decay as decay_stage
from . import forgetting, portable, validate
from . import recall as recall_stage
from . import recover as recover_stage
from . import write as write_stage
from .answer import Answer
from .assess import Assessment
from .audit import AuditReport, Consolidation
from .clock import Clock, WallClock, utc
from .config import Config, recipe
from .embed import Embedder, make_embedder
from .errors import InvalidInput, NotFound
from .extract import extractor_for
from .judge import model_judge, offline_judge
from .llm import LLM, connect
from .model import CATEGORIES, KINDS, Candidate, Event, Forgetting, Link, MemoryRecord, Recall, WriteReport
from .portable import ImportReport
from .recall.judge import Answerability
from .store import DuckDBStore, Store, new_id, store_class
from .tokens import count_many, tokenizer_name
from .updates import UpdateModel

log = logging.getLogger(__name__)


class Memory:
    """Long-term memory for one store: remember, recall, forget, decay, and the story of every memory."""

    def __init__(self, store: Store, embedder: Embedder, llm: LLM, clock: Clock, config: Config):
        self.store = store
        self.embedder = embedder
        self.llm = llm
        self.clock = clock
        self.config = config
        # Offline or live is decided here, once: what reads a turn's claims, what arbitrates a pair, what reviews
        # an expired memory. No stage downstream asks the connection which it is.
        self.extractor = extractor_for(llm)
        self.judge = offline_judge if llm.offline else model_judge(llm)
        self.review = decay_stage.review_offline if llm.offline else decay_stage.model_review(llm)
        # The fitted update decision (mnemo.updates), chosen once here like the judge; None: the hand rules.
        self.updates = UpdateModel.load(embedder=embedder.name) if config.write.update_model else None
        # Answerability (recall.judge): P(the record answers the question) decides the confidence.
        self.answerable = Answerability.load(embedder=embedder.name) if config.recall.answerable else None

    # ----------------------------------------------------------------- lifecycle
    @classmethod
    def open(cls, path: str | Path = ":memory:", *, embedder: str | Embedder | None = None,
             llm: str | LLM | None = None, clock: Clock | None = None, config: Config | str | None = None,
             read_only: bool = False, backend: str | None = None, index: str | None = None,
             recover: bool = True) -> Memory:
        """Open (or create) a store. With no embedder given, an existing store's own embedder is used.

        A postgresql:// DSN opens the PostgreSQL + pgvector store (`backend="postgres"`, see
        mnemo.store.postgres); anything else is a DuckDB file or ":memory:" (`backend="duckdb"`).
        `index` chooses a DuckDB store's similarity index ("auto" by size, or one of mnemo.store.ann.KINDS).
        Turns a killed writer recorded but never processed are processed now, once (`repair`), unless
        `recover=False` or the store is read-only.
        """
        store_cls = store_class(path, backend)
        if embedder is None:
            embedder = store_cls.recorded_embedder(path) or "auto"
        emb = make_embedder(embedder)
        cfg = config if isinstance(config, Config) else recipe(config)
        if index is not None and store_cls is not DuckDBStore:
            raise InvalidInput("index= chooses the in-process index of a DuckDB store; PostgreSQL searches "
                               "with pgvector (see mnemo.store.postgres)")
        extra = {"index": index} if index is not None else {}
        store = store_cls(path, embedder=emb.name, dim=emb.dim, read_only=read_only, **extra)
        mem = cls(store, emb, connect(llm), clock or WallClock(), cfg)
        if recover and not read_only:
            try:
                done = mem.repair()
            except BaseException:
                mem.close()
                raise
            if done:
                log.warning("mnemo: %s held turns recorded but never processed: %s", store.path, done.summary())
        return mem

    def close(self) -> None:
        self.store.close()

    def repair(self) -> recover_stage.Repair:
        """Process the turns recorded but never processed (a writer killed mid-batch), once each; say what became of them."""
        return recover_stage.repair(self.store, self.embedder, self.extractor, self.config, self.judge,
                                    now=self.clock.now(), hold=self._reconciling, model=self.updates)

    def __enter__(self) -> Memory:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _now(self, at: datetime | None) -> datetime:
        return utc(at) if at is not None else self.clock.now()

    def provenance(self) -> dict[str, Any]:
        """Return which embedder, model client, tokenizer and recipe this memory runs with."""
        return {"embedder": self.embedder.name, "llm": self.llm.provenance(), "tokenizer": tokenizer_name(),
                "update_model": self.updates.info.get("file") if self.updates else "hand rules",
                "recipe": self.config.recipe, "store": self.store.path}

    # ----------------------------------------------------------------- writes
    def remember(self, text: str, *, user: str, session: str | None = None, agent: str | None = None,
                 at: datetime | None = None) -> WriteReport:
        """Record a turn, extract memories from it, reconcile them and apply the plan (`remember_many` of one)."""
        spec: dict[str, Any] = {"text": text, "session": session, "agent": agent}
        if at is not None:
            spec["at"] = at
        return self.remember_many([spec], user=user)[0]

    def _reconciling(self, users: Iterable[str]) -> ExitStack:
        """Hold the store's `exclusive` lock on each user (sorted, so two writers never wait on each other).

        On PostgreSQL two processes writing the same user's memories then reconcile one after
        the other, each seeing what the other committed; on DuckDB it costs nothing.
        """
        stack = ExitStack()
        try:
            for user in sorted(set(users)):
                stack.enter_context(self.store.exclusive(f"user:{user}"))
        except BaseException:
            stack.close()
            raise
        return stack

    def remember_many(self, turns: Iterable[str | Mapping[str, Any]], *, user: str, session: str | None = None,
                      agent: str | None = None, at: datetime | None = None) -> list[WriteReport]:
        """Remember a conversation in one call: the same outcomes as `remember` turn by turn, one report each.

        A turn is a text, or a mapping with "text" and any of "user", "session", "agent", "at" that
        differ from the call's. Turns are recorded first; parsing and embedding are batched and the
        memories are written in one transaction (see `write.remember_many`).
        """
        made = []
        for item in turns:
            spec = {"text": item} if isinstance(item, str) else dict(item)
            unknown = set(spec) - {"text", "user", "session", "agent", "at"}
            if unknown:
                raise InvalidInput(f"remember_many() turn has unknown keys {sorted(unknown)}; "
                                   "use text, user, session, agent, at")
            when = spec.get("at", at)
            made.append(write_stage.new_turn(spec.get("text"), user=spec.get("user", user),
                                             session=spec.get("session", session), agent=spec.get("agent", agent),
                                             at=self._now(when), cfg=self.config))
        with self._reconciling(t.user for t in made):
            reports = write_stage.remember_many(self.store, self.embedder, self.extractor, made, self.config, self.judge,
                                                self.updates)
        provenance = self.provenance()
        for report in reports:
            report.provenance = dict(provenance)
        return reports

    def add(self, text: str, *, user: str, kind: str = "semantic", category: str = "fact",
            subject: str | None = None, attribute: str | None = None, value: str | None = None,
            record_id: str | None = None, references: Sequence[str] = (), importance: float = 0.5,
            pinned: bool = False, single_valued: bool = True, agent: str | None = None,
            session: str | None = None, source: str = "user", meta: dict[str, Any] | None = None,
            at: datetime | None = None) -> MemoryRecord:
        """Write one structured memory, reconciled like any other write; return the memory that holds it."""
        validate.memory(text, user=user, kind=kind, category=category, subject=subject, attribute=attribute,
                        value=value, record_id=record_id, references=references, importance_=importance, agent=agent,
                        session=session, source=source, meta_=meta)
        cand = Candidate(text=text, kind=kind, category=category, subject=subject, attribute=attribute,
                         value=value, record_id=record_id, references=tuple(references), importance=importance,
                         single_valued=single_valued, pinned=pinned, source=source, meta=dict(meta or {}))
        vecs = self.embedder.embed([text])
        with self._reconciling([user]):
            turn = write_stage.record_turn(self.store, text, user=user, session=session, agent=agent,
                                           at=self._now(at), cfg=self.config, role="api")
            plan = write_stage.plan(self.store, user, [cand], vecs, self.config, self.judge, self.embedder,
                                    model=self.updates, declared=attribute is not None)
            plan, cands, vecs = write_stage.carry(self.store, self.embedder, plan, [cand], vecs)
            report = write_stage.apply(self.store, plan, cands, vecs, turn=turn, cfg=self.config)
        if report.added:
            return report.added[0]
        if report.superseded:
            return report.superseded[0].new
        kept = report.corroborated or report.duplicates
        if kept:
            return kept[0][0]
        raise InvalidInput(f"add() stored nothing: {report.ignored[0][1] if report.ignored else 'no action'}")

    def insert_many(self, texts: Sequence[str], *, user: str, kind: str = "episodic", category: str = "event",
                    metas: Sequence[dict[str, Any]] | None = None, at: datetime | None = None,
                    vectors: np.ndarray | None = None, session: str | None = None,
                    batch_size: int = 50_000) -> list[MemoryRecord]:
        """Store texts verbatim as memories, without extraction or reconciliation; return the records made.

        For transcripts, imports and benchmarks: nothing is compared with what is stored (that is
        `remember_many`). With `session`, the texts are one session's turns in the order said: each
        memory records the session and `follows` the one before it (a link recall's `context_weight`
        reads, so a turn shares its neighbours' relevance).
        """
        validate.name(user, "user")
        validate.one_of(kind, KINDS, "kind")
        validate.one_of(category, CATEGORIES, "category")
        validate.optional_name(session, "session")
        for k, text in enumerate(texts):
            validate.text(text, f"texts[{k}]")
            if metas:
                validate.meta(metas[k], f"metas[{k}]")
        now = self._now(at)
        made: list[MemoryRecord] = []
        for start in range(0, len(texts), batch_size):
            chunk = list(texts[start:start + batch_size])
            vecs = vectors[start:start + batch_size] if vectors is not None else self.embedder.embed(chunk)
            recs = [MemoryRecord(id=new_id("m"), user=user, text=t, kind=kind, category=category,
                                 created_at=now, valid_from=now, source="user", session=session,
                                 meta=dict(metas[start + k]) if metas else {}) for k, t in enumerate(chunk)]
            chain = [r.id for r in (*made[-1:], *recs)]
            with self.store.transaction():
                self.store.insert_memories(recs, vecs)
                if session is not None:
                    self.store.insert_links([Link(later, earlier, "follows", now)
                                             for earlier, later in itertools.pairwise(chain)])
            made.extend(recs)
        return made

    def add_many(self, texts: Sequence[str], **kwargs: Any) -> list[str]:
        """Deprecated: `insert_many`, which returns the records; this returns their ids."""
        warnings.warn("Memory.add_many is deprecated: use Memory.insert_many (it returns the records)",
                      DeprecationWarning, stacklevel=2)
        return [r.id for r in self.insert_many(texts, **kwargs)]

    def forget(self, memory_id: str | None = None, *, query: str | None = None, user: str | None = None,
               reason: str = "user asked", dry_run: bool = False) -> list[MemoryRecord]:
        """Tombstone one memory by id, or exactly the memories a query names; return what (would have) gone.

        By query the result also says why each matched (`.why`), and when nothing did, says so
        (`.message`) with the nearest memories (`.nearest`), which are never taken on a guess.
        """
        at = self.clock.now()
        validate.storable(reason, "reason")
        if memory_id is not None:
            validate.name(memory_id, "memory_id")
            target = self.store.get(memory_id)
            if dry_run or not target.active:
                return [target] if target.active else []
            return forgetting.forget_ids(self.store, [target.id], reason=reason, at=at)
        if not query or not user:
            raise InvalidInput("forget() needs a memory id, or query= and user=")
        validate.text(query, "query")
        validate.name(user, "user")
        targets = forgetting.forget_targets(self.store, self.embedder, query, user=user, cfg=self.config,
                                            judge=self.judge, at=at, model=self.updates)
        if dry_run:
            return targets
        gone = forgetting.forget_ids(self.store, [t.id for t in targets], reason=reason, at=at, kept=targets.kept,
                                     embedder=self.embedder, cfg=self.config)
        return Forgetting(gone, why=targets.why, nearest=targets.nearest, message=targets.message)

    def restore(self, memory_id: str, *, reason: str = "restored") -> MemoryRecord:
        """Reverse a tombstone: the memory is active again (and its successor, if any, stays active)."""
        validate.name(memory_id, "memory_id")
        validate.storable(reason, "reason")
        return forgetting.restore(self.store, memory_id, reason=reason, at=self.clock.now())

    # ----------------------------------------------------------------- forgetting over time
    def decay(self, at: datetime | None = None) -> list[tuple[str, float]]:
        """Tombstone every active memory whose salience is under the threshold; return (id, salience)."""
        return decay_stage.decay(self.store, self._now(at), self.config.decay)

    def review_expired(self, at: datetime | None = None) -> list[dict[str, Any]]:
        """Judge each memory past its TTL (keep or forget, with why); return the verdicts."""
        return decay_stage.review_expired(self.store, self._now(at), self.config.decay, self.review)

    # ----------------------------------------------------------------- reads
    def recall(self, query: str, *, user: str, budget_tokens: int | None = None,
               filters: dict[str, Any] | None = None, at: datetime | None = None) -> Recall:
        """Pack the memories that matter for `query` under a token budget, with confidence and trace."""
        validate.storable(query, "query")
        validate.name(user, "user")
        validate.filters(filters)
        result = recall_stage.recall(
            self.store, self.embedder, query, user=user,
            budget_tokens=budget_tokens if budget_tokens is not None else self.config.recall.budget_tokens,
            cfg=self.config.recall, decay_cfg=self.config.decay, now=self._now(at), filters=filters,
            count_many=count_many, answerable=self.answerable,
        )
        result.provenance.update(self.provenance())
        return result

    # ----------------------------------------------------------------- trust and portability
    def assess(self, recall: Recall, tools: Any = None) -> Assessment:
        """Re-ground the verifiable claims of a recall and decide act or escalate (see mnemo.assess)."""
        return assess_stage.assess(self.store, self.embedder, recall, tools, cfg=self.config, now=self.clock.now())

    def audit(self, user: str) -> AuditReport:
        """Report contradictions and dangling references with recommended resolutions; changes nothing."""
        validate.name(user, "user")
        return audit_stage.audit(self.store, self.llm, user, cfg=self.config.trust, now=self.clock.now(),
                                 model=self.updates, write_cfg=self.config.write)

    def consolidate(self, user: str) -> Consolidation:
        """Propose merges, forgets and salience changes; nothing is applied until approved."""
        validate.name(user, "user")
        return audit_stage.propose_consolidation(self.store, user, cfg=self.config, now=self.clock.now())

    def apply_consolidation(self, approved: Iterable[audit_stage.Proposal]) -> audit_stage.ConsolidationReport:
        """Apply exactly the approved proposals (`mem.consolidate(user).approve(...)`) through the write path."""
        return audit_stage.apply_consolidation(self.store, approved, cfg=self.config, now=self.clock.now())

    def export(self, path: str | Path, *, user: str | None = None, fmt: str = "json",
               key: str | bytes | None = None) -> Path:
        """Write the store (or one user's memories) with vectors and tombstones to `path` (signed with `key`)."""
        return portable.export(self.store, path, user=user, fmt=fmt, key=key)

    @classmethod
    def import_(cls, path: str | Path, store: str | Path = ":memory:", *, on_conflict: str = "error",
                key: str | bytes | None = None, **open_kwargs: Any) -> Memory:
        """Open `store` (new or existing) and load an export into it, without re-embedding.

        A new store takes the export's embedder, an existing one keeps its own (see
        `portable.target_embedder`); ids already in it are refused, or skipped with
        on_conflict="skip". With `key`, the file must be signed under it (see `portable`).
        """
        open_kwargs["embedder"] = portable.target_embedder(path, store, open_kwargs.get("embedder"))
        mem = cls.open(store, **open_kwargs)
        try:
            portable.load(mem.store, path, on_conflict=on_conflict, key=key)
        except BaseException:
            mem.close()
            raise
        return mem

    def load(self, path: str | Path, *, on_conflict: str = "error", key: str | bytes | None = None) -> ImportReport:
        """Load a JSON export into this store in one transaction, without re-embedding; return what was added.

        Ids already stored are refused, or skipped with on_conflict="skip". With `key`, the file
        must be signed under it (see `portable`). `Memory.import_` opens a store and loads into it.
        """
        return portable.load(self.store, path, on_conflict=on_conflict, key=key)

    def answer(self, question: str, *, user: str, budget_tokens: int | None = None,
               filters: dict[str, Any] | None = None) -> Answer:
        """Answer a question from the packed memories, citing them; abstain when the record is silent."""
        return answer_stage.answer(self.llm, self.recall(question, user=user, budget_tokens=budget_tokens,
                                                         filters=filters))

    def get(self, memory_id: str) -> MemoryRecord:
        """Return one memory, active or tombstoned (NotFound for an unknown id)."""
        validate.name(memory_id, "memory_id")
        return self.store.get(memory_id)

    def memories(self, user: str | None = None, *, include_inactive: bool = False,
                 filters: dict[str, Any] | None = None) -> list[MemoryRecord]:
        """Return a user's memories, oldest first: active only, or with tombstones when include_inactive."""
        validate.optional_name(user, "user")
        validate.filters(filters)
        return self.store.memories(user, include_inactive=include_inactive, filters=filters)

    def history(self, memory_id: str) -> list[Event]:
        """Return the story of a memory: creation, corroborations, tombstone, restore, in time order."""
        validate.name(memory_id, "memory_id")
        events = self.store.events(memory_id)
        if not events:
            self.store.get(memory_id)  # raises NotFound for an unknown id
        return events

    def stats(self, user: str | None = None) -> dict[str, Any]:
        """Return the store's counts and where its models come from; with `user`, that user's counts only
        (what a server may show a tenant: nothing about other users or the store's location)."""
        provenance = self.provenance()
        if user is not None:
            provenance.pop("store")
        return {**self.store.stats(user), "provenance": provenance}

    def __repr__(self) -> str:
        return f"Memory({self.store.path!r}, embedder={self.embedder.name!r}, llm={self.llm.mode!r})"


__all__ = ["Memory", "NotFound"]
