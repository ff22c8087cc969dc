"""Scenarios: plain-English multi-session conversations with the outcomes a correct memory must show.

A scenario is one YAML file in `data/scenarios/` (the format is documented in its README):

    name: correction                      # unique; the file stem by convention
    about: A moved user must not be sent to the old city.
    user: alice                           # default speaker of turns and subject of probes
    start: "2024-03-01"                   # the simulated clock's start (default 2024-01-01)
    budget_tokens: 128                    # the same context budget for every system (default 256)
    sessions:
      - id: s1
        day: 0                            # days after start
        turns:
          - I live in Berlin.             # a turn: text said by `user`
          - {text: "My name is Bob.", user: bob}
          - {forget: my old address}      # an explicit forget call (the API), not a turn
        decay: false                      # run a decay pass after this session
    advance_days: 0                       # move the clock after the last session, before the probes
    decay: false                          # run a decay pass right before the probes
    probes:
      - id: city
        question: Where does alice live?
        expect: [Lisbon]                  # current values: must appear in the packed context
        forbid: [Berlin]                  # stale values: must not appear there as current
        abstain: false                    # true: must say unknown; false: must not (default: must not
                                          # when `expect` is given, else either is fine)
        forgets: ["lives in Berlin"]      # text of every memory that must be tombstoned by now
        survivors: ["Lisbon"]             # text of memories that must still be active (collateral)

The loader is strict, like `Config.from_params`: an unknown key, a missing field or a
wrongly typed value raises `ScenarioError` naming the file and the key.
"""

from __future__ import annotations

import difflib
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import yaml

from mnemo.errors import ConfigError

DEFAULT_START = "2024-01-01"
DEFAULT_BUDGET = 256
SCENARIO_DIR = Path(__file__).resolve().parents[2] / "data" / "scenarios"

_TOP = {"name", "about", "user", "start", "budget_tokens", "sessions", "advance_days", "decay", "probes"}
_SESSION = {"id", "day", "user", "turns", "decay"}
_TURN = {"text", "user", "forget"}
_PROBE = {"id", "question", "user", "expect", "forbid", "abstain", "forgets", "survivors"}


class ScenarioError(ConfigError):
    """A scenario file is malformed: an unknown key, a missing field or a wrong type."""


@dataclass(frozen=True)
class Step:
    """One thing that happens in a session: a turn said by a user, or an explicit forget call."""

    action: str  # "turn" | "forget"
    text: str  # what is said, or what the forget call names
    user: str
    session: str
    day: float  # days after the scenario's start


@dataclass(frozen=True)
class Probe:
    """A question asked after every session, with what its answer context must and must not hold."""

    id: str
    question: str
    user: str
    expect: tuple[str, ...] = ()  # current values that must appear in the packed context
    forbid: tuple[str, ...] = ()  # stale or forgotten values that must not appear there as current
    abstain: bool | None = None  # True: must say "unknown"; False: must not; None: either (see `should_abstain`)
    forgets: tuple[str, ...] = ()  # text of memories that must be tombstoned (forgotten, superseded, decayed)
    survivors: tuple[str, ...] = ()  # text of memories that must stay active

    @property
    def should_abstain(self) -> bool | None:
        """Return whether the system must abstain: as set, else False when values are expected, else None (unchecked)."""
        if self.abstain is not None:
            return self.abstain
        return False if self.expect else None

    @property
    def forgetting(self) -> bool:
        """Return True when this probe checks forgetting (it names targets or survivors)."""
        return bool(self.forgets or self.survivors)


@dataclass(frozen=True)
class Session:
    """A dated session of steps, optionally followed by a decay pass."""

    id: str
    day: float
    steps: tuple[Step, ...]
    decay: bool = False


@dataclass(frozen=True)
class Scenario:
    """A whole scenario: sessions in time order, then an optional clock advance and decay, then probes."""

    name: str
    about: str
    user: str
    start: datetime
    budget_tokens: int
    sessions: tuple[Session, ...]
    probes: tuple[Probe, ...]
    advance_days: float = 0.0
    decay: bool = False
    path: str | None = field(default=None, compare=False)

    @property
    def steps(self) -> list[Step]:
        """Return every step in order."""
        return [s for session in self.sessions for s in session.steps]

    @property
    def probe_day(self) -> float:
        """Return the day the probes are asked: the last session's day plus `advance_days`."""
        last = max((s.day for s in self.sessions), default=0.0)
        return last + self.advance_days


def _check_keys(raw: dict[str, Any], allowed: set[str], where: str) -> None:
    """Raise ScenarioError for any key of `raw` not in `allowed`, suggesting the closest known key."""
    for key in raw:
        if key not in allowed:
            close = difflib.get_close_matches(str(key), allowed, n=1)
            hint = f"; did you mean '{close[0]}'?" if close else f"; known keys: {', '.join(sorted(allowed))}"
            raise ScenarioError(f"{where}: unknown key '{key}'{hint}")


def _strings(value: Any, where: str) -> tuple[str, ...]:
    """Return `value` (a string or a list of strings) as a tuple of non-empty strings."""
    items = [value] if isinstance(value, str) else value
    if not isinstance(items, list) or not all(isinstance(v, (str, int, float)) for v in items):
        raise ScenarioError(f"{where}: expected a string or a list of strings, got {value!r}")
    out = tuple(str(v).strip() for v in items)
    if any(not v for v in out):
        raise ScenarioError(f"{where}: empty string in {value!r}")
    return out


def _number(value: Any, where: str) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or value < 0:
        raise ScenarioError(f"{where}: expected a number >= 0, got {value!r}")
    return float(value)


def _flag(value: Any, where: str) -> bool:
    if not isinstance(value, bool):
        raise ScenarioError(f"{where}: expected true or false, got {value!r}")
    return value


def _text(raw: dict[str, Any], key: str, where: str, default: str | None = None) -> str:
    value = raw.get(key, default)
    if not isinstance(value, str) or not value.strip():
        raise ScenarioError(f"{where}: '{key}' must be a non-empty string")
    return value.strip()


def _session(raw: Any, i: int, user: str, where: str) -> Session:
    here = f"{where} sessions[{i}]"
    if not isinstance(raw, dict):
        raise ScenarioError(f"{here}: expected a mapping with id, day and turns")
    _check_keys(raw, _SESSION, here)
    sid = _text(raw, "id", here, f"s{i + 1}")
    day = _number(raw.get("day", 0), f"{here} day")
    speaker = _text(raw, "user", here, user)
    turns = raw.get("turns")
    if not isinstance(turns, list) or not turns:
        raise ScenarioError(f"{here}: 'turns' must be a non-empty list")
    steps = []
    for j, turn in enumerate(turns):
        at = f"{here} turns[{j}]"
        if isinstance(turn, str):
            turn = {"text": turn}
        if not isinstance(turn, dict):
            raise ScenarioError(f"{at}: expected a string or a mapping")
        _check_keys(turn, _TURN, at)
        if ("text" in turn) == ("forget" in turn):
            raise ScenarioError(f"{at}: give exactly one of 'text' or 'forget'")
        action = "forget" if "forget" in turn else "turn"
        steps.append(Step(action, _text(turn, action if action == "forget" else "text", at),
                          _text(turn, "user", at, speaker), sid, day))
    return Session(sid, day, tuple(steps), _flag(raw.get("decay", False), f"{here} decay"))


def _probe(raw: Any, i: int, user: str, where: str) -> Probe:
    here = f"{where} probes[{i}]"
    if not isinstance(raw, dict):
        raise ScenarioError(f"{here}: expected a mapping with id and question")
    _check_keys(raw, _PROBE, here)
    lists = {k: _strings(raw.get(k, []), f"{here} {k}") for k in ("expect", "forbid", "forgets", "survivors")}
    probe = Probe(_text(raw, "id", here), _text(raw, "question", here), _text(raw, "user", here, user),
                  abstain=None if raw.get("abstain") is None else _flag(raw["abstain"], f"{here} abstain"), **lists)
    if probe.abstain and probe.expect:
        raise ScenarioError(f"{here}: an abstention probe cannot also expect values")
    if not (probe.expect or probe.forbid or probe.abstain is not None or probe.forgetting):
        raise ScenarioError(f"{here}: a probe must check something (expect, forbid, abstain, forgets or survivors)")
    return probe


def parse_scenario(raw: Any, where: str = "<scenario>") -> Scenario:
    """Return the Scenario described by `raw` (parsed YAML), or raise ScenarioError saying what is wrong."""
    if not isinstance(raw, dict):
        raise ScenarioError(f"{where}: expected a mapping at the top level")
    _check_keys(raw, _TOP, where)
    user = _text(raw, "user", where)
    start = raw.get("start", DEFAULT_START)
    try:
        when = datetime.fromisoformat(str(start))
    except ValueError as exc:
        raise ScenarioError(f"{where}: 'start' must be an ISO date, got {start!r}") from exc
    budget = raw.get("budget_tokens", DEFAULT_BUDGET)
    if isinstance(budget, bool) or not isinstance(budget, int) or budget <= 0:
        raise ScenarioError(f"{where}: 'budget_tokens' must be a positive integer, got {budget!r}")
    sessions, probes = raw.get("sessions"), raw.get("probes")
    if not isinstance(sessions, list) or not sessions:
        raise ScenarioError(f"{where}: 'sessions' must be a non-empty list")
    if not isinstance(probes, list) or not probes:
        raise ScenarioError(f"{where}: 'probes' must be a non-empty list")
    parsed = tuple(_session(s, i, user, where) for i, s in enumerate(sessions))
    days = [s.day for s in parsed]
    if days != sorted(days):
        raise ScenarioError(f"{where}: sessions must be in time order (days {days})")
    checks = tuple(_probe(p, i, user, where) for i, p in enumerate(probes))
    ids = [p.id for p in checks]
    if len(set(ids)) != len(ids):
        raise ScenarioError(f"{where}: probe ids must be unique, got {ids}")
    return Scenario(
        name=_text(raw, "name", where), about=_text(raw, "about", where), user=user,
        start=when if when.tzinfo else when.replace(tzinfo=timezone.utc), budget_tokens=budget,
        sessions=parsed, probes=checks, advance_days=_number(raw.get("advance_days", 0), f"{where} advance_days"),
        decay=_flag(raw.get("decay", False), f"{where} decay"), path=None,
    )


def load_scenario(path: str | Path) -> Scenario:
    """Return the scenario in the YAML file at `path`."""
    file = Path(path)
    try:
        raw = yaml.safe_load(file.read_text(encoding="utf-8"))
    except yaml.YAMLError as exc:
        raise ScenarioError(f"{file}: not valid YAML: {exc}") from exc
    scenario = parse_scenario(raw, str(file))
    return Scenario(**{**scenario.__dict__, "path": str(file)})


def load_scenarios(folder: str | Path | None = None, names: list[str] | None = None) -> list[Scenario]:
    """Return every scenario in `folder` (default `data/scenarios/` of the checkout), sorted by file name.

    `names` keeps only the scenarios with those names (an unknown name raises). Names must be unique.
    """
    root = Path(folder) if folder is not None else SCENARIO_DIR
    files = sorted(root.glob("*.yaml"))
    if not files:
        raise ScenarioError(f"no scenario files (*.yaml) in {root}; pass the folder that holds them")
    scenarios = [load_scenario(f) for f in files]
    seen: dict[str, str] = {}
    for s in scenarios:
        if s.name in seen:
            raise ScenarioError(f"scenario name '{s.name}' is used by {seen[s.name]} and {s.path}")
        seen[s.name] = s.path or ""
    if names:
        unknown = sorted(set(names) - set(seen))
        if unknown:
            raise ScenarioError(f"unknown scenario(s) {unknown}; known: {', '.join(sorted(seen))}")
        scenarios = [s for s in scenarios if s.name in names]
    return scenarios
