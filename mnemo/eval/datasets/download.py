"""Fetch the benchmark originals from upstream, at the commits pinned in the data README.

`plan(name)` is pure: it lists (url, path relative to the destination, sha256 or None) for every
file. `download(name, dest)` is the thin layer that fetches the plan with urllib, checks each
sha256 the READMEs give, and writes upstream's names and paths under `dest/<name>/` (a layout
the loaders read: `mnemo.eval.datasets`). Held-out files are not fetched unless asked for, where
upstream ships them as separate files (REALTALK chats, BEAM chats, PrefEval topics); where a
held-out part lives inside one file (LoCoMo, MQuAKE-hard, LongMemEval) the loaders leave it out.
"""

from __future__ import annotations

import hashlib
import os
import urllib.error
import urllib.request
from collections.abc import Callable
from pathlib import Path
from urllib.parse import urlsplit

from mnemo.errors import DatasetError
from mnemo.eval.datasets import checksums
from mnemo.eval.datasets.base import sha256_file
from mnemo.eval.datasets.episodes import PREFEVAL_HELDOUT, PREFEVAL_TOPICS

RAW_BASE = "https://raw.githubusercontent.com"
HF_BASE = "https://huggingface.co"

# dataset -> (GitHub repository, pinned commit), from the data README.
SOURCES = {
    "locomo": ("snap-research/LoCoMo", "3eb6f2c585f5e1699204e3c3bdf7adc5c28cb376"),
    "realtalk": ("danny911kr/REALTALK", "b903e06a9770bf4e5fe9018c3e132889666d3b4a"),
    "beam": ("mohammadtavakoli78/BEAM", "b2a3ee8ba12d68f83143dda191097dc3e028ddd3"),
    "mquake_hard": ("wangywUST/DeepEdit", "c90b29588dec8325a6481054e63bf10baf3cff57"),
    "meme": ("SeokwonJung-Jay/meme-eval", "66731b1ab2ae063dbd61d1bf93d966520bc2f2ea"),
    "prefeval": ("amazon-science/PrefEval", "50795054b5ff5f418d2b768a331d71e480f93331"),
}
# MQuAKE-hard's records are MQuAKE's (MIT); the licence comes from MQuAKE's own repository.
MQUAKE_LICENSE = ("princeton-nlp/MQuAKE", "fb43dadc2d8cd19d08ce81c63d957b59deb3f3cd", "LICENSE")
# HuggingFace publishes no commit in the README, so LongMemEval resolves `main`; its sha256 is unverified.
LONGMEMEVAL_REPO = "xiaowu0162/longmemeval-cleaned"
LONGMEMEVAL_FILES = {
    "longmemeval": ("longmemeval_s_cleaned.json", "longmemeval_oracle.json"),
    # About 500 sessions per question (gigabytes): only on request.
    "longmemeval_m": ("longmemeval_m_cleaned.json",),
}

# Held-out files upstream ships separately (README "Held-out items"); fetched only with include_heldout.
REALTALK_HELDOUT_FILES = ("Chat_9_Fahim_Akib.json", "Chat_10_Fahim_Muhhamed.json")
# Which BEAM chats use the truncated conversation upstream's runner reads (README), held-out ones included.
BEAM_HELDOUT_CHAT_FILES = {
    5: "chat_trunecated.json",
    10: "chat_trunecated.json",
    15: "chat.json",
    20: "chat_trunecated.json",
}
PREFEVAL_FOLDERS = (
    "explicit_preference",
    "implicit_preference/choice-based",
    "implicit_preference/persona-driven",
    "mcq_options",
)

Entry = tuple[str, str, str | None]


def raw_url(repo: str, commit: str, path: str) -> str:
    """Return the raw.githubusercontent.com URL of `path` in `repo` at `commit`."""
    return f"{RAW_BASE}/{repo}/{commit}/{path}"


def _github(name: str, paths: list[str]) -> list[Entry]:
    repo, commit = SOURCES[name]
    sums = checksums.UPSTREAM.get(name, {})
    return [(raw_url(repo, commit, p), f"{name}/{p}", sums.get(p)) for p in paths]


def plan(name: str, include_heldout: bool = False) -> list[Entry]:
    """Return the files to fetch for dataset `name`: (url, path relative to dest, sha256 or None).

    Names: locomo, realtalk, beam, mquake_hard, meme, prefeval, longmemeval (S + oracle) and
    longmemeval_m. The local path is "<name>/<upstream path>" (LongMemEval: "longmemeval/<file>").
    """
    if name == "locomo":
        return _github(name, ["data/locomo10.json", "LICENSE.txt"])
    if name == "realtalk":
        files = [p.split("/")[-1] for p in checksums.UPSTREAM["realtalk"]]
        files.sort(key=lambda f: int(f.split("_")[1]))
        if include_heldout:
            files += list(REALTALK_HELDOUT_FILES)
        return _github(name, [f"data/{f}" for f in files])
    if name == "beam":
        chat_files = {
            int(p.split("/")[2]): p.split("/")[3]
            for p in checksums.UPSTREAM["beam"]
            if not p.endswith("probing_questions.json")
        }
        if include_heldout:
            chat_files.update(BEAM_HELDOUT_CHAT_FILES)
        paths = []
        for n in sorted(chat_files):
            paths += [
                f"chats/100K/{n}/{chat_files[n]}",
                f"chats/100K/{n}/probing_questions/probing_questions.json",
            ]
        return _github(name, paths)
    if name == "mquake_hard":
        repo, commit, path = MQUAKE_LICENSE
        licence = (
            raw_url(repo, commit, path),
            f"{name}/LICENSE",
            checksums.UPSTREAM[name].get("LICENSE"),
        )
        return _github(name, ["datasets/MQuAKE-hard.json"]) + [licence]
    if name == "meme":
        return _github(name, ["src/data/sw033.json", "src/data/main_results.json"])
    if name == "prefeval":
        topics = [t for t in PREFEVAL_TOPICS if include_heldout or t not in PREFEVAL_HELDOUT]
        paths = [f"benchmark_dataset/{folder}/{t}.json" for folder in PREFEVAL_FOLDERS for t in topics]
        return _github(name, paths + ["benchmark_dataset/filtered_inter_turns.json", "LICENSE"])
    if name in LONGMEMEVAL_FILES:
        return [
            (f"{HF_BASE}/datasets/{LONGMEMEVAL_REPO}/resolve/main/{f}", f"longmemeval/{f}", None)
            for f in LONGMEMEVAL_FILES[name]
        ]
    known = ", ".join([*SOURCES, *LONGMEMEVAL_FILES])
    raise DatasetError(f"unknown dataset {name!r}; choose one of {known}")


def fetch(url: str, target: Path, sha256: str | None, timeout: float = 60.0) -> Path:
    """Download `url` to `target` through a temporary file, checking `sha256` when given; return `target`."""
    target.parent.mkdir(parents=True, exist_ok=True)
    part = target.with_name(target.name + ".part")
    digest = hashlib.sha256()
    try:
        with urllib.request.urlopen(url, timeout=timeout) as response, open(part, "wb") as out:
            for chunk in iter(lambda: response.read(1 << 20), b""):
                digest.update(chunk)
                out.write(chunk)
    except (urllib.error.URLError, OSError) as exc:
        part.unlink(missing_ok=True)
        raise DatasetError(f"could not fetch {url}: {exc}; check the network or pass a mirror") from exc
    if sha256 is not None and digest.hexdigest() != sha256:
        part.unlink(missing_ok=True)
        raise DatasetError(
            f"{url} has sha256 {digest.hexdigest()}, expected {sha256}; upstream changed or the download is corrupt"
        )
    os.replace(part, target)
    return target


def download(
    name: str,
    dest: Path,
    *,
    include_heldout: bool = False,
    mirror: str | None = None,
    timeout: float = 60.0,
    progress: Callable[[str, Path], None] | None = None,
) -> list[Path]:
    """Fetch dataset `name` into `dest/<name>/` with upstream's names; return the files, in plan order.

    A file already present with the expected sha256 is kept, so an interrupted download resumes.
    `mirror` replaces the scheme and host of every URL (a local copy, or a test server) and keeps
    the path. `progress(url, target)` is called before each fetch. Raises DatasetError when a file
    cannot be fetched or fails its checksum (nothing partial is left under its name).
    """
    dest = Path(dest)
    out = []
    for url, rel, sha256 in plan(name, include_heldout):
        target = dest / rel
        if target.is_file() and sha256 is not None and sha256_file(target) == sha256:
            out.append(target)
            continue
        if mirror is not None:
            url = mirror.rstrip("/") + urlsplit(url).path
        if progress is not None:
            progress(url, target)
        out.append(fetch(url, target, sha256, timeout))
    return out
