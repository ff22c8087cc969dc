"""Labelled write-path examples built at run time from MQuAKE-hard, LoCoMo and an identifier family.

    examples = build_examples(split="dev")      # deterministic: the same list on every machine
    counts(examples)                            # {(family, split): n}

Nothing here is written by hand except the synthetic identifier family's fillers; every MQuAKE
sentence is rendered from the dataset's own text, every extraction label is LoCoMo's.

**MQuAKE-hard** (`mquake_hard/MQuAKE-hard_shared.json`). Facts are (subject, relation, value)
triples: each case's original chain (`single_hops` with `orig.triples_labeled`), its edited
chain (`new_single_hops`, `orig.new_triples_labeled`) and its edits (`requested_rewrite`:
subject, `target_true` -> `target_new`). The data holds one cloze template per relation (the
edit `prompt`, e.g. "{} was performed by", equals every `cloze` with its subject replaced by
"{}"), so a relation's other renderings are derived from the data by two fixed transformations
(`relation_templates`): its question turned declarative ("Who performed {}?" -> "<value>
performed <subject>."; "Which city was {} born in?" -> "<subject> was born in <value>.") and
its noun phrase ("<subject>'s <np> is <value>.", "The <np> of <subject> is <value>.", the noun
phrase read from "Who is the <np> of {}?" or the Wikidata label in `triples_labeled`).
Families:
* correction: old statement (template A), then the edit's new value (template B != A where the
  relation has two) -> old superseded, new active;
* correction_negative: the same pair with the second statement's subject swapped for another
  subject of the same relation -> nothing superseded, both active;
* negation: a statement, then "It is not true that <statement in another template>" or
  "<subject>'s <np> is no longer / is not <value>." -> the positive retired, no positive left;
* duplicate_paraphrase: a statement, then the same fact in another template -> stored once;
* duplicate_distinct: 8 facts of one relation about 8 subjects, one template -> 8 stored;
* forget: 2-4 facts about one subject, then "Please forget the <np> of <subject>." (a turn) or
  `forget(query="the <np> of <subject>")` (the API) -> only that fact retired.
The split unit is the **subject** (sha256 of its name, even -> dev, odd -> test), and every
example draws only on facts of subjects of its own split, so no fact is in both splits (a
case-level split would put e.g. "The capital of France is Paris." in both: edits repeat across
cases, see the data README).

**LoCoMo** (`locomo/locomo10_shared_8conv.json`), family extraction: one example per turn that
has observations (`observation.session_<n>_observation.<speaker>`: [fact, dia_id]). Kept: facts
attributed to one turn of the same speaker whose content terms are at least `SUPPORT` covered
by the turn's own terms (the rest paraphrase beyond any lexical check and are counted as
dropped). Split by conversation: conv-26, -30, -41, -42 dev; the others test.

**Synthetic identifiers**: records that differ only in an identifier or a number ("Ticket 1042
was about the printer on floor 3."), so every statement is a distinct fact: the 300-ticket and
300-order lists (duplicate_distinct), and per state family 50 distinct records, 20 corrections
(same identifier, new value) and 20 negatives (next identifier, new value). Split by family.
"""

from __future__ import annotations

import hashlib
import json
import random
import re
from collections import Counter, defaultdict
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from mnemo.errors import ConfigError
from mnemo.eval.datasets.base import checksum, first_existing
from mnemo.provenance import dataset_root

FAMILIES = ("duplicate_distinct", "duplicate_paraphrase", "correction", "correction_negative", "negation",
            "forget", "extraction")
SPLITS = ("dev", "test")
LOCOMO_DEV = frozenset({"conv-26", "conv-30", "conv-41", "conv-42"})
SUPPORT = 0.6  # share of an observation's content terms the turn itself must hold for it to be gold
DISTINCT_GROUP = 8  # facts per MQuAKE duplicate_distinct example (one relation, different subjects)
_STOPWORDS = frozenset((Path(__file__).resolve().parents[2] / "assets" / "stopwords_english.txt")
                       .read_text(encoding="utf-8").split())
_PREPOSITIONS = frozenset({"by", "at", "in", "on", "of", "for", "with", "to", "from"})


@dataclass(frozen=True)
class Step:
    """One thing done to the memory: remember a user turn, or forget through the API by query."""

    key: str  # the step's role in the example: "old", "new", "fact-2", "request", "turn", ...
    text: str  # the turn, or the forget query
    action: str = "remember"  # "remember" | "forget"


@dataclass(frozen=True)
class WriteExample:
    """A labelled write: the steps to play and what the store must hold afterwards (by value strings)."""

    id: str
    family: str  # see FAMILIES
    split: str  # "dev" | "test"
    unit: str  # the source unit the split was drawn by: "mquake:<subject>", "locomo:conv-26", "synthetic:orders"
    steps: tuple[Step, ...]
    expect: dict[str, Any]  # family-specific values, see `bench.writes`
    meta: dict[str, Any] = field(default_factory=dict)


def _h(*parts: Any) -> int:
    """Return a stable integer hash of `parts` (sha256; Python's hash() changes between runs)."""
    return int(hashlib.sha256("\x1f".join(map(str, parts)).encode()).hexdigest()[:12], 16)


def split_of(unit: str) -> str:
    """Return "dev" or "test" for a hashed source unit (even -> dev)."""
    return SPLITS[_h(unit) % 2]


def _stem(token: str) -> str:
    """Return Harman's S-stemmer form of a token (plural endings only: -ies -> -y, -es -> -e, -s -> '')."""
    if len(token) > 3 and token.endswith("ies") and not token.endswith(("eies", "aies")):
        return token[:-3] + "y"
    if len(token) > 3 and token.endswith("es") and not token.endswith(("aes", "ees", "oes")):
        return token[:-1]
    if len(token) > 2 and token.endswith("s") and not token.endswith(("us", "ss")):
        return token[:-1]
    return token


def content_terms(text: str, drop: Iterable[str] = ()) -> set[str]:
    """Return the content terms of `text`: lowercase alphanumeric tokens minus stopwords and `drop`, S-stemmed."""
    dropped = {t for d in drop for t in re.findall(r"[a-z0-9]+", d.lower())}
    return {_stem(t) for t in re.findall(r"[a-z0-9]+", text.lower().replace("'s ", " ").replace("’s ", " "))
            if t not in _STOPWORDS and t not in dropped}


def coverage(fact: str, text: str, drop: Iterable[str] = ()) -> float:
    """Return the share of `fact`'s content terms found in `text`'s (1.0 when the fact has none)."""
    want = content_terms(fact, drop)
    return len(want & content_terms(text, drop)) / len(want) if want else 1.0


# MQuAKE-hard: templates ---------------------------------------------------------------------------

_SUBJECT_Q = re.compile(r"^(?:Who|What) (is|was) (?!\{\} )(.+)\?$")  # "Who is the author of {}?"
_INVERTED_Q = re.compile(r"^(?:Who|What|Which)(?: [a-z ]+?)? (is|was|does|did) \{\} (.+)\?$")
_VERB_Q = re.compile(r"^Who (\w+ed) \{\}\?$")  # "Who performed {}?"
_NP_OF_Q = re.compile(r"^(?:Who|What) is the ([a-z ]+) of \{\}\?$")
_NP_WH_Q = re.compile(r"^(?:What|Which) ([a-z ]+?) (?:is|was|does|did) \{\}")


def _inflect(aux: str, verb: str) -> str:
    """Return `verb` carrying the tense of a do-support auxiliary ("does play" -> "plays", "did die" -> "died")."""
    if aux == "does":
        return verb + ("es" if verb.endswith(("s", "sh", "ch", "o")) else "s")
    return verb + ("d" if verb.endswith("e") else "ed")


def declarative(question: str) -> str | None:
    """Return the statement template ("{s}", "{v}") a wh-question template asks for, or None if its shape is other.

    "Who is the author of {}?" -> "{v} is the author of {s}."; "Who performed {}?" -> "{v}
    performed {s}."; "Which city was {} born in?" -> "{s} was born in {v}."; "What position does
    {} play?" -> "{s} plays {v}." The wh-phrase is the answer's place: subject questions put the
    value first, inverted ones put it after the stranded verb phrase.
    """
    if m := _VERB_Q.match(question):
        return f"{{v}} {m.group(1)} {{s}}."
    if m := _INVERTED_Q.match(question):
        aux, rest = m.groups()
        if aux in ("does", "did"):
            verb, _, tail = rest.partition(" ")
            if verb == "do":  # "What kind of work does {} do?": a pro-verb names no relation
                return None
            rest = f"{_inflect(aux, verb)} {tail}".strip()
            return f"{{s}} {rest} {{v}}."
        return f"{{s}} {aux} {rest} {{v}}."
    if m := _SUBJECT_Q.match(question):
        return f"{{v}} {m.group(1)} {m.group(2).replace('{}', '{s}')}."
    return None


def noun_phrase(question: str, label: str) -> str | None:
    """Return the relation as a noun phrase ("capital", "place of birth"), or None when the data gives none.

    First "Who/What is the <np> of {}?" in the question; else the Wikidata label when it is one
    phrase ending in a noun (no "/", no final preposition: "founded by" is not); else the
    wh-phrase of "What/Which <np> is|does {} ...?".
    """
    if m := _NP_OF_Q.match(question):
        return m.group(1)
    if "/" not in label and label.split()[-1] not in _PREPOSITIONS:
        return label
    if m := _NP_WH_Q.match(question):
        return m.group(1)
    return None


@dataclass(frozen=True)
class Relation:
    """A relation's renderings: statement templates over "{s}" and "{v}", and its noun phrase if any."""

    id: str
    label: str
    templates: tuple[str, ...]
    np: str | None


def relation_templates(rid: str, prompt: str, question: str, label: str) -> Relation:
    """Return a Relation from the data's cloze prompt, question and label (distinct templates, prompt first)."""
    np = noun_phrase(question, label)
    found = [prompt.replace("{}", "{s}") + " {v}.", declarative(question)]
    if np:
        found += [f"{{s}}'s {np} is {{v}}.", f"The {np} of {{s}} is {{v}}."]
    return Relation(rid, label, tuple(dict.fromkeys(t for t in found if t)), np)


def render(template: str, subject: str, value: str) -> str:
    """Return a template filled with a subject and a value."""
    return template.replace("{s}", subject).replace("{v}", value)


def _lower_first(template: str, sentence: str) -> str:
    # Only a template's own leading "The" is lowered; a subject or value keeps its capital.
    return sentence[0].lower() + sentence[1:] if template.startswith("The ") else sentence


# MQuAKE-hard: examples -----------------------------------------------------------------------------


@dataclass(frozen=True)
class Fact:
    subject: str
    rid: str
    value: str


def _mquake_pool(cases: list[dict[str, Any]]) -> tuple[dict[str, Relation], list[Fact], list[tuple[Fact, str]]]:
    """Return the relations, one fact per (subject, relation) (original value first) and the distinct edits."""
    prompts, questions, labels = {}, {}, {}
    facts: dict[tuple[str, str], str] = {}
    edits: dict[tuple[str, str, str, str], None] = {}
    for case in cases:
        for e in case["requested_rewrite"]:
            prompts.setdefault(e["relation_id"], e["prompt"])
            questions.setdefault(e["relation_id"], e["question"].replace(e["subject"], "{}", 1))
            edits[(e["subject"], e["relation_id"], e["target_true"]["str"], e["target_new"]["str"])] = None
        orig = case["orig"]
        for hops, labelled, ids in ((case["single_hops"], orig["triples_labeled"], orig["triples"]),
                                    (case["new_single_hops"], orig["new_triples_labeled"], orig["new_triples"])):
            for hop, (s, label, _), (_, rid, _) in zip(hops, labelled, ids, strict=True):
                labels.setdefault(rid, label)
                facts.setdefault((s, rid), hop["answer"])
        for e in case["requested_rewrite"]:
            facts[(e["subject"], e["relation_id"])] = e["target_true"]["str"]
    relations = {rid: relation_templates(rid, prompts[rid], questions[rid], labels.get(rid, rid)) for rid in prompts}
    # A subject with no letter ("1", a Beatles album) reads as a number, not a name: left out.
    named = {s for s, _ in facts} | {e[0] for e in edits}
    named = {s for s in named if re.search(r"[^\W\d_]", s)}
    pool = [Fact(s, r, v) for (s, r), v in sorted(facts.items()) if r in relations and s in named]
    pairs = [(Fact(s, r, old), new) for (s, r, old, new) in sorted(edits) if old != new and s in named]
    return relations, pool, pairs


def _two(rel: Relation, *salt: Any) -> tuple[str, str]:
    """Return two templates of `rel` chosen by hash, different whenever the relation has two."""
    ts = rel.templates
    a = _h("a", *salt) % len(ts)
    b = (a + 1 + _h("b", *salt) % (len(ts) - 1)) % len(ts) if len(ts) > 1 else a
    return ts[a], ts[b]


def _ex(family: str, unit: str, key: str, steps: list[Step], expect: dict[str, Any], *, split: str | None = None,
        **meta: Any) -> WriteExample:
    """Return an example; its split is the unit's (`split_of`, LoCoMo's conversation list) unless given."""
    if split is None:
        conv = unit.removeprefix("locomo:")
        split = split_of(unit) if unit.startswith("mquake:") else "dev" if conv in LOCOMO_DEV else "test"
    return WriteExample(f"{family}/{key}", family, split, unit, tuple(steps), expect, meta)


def mquake_examples(cases: list[dict[str, Any]]) -> list[WriteExample]:
    """Return the correction, correction_negative, negation, paraphrase, distinct and forget examples of MQuAKE-hard."""
    relations, pool, edits = _mquake_pool(cases)
    out: list[WriteExample] = []
    by_rel: dict[tuple[str, str], list[Fact]] = defaultdict(list)  # (split, relation) -> facts
    for f in pool:
        by_rel[(split_of(f"mquake:{f.subject}"), f.rid)].append(f)
    for old, new in edits:
        rel, unit = relations[old.rid], f"mquake:{old.subject}"
        ta, tb = _two(rel, old, new)
        key = f"{old.subject}|{old.rid}|{new}"
        meta = {"relation": old.rid, "templates": [ta, tb]}
        out.append(_ex("correction", unit, key, [Step("old", render(ta, old.subject, old.value)),
                                                 Step("new", render(tb, old.subject, new))],
                       {"old": old.value, "new": new}, **meta))
        others = [f.subject for f in by_rel[(split_of(unit), old.rid)] if f.subject != old.subject
                  and f.value not in (old.value, new) and old.subject not in f.subject and f.subject not in old.subject]
        if others:
            other = min(others, key=lambda s: _h(key, s))
            out.append(_ex("correction_negative", unit, key, [Step("first", render(ta, old.subject, old.value)),
                                                              Step("second", render(tb, other, new))],
                           {"first": old.value, "second": new}, other_subject=other, **meta))
    for f in pool:
        rel, unit, key = relations[f.rid], f"mquake:{f.subject}", f"{f.subject}|{f.rid}"
        ta, tb = _two(rel, f)
        out.append(_ex("duplicate_paraphrase", unit, key, [Step("original", render(ta, f.subject, f.value)),
                                                           Step("paraphrase", render(tb, f.subject, f.value))],
                       {"value": f.value}, relation=f.rid, templates=[ta, tb]))
        forms = ["not_true"] + (["no_longer", "is_not"] if rel.np else [])
        form = forms[_h("negation", f) % len(forms)]
        negation = {"not_true": f"It is not true that {_lower_first(tb, render(tb, f.subject, f.value))}",
                    "no_longer": f"{f.subject}'s {rel.np} is no longer {f.value}.",
                    "is_not": f"{f.subject}'s {rel.np} is not {f.value}."}[form]
        out.append(_ex("negation", unit, key, [Step("positive", render(ta, f.subject, f.value)),
                                               Step("negation", negation)],
                       {"value": f.value}, relation=f.rid, form=form))
    for (split, rid), facts in sorted(by_rel.items()):
        facts = sorted(facts, key=lambda f: _h("distinct", f))
        groups = [facts[i:i + DISTINCT_GROUP] for i in range(0, len(facts) - DISTINCT_GROUP + 1, DISTINCT_GROUP)]
        for gi, group in enumerate(groups):
            t = relations[rid].templates[_h("distinct", rid, gi) % len(relations[rid].templates)]
            # Values may repeat inside a group (two countries on one continent): the subject is the key then.
            keys = [f.value if sum(g.value == f.value for g in group) == 1 else f.subject for f in group]
            out.append(_ex("duplicate_distinct", f"mquake:{group[0].subject}", f"{rid}/{split}/{gi}",
                           [Step(f"fact-{i}", render(t, f.subject, f.value)) for i, f in enumerate(group)],
                           {"keys": keys}, relation=rid, template=t, subjects=[f.subject for f in group]))
    out += _forget_examples(relations, pool)
    return out


def _forget_examples(relations: dict[str, Relation], pool: list[Fact]) -> list[WriteExample]:
    """Return one forget example per fact whose relation has a noun phrase, with up to 3 facts to keep.

    The facts kept are, in this order of preference, other facts about the target's subject,
    facts whose value is the target's subject (its chain neighbours: "Hey Jude was performed by
    The Beatles" beside "the director of The Beatles"), and the same relation about other
    subjects ("the director of The Rolling Stones"): each shares words with the request.
    """
    split = {f: split_of(f"mquake:{f.subject}") for f in pool}
    about, valued, related = defaultdict(list), defaultdict(list), defaultdict(list)
    for f in pool:
        about[f.subject].append(f)
        valued[f.value].append(f)
        related[(split[f], f.rid)].append(f)
    out = []
    for target in pool:
        np = relations[target.rid].np
        if not np:
            continue
        near = [sorted((f for f in group if f != target and split[f] == split[target]
                        and f.value != target.value), key=lambda f: _h("keep", target, f))
                for group in (about[target.subject], valued[target.subject], related[(split[target], target.rid)])]
        keep = list(dict.fromkeys(f for group in near for f in group))[:3]
        if not keep:
            continue
        order = sorted([target, *keep], key=lambda f: _h("order", target, f))
        steps = [Step("target" if f == target else f"fact-{i}",
                      render(relations[f.rid].templates[_h("t", f) % len(relations[f.rid].templates)],
                             f.subject, f.value)) for i, f in enumerate(order)]
        phrase = f"the {np} of {target.subject}"
        channel = ("api", "turn", "turn_what")[_h("channel", target) % 3]
        steps.append(Step("request", phrase if channel == "api" else f"Please forget {phrase}." if channel == "turn"
                          else f"Forget what I told you about {phrase}.", "forget" if channel == "api" else "remember"))
        out.append(_ex("forget", f"mquake:{target.subject}", f"{target.subject}|{target.rid}", steps,
                       {"target": target.value, "keep": [f.value for f in keep]},
                       channel=channel, relation=target.rid))
    return out


# LoCoMo observations -------------------------------------------------------------------------------


def locomo_examples(conversations: list[dict[str, Any]]) -> tuple[list[WriteExample], Counter]:
    """Return one extraction example per LoCoMo turn with supported observations, and why facts were dropped."""
    out, dropped = [], Counter()
    for conv in conversations:
        cid, c = conv["sample_id"], conv["conversation"]
        turns = {t["dia_id"]: t for k, v in c.items() if re.fullmatch(r"session_\d+", k) for t in v}
        gold: dict[str, list[str]] = defaultdict(list)
        for session in conv.get("observation", {}).values():
            for speaker, items in session.items():
                for fact, dia in items:
                    turn = turns.get(dia) if isinstance(dia, str) else None
                    if turn is None:
                        dropped["not one turn"] += 1
                    elif turn["speaker"] != speaker:
                        dropped["another speaker's turn"] += 1
                    elif coverage(fact, turn["text"], [speaker]) < SUPPORT:
                        dropped["not supported by the turn's words"] += 1
                    else:
                        gold[dia].append(fact)
        for dia, facts in gold.items():
            t = turns[dia]
            out.append(_ex("extraction", f"locomo:{cid}", f"{cid}/{dia}", [Step("turn", t["text"])],
                           {"facts": facts, "speaker": t["speaker"]}, dia_id=dia))
    return out, dropped


# Synthetic identifiers -----------------------------------------------------------------------------

# Fillers for the identifier family, chosen to be ordinary and unambiguous; the identifiers carry the facts.
_FILL = {
    "device": ["printer", "scanner", "projector", "router", "coffee machine", "badge reader", "phone"],
    "city": ["Lisbon", "Porto", "Ghent", "Lyon", "Turin", "Leeds", "Graz", "Bergen", "Malmo", "Cork"],
    "day": ["Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday"],
    "name": ["Anna", "Marek", "Ines", "Tomas", "Priya", "Yusuf", "Lena", "Omar", "Sofia", "Kenji"],
}
# name: (template, split, distinct records, corrections, whether it has a state slot to correct)
SYNTHETIC = {
    "tickets": ("Ticket {id} was about the {device} on floor {n}.", "dev", 300, False),
    "orders": ("Order {id} shipped to {city} on {day}.", "test", 300, False),
    "invoices": ("Invoice {id} is for {n} euros.", "dev", 50, True),
    "rooms": ("Room {id} is booked for {day}.", "dev", 50, True),
    "lockers": ("Locker {id} belongs to {name}.", "test", 50, True),
    "flights": ("Flight LX{id} departs from gate {n}.", "test", 50, True),
}
SYNTHETIC_PAIRS = 20  # corrections and as many negatives per state family


def _fill(template: str, rng: random.Random, ident: int) -> tuple[str, str]:
    """Return a record sentence for identifier `ident` and its value (the filler after the identifier)."""
    values = {k: rng.choice(v) for k, v in _FILL.items()} | {"n": str(rng.randint(2, 980)), "id": str(ident)}
    text = template.format(**values)
    slot = re.findall(r"\{(\w+)\}", template)[-1]
    return text, values[slot]


def synthetic_examples() -> list[WriteExample]:
    """Return the identifier family: distinct lists, and corrections / negatives on state records."""
    out = []
    for name, (template, split, size, state) in SYNTHETIC.items():
        rng = random.Random(f"mnemo-writes-{name}")
        first = rng.randint(1000, 8000)
        ids = [first + 1 + 3 * i for i in range(size)]
        recs = [_fill(template, rng, i) for i in ids]
        # The key is the identifier as written ("LX1042" for a flight), so a memory of it mentions it whole.
        prefix = re.search(r"(\S*)\{id\}", template).group(1)
        out.append(_ex("duplicate_distinct", f"synthetic:{name}", f"{name}-{size}",
                       [Step(f"fact-{i}", t) for i, (t, _) in enumerate(recs)],
                       {"keys": [f"{prefix}{i}" for i in ids]}, split=split, template=template))
        for k in range(SYNTHETIC_PAIRS if state else 0):
            ident = ids[k]
            old_text, old = recs[k]
            while (new := _fill(template, rng, ident))[1] == old:
                pass
            neighbour = _fill(template, rng, ident + 1)
            while neighbour[1] in (old, new[1]):
                neighbour = _fill(template, rng, ident + 1)
            out.append(_ex("correction", f"synthetic:{name}", f"{name}-{ident}",
                           [Step("old", old_text), Step("new", new[0])], {"old": old, "new": new[1]},
                           split=split, template=template))
            out.append(_ex("correction_negative", f"synthetic:{name}", f"{name}-{ident}",
                           [Step("first", old_text), Step("second", neighbour[0])],
                           {"first": old, "second": neighbour[1]}, split=split, template=template))
    return out


# Everything ---------------------------------------------------------------------------------------


@dataclass
class WriteSet:
    """The built examples, the files they came from (sha256) and what the builder left out."""

    examples: list[WriteExample]
    checksums: dict[str, str]
    dropped: dict[str, int]


def build(path: str | Path | None = None, *, split: str = "all", verify: bool = True) -> WriteSet:
    """Return every write-path example of `split` ("dev", "test" or "all"), ordered by family then id.

    Reads `$MNEMO_DATA_DIR` (or `path`) as laid out in the data README; raises DatasetError when
    a dataset is missing. The same data gives the same list, byte for byte.
    """
    if split not in (*SPLITS, "all"):
        raise ConfigError(f"split must be dev, test or all, not {split!r}")
    mq_root = dataset_root("mquake_hard", Path(path) / "mquake_hard" if path else None)
    mq_file = first_existing(mq_root, ["MQuAKE-hard_shared.json", "MQuAKE-hard.json",
                                       "datasets/MQuAKE-hard.json"], "mquake_hard")
    lo_root = dataset_root("locomo", Path(path) / "locomo" if path else None)
    lo_file = first_existing(lo_root, ["locomo10_shared_8conv.json", "locomo10.json", "data/locomo10.json"], "locomo")
    from mnemo.eval.datasets.dialog import LOCOMO_HELDOUT
    from mnemo.eval.datasets.updates import MQUAKE_HELDOUT

    cases = [c for c in json.loads(mq_file.read_text(encoding="utf-8")) if c["case_id"] not in MQUAKE_HELDOUT]
    convs = [c for c in json.loads(lo_file.read_text(encoding="utf-8")) if c["sample_id"] not in LOCOMO_HELDOUT]
    extraction, dropped = locomo_examples(convs)
    examples = mquake_examples(cases) + extraction + synthetic_examples()
    examples = [e for e in examples if split in ("all", e.split)]
    examples.sort(key=lambda e: (FAMILIES.index(e.family), e.id))
    checksums = {**checksum("mquake_hard", mq_root, [mq_file], verify), **checksum("locomo", lo_root, [lo_file], verify)}
    return WriteSet(examples, checksums, dict(dropped))


def build_examples(split: str = "all", path: str | Path | None = None) -> list[WriteExample]:
    """Return the write-path examples of `split` (see `build`)."""
    return build(path, split=split).examples


def counts(examples: Iterable[WriteExample]) -> dict[tuple[str, str], int]:
    """Return the number of examples per (family, split)."""
    return dict(sorted(Counter((e.family, e.split) for e in examples).items()))
