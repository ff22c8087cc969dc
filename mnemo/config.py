"""Frozen configuration, named recipes and a strict loader.

Every experimental knob lives here (never in environment variables), and the
config is recorded with every result. `Config.from_params(...)` accepts flat
parameter names (as papermill passes them) and refuses unknown ones.
"""

from __future__ import annotations

import difflib
import json
from dataclasses import asdict, dataclass, field, fields, replace
from pathlib import Path
from typing import Any

from .errors import ConfigError


@dataclass(frozen=True)
class WriteConfig:
    duplicate_threshold: float = 0.92  # cosine at or above which a candidate is a duplicate
    arbitration_low: float = 0.75  # cosine from here up to the duplicate threshold asks the judge
    supersede_threshold: float = 0.5  # judge score at or above which a same-subject pair is a contradiction
    slot_threshold: float = 0.8  # cosine of two slot phrases at or above which they are one slot (same entity)
    min_importance: float = 0.05  # candidates below this are ignored
    identity_floor: float = 0.8  # importance floor for identity facts (name, home, job)
    deadline_floor: float = 0.7  # importance floor for deadlines and dates
    remember_floor: float = 0.9  # importance floor for explicit "remember that ..." requests
    max_turn_chars: int = 1_000_000  # longer input is refused with InvalidInput, nothing stored
    context_turns: int = 3  # recent turns of the session used to resolve "save this"
    max_candidates: int = 64  # candidates kept per turn (most important first); the rest are reported as ignored
    max_sentences: int = 256  # sentences of one turn the parser reads; the rest are reported as unread
    parse_worker: bool = True  # remember_many parses its next block in a second process (2+ cores; extract.parse_worker)
    update_model: bool = True  # decide updates with the fitted model (mnemo/recipes/updates.json); False: hand rules


@dataclass(frozen=True)
class DecayConfig:
    threshold: float = 0.08  # salience under which an active memory decays
    half_life_episodic_days: float = 14.0  # recency half-life of episodic memories
    half_life_semantic_days: float = 180.0  # recency half-life of semantic memories
    half_life_procedural_days: float = 365.0  # recency half-life of procedural memories
    exempt_categories: tuple[str, ...] = ("preference", "profile", "failure", "lesson", "decision",
                                          "instruction")  # never decay, no TTL (rules for the assistant included)
    reinforcement_weight: float = 0.15  # salience gained per log2(1 + access_count)
    corroboration_weight: float = 0.1  # salience gained per log2(1 + corroborations)
    ttl_low_hours: float = 24.0  # TTL of memories with importance < ttl_low_below
    ttl_mid_hours: float = 720.0  # TTL of memories with importance < ttl_mid_below (>= 3 weeks: decay.py design note)
    ttl_low_below: float = 0.2  # importance under which the short TTL applies
    ttl_mid_below: float = 0.4  # importance under which the medium TTL applies (above: permanent)


@dataclass(frozen=True)
class RecallConfig:
    budget_tokens: int = 512  # hard ceiling on the packed context
    candidates: int = 50  # candidates taken from each retriever before fusion
    fusion: str = "weighted_rank"  # rrf | weighted | weighted_rank (ranking.fuse); chosen out of fold (README)
    lexical_weight: float = 0.6  # 0 = vectors only, 1 = BM25 only; chosen out of fold with fusion
    rrf_k: int = 60  # reciprocal rank fusion constant
    time_scope: bool = True  # a question naming a time ranks what was said then first (ranking.fuse_scoped); out of fold
    context_weight: float = 0.5  # share of its best neighbour's relevance a turn gains (ranking.in_context); README
    context_joins: int = 10  # the neighbours of this many best hits join the candidates (ranking.in_context); 0 = none
    rerank: str = "locomo"  # a fitted reranker (recall.rerank: a name in mnemo/recipes/rerankers/ or a JSON file); "" = none
    weight_relevance: float = 0.7  # share of the final score from fused relevance
    weight_recency: float = 0.1  # share from recency
    weight_salience: float = 0.1  # share from salience
    weight_prior: float = 0.1  # share from the type prior
    weight_claim: float = 0.2  # added for a memory whose claim answers the question (subtracted on a conflict)
    semantic_quota: float = 0.45  # share of the budget reserved for semantic memories
    procedural_quota: float = 0.25  # share reserved for procedural memories
    episodic_quota: float = 0.30  # share reserved for episodic memories
    min_relevance: float = 0.0  # candidates under this fused relevance are not packed
    certain_at: float = 0.6  # top evidence at or above this is "certain"
    vague_at: float = 0.35  # top evidence at or above this (and under certain_at) is "vague"
    unknown_floor: float = 0.45  # on "unknown", packed memories with evidence at or above this stay, marked as no answer
    unknown_nearest: int = 3  # on "unknown", this many nearest packed memories stay too, marked as no answer
    answerable: bool = True  # consult the fitted answerability model (recall.judge); False: the claim rules alone
    # The claim rules decide; the model overturns their "unknown" (to "vague") at P(answerable) >= rescue_at.
    # None: the model's own thresholds decide (recipe "answerability"). 0.5: more likely answerable than not.
    rescue_at: float | None = 0.5
    expand_hops: int = 2  # hops along supersedes / because links for history


@dataclass(frozen=True)
class TrustConfig:
    act_threshold: float = 0.6  # pack trust at or above which the verdict is "act"
    load_bearing_importance: float = 0.6  # importance from which an unverifiable memory is load-bearing
    single_source_penalty: float = 0.15  # trust lost by a memory never corroborated
    confirmation_half_life_days: float = 30.0  # age at which an unconfirmed claim's trust halves
    tool_timeout_s: float = 5.0  # a tool slower than this makes the claim unverified
    stable_half_life_days: float = 180.0  # confirmation half-life of preferences, profile facts, routines, instructions
    audit_pair_cosine: float = 0.1  # cosine from which same-subject pairs go to the semantic judge (hash: opposites ~0.2)
    crumb_salience: float = 0.15  # episodic memories under this salience are proposed for forgetting


@dataclass(frozen=True)
class Config:
    write: WriteConfig = field(default_factory=WriteConfig)
    decay: DecayConfig = field(default_factory=DecayConfig)
    recall: RecallConfig = field(default_factory=RecallConfig)
    trust: TrustConfig = field(default_factory=TrustConfig)
    recipe: str = "default"  # the name this config was loaded under

    SECTIONS = ("write", "decay", "recall", "trust")

    def to_dict(self) -> dict[str, Any]:
        """Return the config as plain JSON-able values, for recording with results."""
        return asdict(self)

    def params(self) -> dict[str, Any]:
        """Return the flat parameter mapping that `from_params` accepts."""
        flat: dict[str, Any] = {}
        for section in self.SECTIONS:
            flat.update(asdict(getattr(self, section)))
        return flat

    @classmethod
    def from_params(cls, base: Config | str | None = None, **params: Any) -> Config:
        """Return `base` (a config or recipe name) with flat parameters applied; unknown names raise."""
        cfg = recipe(base) if isinstance(base, str) or base is None else base
        by_section: dict[str, dict[str, Any]] = {s: {} for s in cls.SECTIONS}
        owners = {f.name: s for s in cls.SECTIONS for f in fields(getattr(cfg, s))}
        for name, value in params.items():
            if name not in owners:
                close = difflib.get_close_matches(name, owners, n=1) or [o for o in sorted(owners) if o.startswith(name)]
                hint = f"; did you mean '{close[0]}'?" if close else ""
                raise ConfigError(f"unknown parameter '{name}'{hint}")
            by_section[owners[name]][name] = _coerce(getattr(getattr(cfg, owners[name]), name), value, name)
        changes = {s: replace(getattr(cfg, s), **v) for s, v in by_section.items() if v}
        if "rerank" in params and params["rerank"]:
            reranker_path(str(params["rerank"]))  # a reranker that does not exist is refused now, not at recall
        return replace(cfg, **changes)


def _coerce(current: Any, value: Any, name: str) -> Any:
    """Return `value` with the type of `current`, or raise ConfigError."""
    try:
        if isinstance(current, bool):
            if isinstance(value, str):
                return value.lower() in ("1", "true", "yes")
            return bool(value)
        if isinstance(current, tuple):
            return tuple(value)
        if isinstance(current, (int, float, str)):
            return type(current)(value)
    except (TypeError, ValueError) as exc:
        raise ConfigError(f"parameter '{name}' expects {type(current).__name__}, got {value!r}") from exc
    return value


RECIPES: dict[str, Config] = {
    "default": Config(),
    # The default without its reranker: fusion, time scope and context only (the default before the reranker).
    "fusion": Config(recall=RecallConfig(rerank=""), recipe="fusion"),
    # The default until #18 chose one out of fold: reciprocal rank fusion, vectors and BM25 alike.
    # The plain retrievers and the old default stay plain: no time scope, context or reranker (#18 measures against them).
    "hybrid": Config(recall=RecallConfig(fusion="rrf", lexical_weight=0.5, time_scope=False, context_weight=0.0,
                                        rerank=""),
                   recipe="hybrid"),
    "dense": Config(recall=RecallConfig(fusion="rrf", lexical_weight=0.0, time_scope=False, context_weight=0.0,
                                        rerank=""),
                   recipe="dense"),
    "bm25": Config(recall=RecallConfig(fusion="rrf", lexical_weight=1.0, time_scope=False, context_weight=0.0,
                                        rerank=""),
                   recipe="bm25"),
    # The pack's confidence from the claim rules of recall.evidence, not the fitted answerability model (#31).
    "claim-rules": Config(recall=RecallConfig(answerable=False), recipe="claim-rules"),
    # The fitted answerability model's verdict alone (its certain / vague thresholds, chosen out of fold).
    "answerability": Config(recall=RecallConfig(rescue_at=None), recipe="answerability"),
    # Relevance first (#31): the retrievers' magnitudes fused, recency, salience and kind bounded to reorder near ties.
    "relevance": Config(recall=RecallConfig(fusion="scores", weight_relevance=0.85, weight_recency=0.05,
                                            weight_salience=0.05, weight_prior=0.05, weight_claim=0.1),
                        recipe="relevance"),
}

# Recipes written by the calibration notebook live here as JSON (flat params plus a "base").
RECIPE_DIR = Path(__file__).parent / "recipes"


RERANKER_DIR = RECIPE_DIR / "rerankers"


def reranker_path(name_or_path: str) -> Path:
    """Return the file of a reranker: a name in mnemo/recipes/rerankers/, or a JSON file's path; raise if none."""
    path = Path(name_or_path)
    if not path.suffix:
        path = RERANKER_DIR / f"{name_or_path}.json"
    if not path.is_file():
        shipped = sorted(p.stem for p in RERANKER_DIR.glob("*.json"))
        raise ConfigError(f"no reranker {name_or_path!r}: name one of {shipped} or a JSON file")
    return path


def recipe(name: str | None = None) -> Config:
    """Return the named recipe: built in, or a calibrated JSON file in mnemo/recipes/."""
    name = name or "default"
    if name in RECIPES:
        return RECIPES[name]
    path = RECIPE_DIR / f"{name}.json"
    if path.exists():
        data = json.loads(path.read_text())
        base = data.pop("base", "default")
        data.pop("provenance", None)
        cfg = Config.from_params(RECIPES[base], **data.pop("params", data))
        return replace(cfg, recipe=name)
    known = sorted(set(RECIPES) | {p.stem for p in RECIPE_DIR.glob("*.json")})
    raise ConfigError(f"unknown recipe '{name}'; known recipes: {', '.join(known)}")
