"""Through the write path: what `remember_many` keeps of a conversation, and what recall then packs.

    res = run_written("locomo", recipes=("default",), limit=2)    # mnemo eval locomo --write remember

Each conversation is remembered turn by turn, one `Memory.remember_many` call a conversation, as
"Name: text" lines (the speaker named, as a transcript gives them), each session at its time, in
a store of its own whose user is the conversation. BEAM's chats are one person's with an
assistant: there the user's own turns are remembered as said, and the assistant's are left out
(they are not the user's facts; BEAM's evidence points at the user's turns). Then, per question whose answer is *extractive* (said verbatim, as whole words,
in one of its evidence turns; `extractive`):

* **kept**: some active memory still says the answer (`metrics.mentions`). The write path can
  only lose this; the raw turns keep it by construction.
* **answer@B**: recall's pack at budget B (`Memory.recall`, the recipe's own pipeline) says the
  answer; beside it the same measure for two baselines over the raw turns, packed best first up
  to the same budget with the same tokenizer: plain BM25 (`bm25@B`) and plain dense cosine
  (`dense@B`), the store's own retrievers over the raw "Name: text" turns (`add_turns`).

The **fragment rate** is measured over the memories written from the conversations' user turns
(every turn in LoCoMo and REALTALK, whose two people are both users; BEAM's user turns): a
fragment is a memory text with no verb, or with fewer than three content words (`fragment`).

Rows: one per extractive question and recipe; aggregates: "<recipe> | all" and by category, plus
"<recipe> | memories" with the fragment rate and the count of memories.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import timedelta
from typing import Any

from mnemo.eval import datasets, metrics
from mnemo.eval.bench.common import (
    Bench,
    BenchResult,
    Progress,
    add_turns,
    group_means,
    register,
    session_times,
)
from mnemo.extract.turns import content_words
from mnemo.tokens import count_many

BUDGETS = (256, 512)
DATASETS = ("locomo", "realtalk", "beam")


def extractive(question: datasets.Question, turns: dict[str, datasets.DialogTurn]) -> bool:
    """Return True when the question's answer is said verbatim, as whole words, in one of its evidence turns."""
    answer = (question.answer or "").strip()
    if not answer or not question.evidence:
        return False
    return any(metrics.mentions(turns[e].text, [answer]) for e in question.evidence if e in turns)


def fragment(doc: Any) -> bool:
    """Return True for a parsed memory text that is not a sentence: no verb, or fewer than three content words
    (`extract.turns.content_words`: nouns, names, main verbs, adjectives, adverbs, numbers)."""
    return not any(t.pos_ in ("VERB", "AUX") for t in doc) or content_words(doc) < 3


def transcript_line(turn: datasets.DialogTurn) -> str:
    """Return the turn as a transcript line, "Name: text"; a user's own turn ("user" speaks) as said."""
    return turn.text if turn.speaker == "user" else f"{turn.speaker}: {turn.text}"


def _unlabelled(m: Any) -> str:
    """Return a memory's text without the transcript speaker's label the write path put before it ("Caroline: ",
    `extract.said.labelled`): it says who said the words, it is not words of the memory."""
    label = f"{m.meta.get('said_by')}: "
    return m.text[len(label):] if m.meta.get("said_by") and m.text.startswith(label) else m.text


def _fill(ids: Sequence[str], texts: dict[str, str], budget: int) -> list[str]:
    """Return the texts of `ids`, best first, that fit `budget` tokens (a text that does not fit is skipped)."""
    out, used = [], 0
    sizes = count_many([texts[i] for i in ids])
    for i, n in zip(ids, sizes, strict=True):
        if used + n <= budget:
            out.append(texts[i])
            used += n
    return out


def run_written(name: str, recipes: Sequence[str] = ("default",), *, limit: int | None = None,
                embedder: Any = "minilm", llm: Any = "offline", budgets: Sequence[int] = BUDGETS,
                progress: Progress | None = None) -> BenchResult:
    """Return what the write path keeps of `name`'s conversations and what recall packs (module docstring)."""
    from mnemo.extract.parser import parse

    ds = datasets.load(name)
    convs = ds.conversations[:limit] if limit else ds.conversations
    bench = Bench(recipes, embedder, llm)
    raw = Bench(("default",), embedder, llm)
    rows: list[dict[str, Any]] = []
    texts_written: list[str] = []
    for ci, conv in enumerate(convs):
        turns = {t.dia_id: t for t in conv.turns}
        qs = [q for q in ds.questions if q.conversation_id == conv.id and extractive(q, turns)]
        times = session_times(conv)
        end = max(times) + timedelta(days=1)
        mems = bench.open(end)
        for w in bench.writers(mems):
            batch = [{"text": transcript_line(t), "session": f"{conv.id}/{s.id}", "at": at}
                     for s, at in zip(conv.sessions, times, strict=True) for t in s.turns if t.role == "user"]
            for report in w.remember_many(batch, user=conv.id):
                texts_written += [_unlabelled(m) for m in [*report.added, *(s.new for s in report.superseded)]]
        baselines = raw.open(end)
        docs: dict[str, str] = {}
        for w in raw.writers(baselines):
            dia_of = add_turns(w, conv, times, raw.emb.embed([t.document for t in conv.turns]))
            docs = {m: turns[d].document for m, d in dia_of.items()}
        for rname, mem in mems.items():
            active = [m.text for m in mem.memories(conv.id)]
            for q in qs:
                row: dict[str, Any] = {"qid": f"{q.id}@{rname}", "question_id": q.id, "conversation": conv.id,
                                       "recipe": rname, "category": q.category, "category_name": q.category_name,
                                       "answer": q.answer, "error": None,
                                       "kept": float(any(metrics.mentions(t, [q.answer]) for t in active))}
                plain = baselines["default"]
                qv = plain.embedder.embed([q.question])[0]
                ranked = {"bm25": [m for m, _ in plain.store.search_lexical(q.question, 200, user=conv.id)],
                          "dense": [m for m, _ in plain.store.search_dense(qv, 200, user=conv.id)]}
                for b in budgets:
                    r = mem.recall(q.question, user=conv.id, budget_tokens=b)
                    row[f"answer@{b}"] = float(any(metrics.mentions(p.text, [q.answer]) for p in r.memories))
                    row[f"abstained@{b}"] = float(r.confidence == "unknown")
                    over_turns = plain.recall(q.question, user=conv.id, budget_tokens=b)
                    row[f"turns@{b}"] = float(any(metrics.mentions(p.text, [q.answer]) for p in over_turns.memories))
                    for base, ids in ranked.items():
                        row[f"{base}@{b}"] = float(any(metrics.mentions(t, [q.answer]) for t in _fill(ids, docs, b)))
                rows.append(row)
        Bench.close(mems)
        Bench.close(baselines)
        if progress:
            progress(ci + 1, len(convs), conv.id)
    fragments = [fragment(d) for d in parse(texts_written)] if texts_written else []
    keys = ["kept", *(f"{k}@{b}" for b in budgets for k in ("answer", "turns", "bm25", "dense", "abstained"))]
    aggregates = group_means(rows, keys, lambda r: [f"{r['recipe']} | all",
                                                    f"{r['recipe']} | cat {r['category']} {r['category_name']}"])
    aggregates["memories"] = {"n": float(len(fragments)),
                              "fragment_rate": sum(fragments) / len(fragments) if fragments else float("nan")}
    return bench.result(f"{name}-written", rows, aggregates, ds, limit=limit, budgets=list(budgets),
                        extractive=len({r["question_id"] for r in rows}), questions=len(ds.questions))


@register("written")
def run_written_all(recipes: Sequence[str] = ("default",), *, data: str = "locomo", **kw: Any) -> BenchResult:
    """Return `run_written` on `data` (locomo | realtalk | beam)."""
    return run_written(data, recipes, **kw)
