"""External long-term-memory benchmarks as plain dataclasses: one import for every loader.

    from mnemo.eval.datasets import load_locomo, load_beam
    ds = load_locomo()                 # reads $MNEMO_DATA_DIR/locomo
    ds.conversations, ds.questions     # Conversation / Question records
    ds.dropped, ds.checksums           # what was left out and why; sha256 of every file read

The data is never shipped with mnemo (the licences forbid it): set MNEMO_DATA_DIR to a folder in
the shared layout, or fetch the originals with `mnemo data download NAME`. Held-out items named in
the data READMEs are left out unless a loader is called with include_heldout=True.
The implementation is split by family: `datasets.base` (records, paths, checksums),
`datasets.dialog` (LoCoMo, REALTALK, LongMemEval), `datasets.updates` (BEAM, MQuAKE-hard) and
`datasets.episodes` (MEME, PrefEval).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from mnemo.errors import DatasetError
from mnemo.eval.datasets.base import (
    DATASETS,
    PROBES,
    Conversation,
    Dataset,
    DialogTurn,
    Question,
    Session,
    parse_when,
    sha256_file,
    verify_checksums,
)
from mnemo.eval.datasets.dialog import (
    LOCOMO_CATEGORIES,
    LOCOMO_HELDOUT,
    LONGMEMEVAL_TYPES,
    REALTALK_CATEGORIES,
    REALTALK_HELDOUT_CHATS,
    Corpus,
    clean_evidence,
    load_locomo,
    load_longmemeval,
    load_realtalk,
    longmemeval_corpus,
    longmemeval_heldout,
    longmemeval_skip_reason,
)
from mnemo.eval.datasets.episodes import (
    MEME_PROBES_AFTER,
    PREFEVAL_FORMS,
    PREFEVAL_HELDOUT,
    PREFEVAL_TOPICS,
    load_meme,
    load_prefeval,
    prefeval_distractors,
)
from mnemo.eval.datasets.updates import (
    BEAM_ABILITIES,
    BEAM_PROBES,
    MQUAKE_HELDOUT,
    load_beam,
    load_mquake_hard,
)
from mnemo.provenance import DATA_ENV, data_dir

LOADERS: dict[str, Callable[..., Dataset]] = {
    "locomo": load_locomo,
    "realtalk": load_realtalk,
    "beam": load_beam,
    "mquake_hard": load_mquake_hard,
    "meme": load_meme,
    "prefeval": load_prefeval,
    "longmemeval": load_longmemeval,
}


def load(name: str, **kwargs: Any) -> Dataset:
    """Return dataset `name` (one of DATASETS) loaded with its loader's keyword arguments."""
    if name not in LOADERS:
        raise DatasetError(f"unknown dataset {name!r}; choose one of {', '.join(LOADERS)}")
    return LOADERS[name](**kwargs)


__all__ = [
    "BEAM_ABILITIES",
    "BEAM_PROBES",
    "DATASETS",
    "DATA_ENV",
    "LOADERS",
    "LOCOMO_CATEGORIES",
    "LOCOMO_HELDOUT",
    "LONGMEMEVAL_TYPES",
    "MEME_PROBES_AFTER",
    "MQUAKE_HELDOUT",
    "PREFEVAL_FORMS",
    "PREFEVAL_HELDOUT",
    "PREFEVAL_TOPICS",
    "PROBES",
    "REALTALK_CATEGORIES",
    "REALTALK_HELDOUT_CHATS",
    "Conversation",
    "Corpus",
    "Dataset",
    "DatasetError",
    "DialogTurn",
    "Question",
    "Session",
    "clean_evidence",
    "data_dir",
    "load",
    "load_beam",
    "load_locomo",
    "load_longmemeval",
    "load_meme",
    "load_mquake_hard",
    "load_prefeval",
    "load_realtalk",
    "longmemeval_corpus",
    "longmemeval_heldout",
    "longmemeval_skip_reason",
    "parse_when",
    "prefeval_distractors",
    "sha256_file",
    "verify_checksums",
]
