"""Long-clock simulator: synthetic personas whose facts have known lifetimes, played over a simulated year.

`simulate(SimConfig(), config)` generates personas from a seed and plays their sessions
through one `Memory` on a `SimulatedClock`. Fact classes, each with a known lifetime:
critical (identity, allergy, blood type: said once, never change, high importance);
changing (city, employer, a record's lead time: corrected on known days through the same
`Memory.add` subject and attribute, so reconciliation must supersede the old value);
recurring (weekly routines, re-mentioned every few weeks; some lapse and should then fade);
trivia (low-importance episodic crumbs that should fade).

Measured at every checkpoint: stale recalls (a packed memory holds a corrected value of
the queried fact; history notes, marked "not current", do not count), critical losses
(a critical fact's current value has no active memory, by reason), store size by status
and active trivia, hit rate, precision and abstention. Everything random comes from
one seed through independent numpy streams, so a seed fixes the result.
"""

from __future__ import annotations

import difflib
import time
from dataclasses import asdict, dataclass, field, fields
from datetime import timedelta
from typing import Any

import numpy as np

from ..clock import SimulatedClock
from ..config import Config, recipe
from ..errors import ConfigError
from ..memory import Memory
from ..model import STATUSES

LOSS_REASONS = ("decayed", "forgotten", "superseded", "missing")


@dataclass(frozen=True)
class SimConfig:
    """What to simulate: personas, how long, how often they talk and ask (the memory config is separate)."""

    seed: int = 0  # one seed fixes personas, schedules, trivia and queries
    personas: int = 3  # synthetic users sharing one store
    days: int = 365  # length of the simulated clock
    session_every_days: float = 7.0  # spacing of sessions; every persona has one each session day
    critical_facts: int = 4  # durable important facts per persona (identity, allergy, blood type, ...)
    changing_facts: int = 4  # facts per persona corrected on known days (city, employer, record attributes)
    corrections: int = 2  # most corrections per changing fact over the run (at least one)
    recurring_facts: int = 3  # weekly routines per persona, re-mentioned periodically
    recurring_every_days: float = 21.0  # mean spacing of the re-mentions of a recurring fact
    lapse_share: float = 0.34  # share of recurring facts that stop being mentioned and asked about midway
    trivia_per_session: int = 2  # low-importance episodic crumbs per persona per session
    queries_per_session: int = 2  # recalls per persona per session (plus one per correction made)
    absent_share: float = 0.15  # share of queries about something never said (abstention expected)
    budget_tokens: int = 256  # token budget of every recall
    decay_every_days: float = 7.0  # spacing of the decay + review_expired passes
    checkpoint_every_days: float = 7.0  # spacing of the timeline rows
    start: str = "2025-01-01"  # simulated start date (UTC)

    @classmethod
    def from_params(cls, **params: Any) -> SimConfig:
        """Return a SimConfig from flat parameters; an unknown name raises ConfigError with a suggestion."""
        known = {f.name: f for f in fields(cls)}
        for name in params:
            if name not in known:
                close = difflib.get_close_matches(name, known, n=1)
                raise ConfigError(f"unknown simulator parameter '{name}'"
                                  + (f"; did you mean '{close[0]}'?" if close else ""))
        return cls(**{k: type(getattr(cls(), k))(v) for k, v in params.items()})


def configs_from_params(params: dict[str, Any], base: Config | str | None = None) -> tuple[SimConfig, Config]:
    """Split flat parameters (as a notebook or sweep passes them) into a SimConfig and a mnemo Config.

    A name both define goes to the simulator: `budget_tokens` is the budget it passes to every recall.
    """
    sim_names = {f.name for f in fields(SimConfig)}
    sim = SimConfig.from_params(**{k: v for k, v in params.items() if k in sim_names})
    return sim, Config.from_params(base, **{k: v for k, v in params.items() if k not in sim_names})


# ----------------------------------------------------------------- vocabularies
FIRST = tuple("Ana Bruno Chen Dara Emil Fatima Goran Hana Ines Jonas Kofi Lena Mateo Nadia Omar Priya".split())
LAST = tuple("Souza Keller Okafor Lindqvist Moreau Tanaka Novak Haddad Ferreira Kowalski".split())
CITIES = tuple("Lisbon Porto Berlin Munich Lyon Utrecht Ghent Krakow Valencia Turin Aarhus Graz".split())
EMPLOYERS = tuple("Siemens Zalando Philips Bosch Spotify Adyen Ocado Miro Celonis Wise".split())
ACTIVITIES = tuple("climbing|swimming|yoga|choir practice|chess club|pottery|rowing|salsa".split("|"))
WEEKDAYS = tuple("Monday Tuesday Wednesday Thursday Friday Saturday Sunday".split())
FOODS = tuple(("ramen|a falafel wrap|pad thai|a caesar salad|pho|a burrito|dumplings|lentil soup|"
               "a margherita pizza|sushi|a club sandwich|bibimbap").split("|"))
PLACES = tuple(("the canteen|the corner cafe|the food market|the station kiosk|the rooftop bar|the noodle bar|"
                "the bakery|the harbour").split("|"))
SHOWS = tuple(("a documentary about octopuses|a heist film|an old western|a cooking contest|a chess tournament "
               "stream|a nature series|a courtroom drama|a space opera").split("|"))
ITEMS = tuple(("an umbrella|new headphones|a desk lamp|running shoes|a houseplant|a phone case|a rain jacket|"
               "a coffee grinder").split("|"))
TRIVIA = ("{who} had {food} for lunch at {place} with {friend}", "{who} watched {show} with {friend} on {day}",
          "{who} bought {item} on {day} on the way home", "{who} said the queue at {place} was long on {day}")
RECORD_PREFIXES = tuple("AX BK CR DV EM FL GT HZ".split())
ABSENT = ("What is {who}'s shoe size?", "What car does {who} drive?", "What is the name of {who}'s dog?",
          "Who is {who}'s dentist?", "What is the warranty period of {rid}?", "Which warehouse stores {rid}?")


@dataclass(frozen=True)
class Template:
    """How one attribute is said, corrected and asked about, and how much it matters."""

    kind: str  # memory kind written
    category: str  # memory category written
    importance: float  # importance written
    said: str  # statement, with {who} / {rid} / {v}
    question: str  # the query that asks for the current value
    pool: tuple[str, ...]  # the values it can take ({who} is filled in)
    changed: str | None = None  # statement of a correction (default: `said`)
    pinned: bool = False  # written pinned (the user asked to keep it)
    record: bool = False  # about a record id rather than the persona


CRITICAL = {
    "full_name": Template("semantic", "profile", 0.9, "{who}'s full name is {v}", "What is {who}'s full name?",
                          tuple("{who} " + last for last in LAST)),
    "birthday": Template("semantic", "profile", 0.8, "{who} was born on {v}", "When was {who} born?",
                         tuple("1984-02-11 1987-05-12 1990-09-30 1992-12-03 1979-07-21 1995-03-08".split())),
    "allergy": Template("semantic", "fact", 0.95, "{who} is severely allergic to {v}", "What is {who} allergic to?",
                        tuple("penicillin|peanuts|shellfish|latex|bee stings|sesame".split("|")), pinned=True),
    "blood_type": Template("semantic", "fact", 0.9, "{who}'s blood type is {v}", "What is {who}'s blood type?",
                           tuple("O negative|O positive|A negative|A positive|B positive|AB negative".split("|"))),
    "emergency_contact": Template(
        "semantic", "fact", 0.85, "{who}'s emergency contact is {v}", "Who is {who}'s emergency contact?",
        tuple("Marta (sister)|Paul (husband)|Yuki (wife)|Sam (brother)|Leo (father)".split("|"))),
    "medication": Template("semantic", "fact", 0.9, "{who} takes {v} as daily medication",
                           "Which medication does {who} take?",
                           tuple("levothyroxine|metformin|lisinopril|an insulin pen|warfarin".split("|"))),
}
CHANGING = {
    "city": Template("semantic", "profile", 0.8, "{who} lives in {v}", "Where does {who} live?", CITIES,
                     changed="{who} now lives in {v}"),
    "employer": Template("semantic", "profile", 0.8, "{who} works at {v}", "Who does {who} work for?", EMPLOYERS,
                         changed="{who} now works at {v}"),
    "lead_time": Template("semantic", "fact", 0.6, "The lead time for {rid} is {v}", "What is the lead time for {rid}?",
                          tuple(f"{d} days" for d in (7, 10, 14, 21, 28, 35, 42, 56)), record=True),
    "supplier": Template("semantic", "fact", 0.6, "{rid} is supplied by {v}", "Who supplies {rid}?", tuple(
        "Norda Metals|Kessler GmbH|Aster Components|Vantor|Brightline Parts".split("|")), record=True),
    "unit_price": Template("semantic", "fact", 0.6, "The unit price of {rid} is {v}", "What is the unit price of {rid}?",
                           tuple("$4.20 $5.75 $6.10 $7.40 $8.95 $11.30".split()), record=True),
    "reorder_point": Template("semantic", "fact", 0.6, "The reorder point for {rid} is {v}",
                              "What is the reorder point for {rid}?", tuple(f"{n} units" for n in (50, 80, 120, 200, 250)),
                              record=True),
}
# Routines are written episodic on purpose: at the default 14-day half-life a routine of importance
# 0.5 decays within ~5 weeks unless re-mentioned, which is what makes reinforcement visible.
RECURRING = Template("episodic", "routine", 0.5, "{who} goes {activity} every {v}", "When does {who} go {activity}?",
                     WEEKDAYS)


@dataclass(frozen=True)
class Fact:
    """One fact of a persona and its known lifetime: every statement of it, by day."""

    id: str  # "<user>/<subject>/<attribute>", unique in a run
    user: str
    cls: str  # critical | changing | recurring
    subject: str  # "user" or a record id
    attribute: str
    template: Template
    text_vars: dict[str, str]  # {who}, {rid}, {activity}
    said: tuple[tuple[float, str], ...]  # (day, value), in day order; a new value corrects the previous one
    lapse: float | None = None  # day after which a recurring fact is no longer mentioned or asked about


@dataclass(frozen=True)
class Persona:
    """A synthetic user: a name, record ids, facts and questions it never answers."""

    user: str
    who: str
    records: tuple[str, ...]
    facts: tuple[Fact, ...]
    absent: tuple[str, ...] = field(default=())


def _fact(user: str, who: str, cls: str, attr: str, t: Template, said: list[tuple[float, str]],
          lapse: float | None = None, **more: str) -> Fact:
    """Return a fact of `user`, its values filled in; a record attribute is about its record id."""
    subject = more.get("rid", "user") if t.record else "user"
    tv = {"who": who, **more}
    return Fact(f"{user}/{subject}/{attr}", user, cls, subject, attr, t, tv,
                tuple((round(float(d), 3), str(v).format(**tv)) for d, v in said), lapse)


def make_personas(cfg: SimConfig) -> list[Persona]:
    """Return the personas of a run, generated deterministically from `cfg.seed`.

    Each persona draws from its own random stream, so persona i is the same whatever
    the number of personas; statement days scale with `cfg.days`.
    """
    horizon = float(cfg.days)
    names = np.random.default_rng([cfg.seed, 1]).permutation(len(FIRST))
    return [_persona(i, FIRST[int(names[i % len(FIRST)])], cfg, horizon, np.random.default_rng([cfg.seed, 1, i]))
            for i in range(cfg.personas)]


def _persona(i: int, who: str, cfg: SimConfig, horizon: float, rng: np.random.Generator) -> Persona:
    # The user id is the name, as an agent would key it ("ana"); a suffix only once the names run out.
    user = who.lower() + (str(i // len(FIRST) + 1) if i >= len(FIRST) else "")
    prefixes = rng.choice(RECORD_PREFIXES, size=3, replace=False)
    records = tuple(f"{p}-{int(n)}" for p, n in zip(prefixes, rng.integers(2, 99, size=3), strict=True))
    facts: list[Fact] = []
    for attr in rng.choice(list(CRITICAL), size=min(cfg.critical_facts, len(CRITICAL)), replace=False):
        t = CRITICAL[str(attr)]
        facts.append(_fact(user, who, "critical", str(attr), t, [(rng.uniform(0, min(21.0, horizon)),
                                                                  rng.choice(t.pool))]))
    # The persona's own changing attributes, plus every record attribute of each of its record ids.
    slots = [("city", None), ("employer", None)] + [(a, r) for r in records for a in CHANGING if CHANGING[a].record]
    for k in rng.choice(len(slots), size=min(cfg.changing_facts, len(slots)), replace=False):
        attr, rid = slots[int(k)]
        first = rng.uniform(0, min(30.0, horizon))
        n = int(rng.integers(1, cfg.corrections + 1)) if cfg.corrections > 0 else 0
        # A correction comes at least two weeks after the first statement and a week before the end.
        days = sorted(rng.uniform(first + 14.0, horizon - 7.0, size=n)) if horizon - 7.0 > first + 14.0 else []
        values = rng.choice(CHANGING[attr].pool, size=min(len(CHANGING[attr].pool), len(days) + 1), replace=False)
        facts.append(_fact(user, who, "changing", attr, CHANGING[attr], list(zip([first, *days], values,
                                                                                  strict=False)),
                           **({"rid": rid} if rid else {})))
    for activity in rng.choice(ACTIVITIES, size=min(cfg.recurring_facts, len(ACTIVITIES)), replace=False):
        day, value = rng.uniform(0, min(30.0, horizon)), rng.choice(WEEKDAYS)
        lapse = rng.uniform(0.3, 0.6) * horizon if rng.random() < cfg.lapse_share else None
        said = []
        while day <= min(horizon, lapse if lapse is not None else horizon):
            said.append((day, value))
            day += cfg.recurring_every_days * rng.uniform(0.5, 1.5)
        facts.append(_fact(user, who, "recurring", "routine_" + str(activity).replace(" ", "_"), RECURRING, said,
                           lapse, activity=str(activity)))
    # Questions about things never said: another record id of the same family, attributes never stated.
    ghost = f"{records[-1][:2]}-{int(records[-1][3:]) + 100}"
    return Persona(user, who, records, tuple(facts), tuple(q.format(who=who, rid=ghost) for q in ABSENT))


# ----------------------------------------------------------------- the run
@dataclass
class SimResult:
    """What a run measured: one row per checkpoint, one per query, each critical loss, and a summary."""

    timeline: list[dict[str, Any]]  # one row per checkpoint (window metrics + store snapshot)
    queries: list[dict[str, Any]]  # one row per recall, with its ground truth and verdict
    losses: list[dict[str, Any]]  # each critical fact the first time it is found lost, with why
    summary: dict[str, Any]  # the whole run in scalars (what a sweep collects)
    config: dict[str, Any]  # the SimConfig, the mnemo Config parameters and the provenance it ran with
    runtime_s: float = 0.0  # wall time; kept out of `summary` so that a seed fixes the summary exactly
    cpu_s: float = 0.0  # CPU time of the process (all threads): the cost on a shared machine

    def to_frame(self, what: str = "timeline"):
        """Return `timeline` (or "queries", "losses") as a pandas DataFrame."""
        import pandas as pd

        if what not in ("timeline", "queries", "losses"):
            raise ConfigError(f"unknown table '{what}'; use timeline, queries or losses")
        return pd.DataFrame(getattr(self, what))


def _norm(value: str | None) -> str:
    return " ".join((value or "").casefold().split())


def _check(cfg: SimConfig) -> None:
    positive = ("days", "session_every_days", "decay_every_days", "checkpoint_every_days", "recurring_every_days")
    for name in [*positive, "personas", "critical_facts", "changing_facts", "recurring_facts", "trivia_per_session",
                 "queries_per_session", "budget_tokens"]:
        if getattr(cfg, name) < 0 or (name in positive and getattr(cfg, name) == 0):
            raise ConfigError(f"SimConfig.{name} must be {'>' if name in positive else '>='} 0, got {getattr(cfg, name)}")


def _steps(every: float, days: float, first: int) -> list[float]:
    return [round(k * every, 6) for k in range(first, int(days / every + 1e-9) + 1)]


def simulate(cfg: SimConfig | None = None, config: Config | str | None = None) -> SimResult:
    """Play `cfg`'s personas over the simulated clock through one Memory and return what was measured."""
    cfg = cfg or SimConfig()
    _check(cfg)
    config = config if isinstance(config, Config) else recipe(config)
    began, cpu = time.perf_counter(), time.process_time()
    personas = make_personas(cfg)
    clock = SimulatedClock(cfg.start)
    start = clock.now()
    sessions = {t: k for k, t in enumerate(_steps(cfg.session_every_days, cfg.days, 0))}
    # Each statement is made at the first session on or after its day.
    writes: dict[int, list[tuple[Fact, int]]] = {}
    for f in (f for p in personas for f in p.facts):
        for j, (day, _) in enumerate(f.said):
            k = int(np.ceil(day / cfg.session_every_days - 1e-9))
            if k < len(sessions):
                writes.setdefault(k, []).append((f, j))
    decays = set(_steps(cfg.decay_every_days, cfg.days, 1))
    checks = set(_steps(cfg.checkpoint_every_days, cfg.days, 1)) | {round(float(cfg.days), 6)}
    trivia_rng, query_rng = np.random.default_rng([cfg.seed, 2]), np.random.default_rng([cfg.seed, 3])
    state = _State()
    with Memory.open(":memory:", embedder="hash", llm="offline", clock=clock, config=config) as mem:
        for t in sorted(set(sessions) | decays | checks):
            clock.set(start + timedelta(days=t))
            # Forgetting runs first on a shared day, as a nightly job would before the next session.
            if t in decays:
                mem.decay()
                mem.review_expired()
            if t in sessions:
                corrected = _write(mem, personas, writes.get(sessions[t], []), sessions[t], state, cfg, trivia_rng)
                for p in personas:
                    _ask(mem, p, t, corrected.get(p.user, []), state, cfg, query_rng)
            if t in checks:
                state.timeline.append(_checkpoint(mem, personas, t, state))
        provenance = mem.provenance()
    result = SimResult(state.timeline, state.queries, state.losses, {}, {"sim": asdict(cfg), "mnemo": config.params(),
                                                                        "provenance": provenance})
    result.summary = summarise(result, config)
    result.runtime_s, result.cpu_s = round(time.perf_counter() - began, 3), round(time.process_time() - cpu, 3)
    return result


@dataclass
class _State:
    """What has been said so far (the ground truth) and what has been measured."""

    said: dict[str, list[str]] = field(default_factory=dict)  # fact id -> values said, in order
    window: list[dict[str, Any]] = field(default_factory=list)  # queries since the last checkpoint
    queries: list[dict[str, Any]] = field(default_factory=list)
    timeline: list[dict[str, Any]] = field(default_factory=list)
    losses: list[dict[str, Any]] = field(default_factory=list)
    trivia_said: int = 0


def _write(mem: Memory, personas: list[Persona], todo: list[tuple[Fact, int]], k: int, state: _State,
           cfg: SimConfig, rng: np.random.Generator) -> dict[str, list[Fact]]:
    """Make this session's statements and trivia; return the facts corrected, by user."""
    corrected: dict[str, list[Fact]] = {}
    for f, j in todo:
        t, value = f.template, f.said[j][1]
        before = state.said.setdefault(f.id, [])
        change = bool(before) and _norm(before[-1]) != _norm(value)
        text = ((t.changed or t.said) if change else t.said).format(v=value, **f.text_vars)
        mem.add(text, user=f.user, kind=t.kind, category=t.category, subject=f.subject, attribute=f.attribute,
                value=value, importance=t.importance, pinned=t.pinned, session=f"s{k}",
                meta={"sim_fact": f.id, "sim_class": f.cls})
        before.append(value)
        if change:
            corrected.setdefault(f.user, []).append(f)
    for p in personas:
        for _ in range(cfg.trivia_per_session):
            text = str(rng.choice(TRIVIA)).format(who=p.who, food=rng.choice(FOODS), place=rng.choice(PLACES),
                                                  show=rng.choice(SHOWS), item=rng.choice(ITEMS),
                                                  friend=rng.choice(FIRST), day=rng.choice(WEEKDAYS))
            mem.add(text, user=p.user, kind="episodic", category="event", subject="user",
                    importance=round(float(rng.uniform(0.1, 0.35)), 2), session=f"s{k}",
                    meta={"sim_class": "trivia"})
            state.trivia_said += 1
    return corrected


def _ask(mem: Memory, p: Persona, day: float, corrected: list[Fact], state: _State, cfg: SimConfig,
         rng: np.random.Generator) -> None:
    """Ask this session's questions of one persona and score each recall against the ground truth."""
    pool = [f for f in p.facts if state.said.get(f.id) and (f.lapse is None or day < f.lapse)]
    asks: list[tuple[str, Fact | None]] = []
    for _ in range(cfg.queries_per_session):
        if not pool or rng.random() < cfg.absent_share:
            asks.append(("absent", None))
        else:
            asks.append(("current", pool[int(rng.integers(len(pool)))]))
    # A correction is checked in the session it is made: the first moment a stale value could leak.
    asks += [("check", f) for f in corrected]
    for what, f in asks:
        question = (p.absent[int(rng.integers(len(p.absent)))] if f is None
                    else f.template.question.format(**f.text_vars))
        r = mem.recall(question, user=p.user, budget_tokens=cfg.budget_tokens)
        row = {"day": day, "user": p.user, "query": what, "fact": f.id if f else None, "class": f.cls if f else None,
               "question": question, "confidence": r.confidence, "packed": len(r.memories),
               "abstained": r.confidence == "unknown"}
        if f is None:
            row.update(correct=row["abstained"])
        else:
            values = state.said[f.id]
            current, retired = _norm(values[-1]), {_norm(v) for v in values} - {_norm(values[-1])}
            mine = [m.memory for m in r.memories if m.memory.meta.get("sim_fact") == f.id]
            relevant = sum(_norm(m.value) == current for m in mine)
            stale = [m.value for m in mine if _norm(m.value) in retired]
            row.update(current=values[-1], corrected=bool(retired), hit=relevant > 0, stale=bool(stale),
                       stale_value=stale[0] if stale else None,
                       precision=relevant / len(r.memories) if r.memories else 0.0,
                       correct=relevant > 0 and not stale)
        state.window.append(row)
        state.queries.append(row)


def _mean(rows: list[dict[str, Any]], key: str) -> float | None:
    vals = [float(r[key]) for r in rows if r.get(key) is not None]
    return round(sum(vals) / len(vals), 4) if vals else None


def query_metrics(rows: list[dict[str, Any]]) -> dict[str, Any]:
    """Return hit rate, precision, stale recalls and rate, and abstention figures over query rows.

    Present-fact queries: hit rate and precision (an empty pack scores precision 0: a
    failure is a row, never dropped); stale_rate is over queries whose fact had been
    corrected. Absent-fact queries: abstention_accuracy is the share answered "unknown";
    false_abstention_rate is the share of present-fact queries answered "unknown".
    """
    present = [r for r in rows if r["query"] != "absent"]
    corrected = [r for r in present if r["corrected"]]
    absent = [r for r in rows if r["query"] == "absent"]
    return {"queries": len(rows), "hit_rate": _mean(present, "hit"), "precision": _mean(present, "precision"),
            "stale_recalls": sum(r["stale"] for r in present), "stale_rate": _mean(corrected, "stale"),
            "abstention_accuracy": _mean(absent, "abstained"), "false_abstention_rate": _mean(present, "abstained")}


def _checkpoint(mem: Memory, personas: list[Persona], day: float, state: _State) -> dict[str, Any]:
    """Return one timeline row: the window's query metrics and a snapshot of the store and the facts."""
    records = mem.memories(include_inactive=True)
    by_fact: dict[str, list] = {}
    for m in records:
        by_fact.setdefault(m.meta.get("sim_fact"), []).append(m)
    status = {s: sum(m.status == s for m in records) for s in STATUSES}
    trivia = [m for m in records if m.meta.get("sim_class") == "trivia"]
    row: dict[str, Any] = {"day": day, "date": mem.clock.now().date().isoformat(), **query_metrics(state.window),
                           **status, "trivia_said": state.trivia_said, "trivia_stored": len(trivia),
                           "trivia_active": sum(m.active for m in trivia)}
    lost = {f"critical_lost_{r}": 0 for r in LOSS_REASONS}
    counts = dict.fromkeys(("critical_facts", "changing_lost", "recurring_lost", "lapsed", "lapsed_active"), 0)
    for f in (f for p in personas for f in p.facts if state.said.get(f.id)):
        current = _norm(state.said[f.id][-1])
        holders = [m for m in by_fact.get(f.id, []) if _norm(m.value) == current]
        alive = any(m.active for m in holders)
        if f.lapse is not None and day >= f.lapse:
            counts["lapsed"] += 1
            counts["lapsed_active"] += alive
        elif f.cls != "critical":
            counts[f"{f.cls}_lost"] += not alive
        else:
            counts["critical_facts"] += 1
            if alive:
                continue
            # The memory that last held the current value says how it went; none at all is "missing".
            last = max(holders, key=lambda m: m.status_at or m.created_at) if holders else None
            reason = last.status if last is not None else "missing"
            lost[f"critical_lost_{reason}"] += 1
            if f.id not in {loss["fact"] for loss in state.losses}:
                state.losses.append({"day": day, "user": f.user, "fact": f.id, "reason": reason,
                                     "status_reason": last.status_reason if last else None,
                                     "text": last.text if last else None})
    state.window = []
    return {**row, **counts, "critical_lost": sum(lost.values()), **lost, "stale_recalls_total":
            sum(bool(q.get("stale")) for q in state.queries)}


def summarise(result: SimResult, config: Config) -> dict[str, Any]:
    """Return the run in scalars: query metrics over the whole run, the final store, the worst losses."""
    end = result.timeline[-1] if result.timeline else {}
    checks = [q for q in result.queries if q["query"] == "check"]
    keep = ("critical_facts", "critical_lost", *(f"critical_lost_{r}" for r in LOSS_REASONS), "changing_lost",
            "recurring_lost", "lapsed", "lapsed_active", "trivia_said", "trivia_stored", "trivia_active",
            "active", "superseded", "forgotten", "decayed")
    return {"seed": result.config["sim"]["seed"], "personas": result.config["sim"]["personas"],
            "days": result.config["sim"]["days"], **query_metrics(result.queries),
            "check_queries": len(checks), "stale_after_correction": sum(bool(q["stale"]) for q in checks),
            **{k: end.get(k) for k in keep},
            **{f"{k}_max": max((r[k] for r in result.timeline), default=0)
               for k in ("critical_lost", "changing_lost", "recurring_lost")},
            "trivia_active_max": max((r["trivia_active"] for r in result.timeline), default=0),
            "half_life_episodic_days": config.decay.half_life_episodic_days,
            "half_life_semantic_days": config.decay.half_life_semantic_days, "threshold": config.decay.threshold}


def sweep_half_life(half_lives: list[float], thresholds: list[float], sim_cfg: SimConfig | None = None, *,
                    kind: str = "episodic", base: Config | str | None = None) -> list[dict[str, Any]]:
    """Run the simulator at every (half-life, threshold) point and return one summary row per point.

    `kind` says which half-life moves (episodic, semantic or procedural); everything
    else comes from `base` (a Config or recipe name, default recipe if None).
    """
    if kind not in ("episodic", "semantic", "procedural"):
        raise ConfigError(f"unknown kind '{kind}'; use episodic, semantic or procedural")
    rows = []
    for h in half_lives:
        for th in thresholds:
            config = Config.from_params(base, **{f"half_life_{kind}_days": h, "threshold": th})
            res = simulate(sim_cfg, config)
            rows.append({"kind": kind, "half_life_days": float(h), **res.summary, "runtime_s": res.runtime_s,
                         "cpu_s": res.cpu_s})
    return rows
