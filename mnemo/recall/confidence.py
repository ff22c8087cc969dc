"""Confidence: how strongly the packed memories are evidenced, as the thresholds certain_at / vague_at read it.

Claims decide first (`recall.evidence`); these are the score bands behind them.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from ..config import RecallConfig
from ..model import Packed

# Evidence weights (see `evidence`): the calibration notebook fits certain_at / vague_at on top.
EVIDENCE_DENSE = 0.5
EVIDENCE_COVERAGE = 0.5


def evidence_of(entry: Mapping[str, Any]) -> float:
    """Return how strongly one candidate is supported, in [0, 1]: the value confidence thresholds.

    evidence = EVIDENCE_DENSE * clip(dense cosine, 0, 1) + EVIDENCE_COVERAGE * coverage,
    where coverage is `coverage(query, memory text)`. Both are absolute signals: fused
    relevance is rank-based and is 1 for the top hit of any query, even an unrelated
    one, so it cannot say whether the record holds the answer. A memory both
    retrievers agree on (similar meaning and the query's own words) scores high.
    """
    dense = min(1.0, max(0.0, float(entry.get("dense") or 0.0)))
    cover = min(1.0, max(0.0, float(entry.get("coverage") or 0.0)))
    return EVIDENCE_DENSE * dense + EVIDENCE_COVERAGE * cover


def confidence(packed: Sequence[Packed], fused: Mapping[str, dict], cfg: RecallConfig) -> str:
    """Return "certain", "vague" or "unknown" from the best evidence among the packed memories.

    Only retrieved memories count: a pinned memory that no retriever found does not
    make the pack relevant to the query.
    """
    top = max((evidence_of(fused[p.id]) for p in packed if p.id in fused), default=0.0)
    if top >= cfg.certain_at:
        return "certain"
    if top >= cfg.vague_at:
        return "vague"
    return "unknown"
