"""Real MiniLM embeddings for the scale benchmarks, and an honest way to grow them to 1M vectors.

    python benchmarks/corpus.py            # embed once, build the 1M set, print its checks

Embedding 1M sentences with MiniLM at ~300/s would take about an hour, so:

1. Every unique held-in turn text of LoCoMo, REALTALK and BEAM (~15.7k, `$MNEMO_DATA_DIR`) and
   every unique question (~2.4k, the queries, never stored) is embedded once with the real
   MiniLM embedder (`mnemo.embed.MiniLMEmbedder`) and cached in benchmarks/cache/ (gitignored).
   BEAM messages are long chat turns (median ~1.5k characters, one of 348k); a memory is a
   sentence or two, so a BEAM turn contributes its opening, cut at the last sentence end
   within MAX_CHARS characters (LoCoMo and REALTALK turns are kept whole).
2. The first rows of every set are the real turn embeddings, shuffled: a 10k set is real only.
3. Each further row recombines two real turns, as a memory that mixes two things said:
   an anchor turn `a` chosen uniformly, and a partner `b` that is, with probability 1/2, a turn
   within 3 positions of `a` in the same conversation (a window of the dialogue), else one of
   `a`'s 10 nearest real turns by cosine (a paraphrase-like neighbour). The row is
   normalise(w * e_a + (1 - w) * e_b) with w ~ U(0.3, 0.7), and its text is "a b".
   `check()` embeds a sample of these texts for real and reports how close the recombined
   vector is to MiniLM's own embedding of the text, and how the nearest-neighbour cosines of
   real and recombined rows compare, so the clustering claim is measured, not assumed.
"""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

import numpy as np

# MNEMO_BENCH_CACHE moves the cache (a scratch copy for trying the scripts out).
CACHE = Path(os.environ.get("MNEMO_BENCH_CACHE", Path(__file__).parent / "cache"))
SEED = 20240611
MAX_CHARS = 300  # a BEAM turn is cut to its opening sentences within this many characters
WINDOW = 3  # a window partner is at most this many turns away
NEIGHBOURS = 10  # a neighbour partner is among the anchor's this many nearest real turns


def _opening(text: str) -> str:
    """Return the opening sentences of `text` within MAX_CHARS characters (a hard cut if none ends there)."""
    if len(text) <= MAX_CHARS:
        return text
    head = text[:MAX_CHARS]
    end = max(head.rfind(". "), head.rfind("? "), head.rfind("! "), head.rfind("\n"))
    return head[:end + 1].strip() if end > 40 else head.strip()


def _data_texts() -> tuple[list[str], list[str], list[int], list[int]]:
    """Return unique turn texts, unique question texts, and each turn's conversation and position."""
    from mnemo.eval.datasets import load_beam, load_locomo, load_realtalk

    texts: list[str] = []
    conv: list[int] = []
    pos: list[int] = []
    seen: set[str] = set()
    questions: list[str] = []
    conv_no = 0
    for loader in (load_locomo, load_realtalk, load_beam):
        ds = loader()
        for c in ds.conversations:
            for i, turn in enumerate(c.turns):
                text = _opening((turn.raw_text or turn.text).strip()) if ds.name == "beam" else (
                    turn.raw_text or turn.text).strip()
                if text and text not in seen:
                    seen.add(text)
                    texts.append(text)
                    conv.append(conv_no)
                    pos.append(i)
            conv_no += 1
        questions += [q.question.strip() for q in ds.questions]
    questions = [q for q in dict.fromkeys(questions) if q and q not in seen]
    return texts, questions, conv, pos


def real() -> dict[str, np.ndarray]:
    """Return the cached real embeddings (embedding them first if needed): texts, vecs, conv, pos, queries."""
    path, text_path = CACHE / "real_minilm.npz", CACHE / "real_texts.json"
    if path.exists() and text_path.exists():
        data = np.load(path, allow_pickle=False)
        return {**{k: data[k] for k in data.files}, **json.loads(text_path.read_text())}
    from mnemo.embed import MiniLMEmbedder

    texts, questions, conv, pos = _data_texts()
    emb = MiniLMEmbedder()
    t0 = time.perf_counter()
    vecs = emb.embed(texts)
    qvecs = emb.embed(questions)
    took = time.perf_counter() - t0
    CACHE.mkdir(parents=True, exist_ok=True)
    # Texts go to JSON: a fixed-width numpy string array is as wide as the longest text, for every row.
    arrays = {"vecs": vecs, "conv": np.array(conv, dtype=np.int32), "pos": np.array(pos, dtype=np.int32),
              "queries": qvecs, "embed_seconds": np.array(took)}
    np.savez(path, **arrays)
    text_path.write_text(json.dumps({"texts": texts, "query_texts": questions}))
    return {**arrays, "texts": texts, "query_texts": questions}


def _neighbours(vecs: np.ndarray, k: int) -> np.ndarray:
    """Return the k nearest other rows of each row by cosine (exact, in blocks)."""
    out = np.zeros((len(vecs), k), dtype=np.int32)
    for start in range(0, len(vecs), 2048):
        sims = vecs[start:start + 2048] @ vecs.T
        sims[np.arange(sims.shape[0]), np.arange(start, start + sims.shape[0])] = -2.0
        top = np.argpartition(-sims, k, axis=1)[:, :k]
        out[start:start + len(top)] = top
    return out


def _pairs(base: dict[str, np.ndarray], n: int, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Return (anchor, partner, weight) arrays for `n` recombined rows."""
    conv, pos = base["conv"], base["pos"]
    r = len(conv)
    anchors = rng.integers(0, r, n)
    # Rows sorted by (conversation, position) make "a turn within WINDOW positions" an index offset.
    order = np.lexsort((pos, conv))
    rank = np.empty(r, dtype=np.int64)
    rank[order] = np.arange(r)
    offset = rng.integers(1, WINDOW + 1, n) * rng.choice([-1, 1], n)
    cand = np.clip(rank[anchors] + offset, 0, r - 1)
    window = order[cand]
    same = conv[window] == conv[anchors]
    knn = _neighbours(base["vecs"], NEIGHBOURS)
    near = knn[anchors, rng.integers(0, NEIGHBOURS, n)]
    use_window = (rng.random(n) < 0.5) & same & (window != anchors)
    partners = np.where(use_window, window, near)
    weights = rng.uniform(0.3, 0.7, n).astype(np.float32)
    return anchors, partners, weights


def recipe(total: int = 1_000_000) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Return (perm, anchors, partners, weights): the order of the real rows and the recombined pairs (cached)."""
    base = real()
    path = CACHE / f"pairs_{total}.npz"
    if path.exists():
        data = np.load(path)
        return data["perm"], data["anchors"], data["partners"], data["weights"]
    rng = np.random.default_rng(SEED)
    perm = rng.permutation(len(base["vecs"]))
    anchors, partners, weights = _pairs(base, max(0, total - len(perm)), rng)
    np.savez(path, perm=perm, anchors=anchors, partners=partners, weights=weights)
    return perm, anchors, partners, weights


def vectors(n: int) -> tuple[np.ndarray, list[str]]:
    """Return `n` unit vectors (float32) and their texts: real turns first, then recombined pairs."""
    base = real()
    r = len(base["vecs"])
    path = CACHE / f"vectors_{max(n, 1_000_000)}.npy"
    perm, anchors, partners, weights = recipe(max(n, 1_000_000))
    extra = len(anchors)
    if path.exists():
        vecs = np.load(path, mmap_mode="r")
    else:
        vecs = np.empty((r + extra, base["vecs"].shape[1]), dtype=np.float32)
        vecs[:r] = base["vecs"][perm]
        for start in range(0, extra, 100_000):
            sl = slice(start, min(extra, start + 100_000))
            w = weights[sl, None]
            mix = w * base["vecs"][anchors[sl]] + (1 - w) * base["vecs"][partners[sl]]
            vecs[r + sl.start:r + sl.stop] = mix / np.linalg.norm(mix, axis=1, keepdims=True)
        np.save(path, vecs)
    texts = base["texts"]
    out_texts = [str(texts[i]) for i in perm[:n]]
    if n > r:
        out_texts += [f"{texts[a]} {texts[b]}" for a, b in zip(anchors[:n - r], partners[:n - r], strict=True)]
    return np.ascontiguousarray(vecs[:n]), out_texts


def queries() -> tuple[np.ndarray, list[str]]:
    """Return the real question embeddings and texts (never stored: they are the recall queries)."""
    base = real()
    return base["queries"], [str(t) for t in base["query_texts"]]


def check(sample: int = 400) -> dict[str, float]:
    """Return how the recombined rows compare with real MiniLM embeddings (see the module docstring)."""
    from mnemo.embed import MiniLMEmbedder

    base = real()
    r = len(base["vecs"])
    vecs, texts = vectors(1_000_000)
    rng = np.random.default_rng(1)
    rows = rng.choice(np.arange(r, len(vecs)), sample, replace=False)
    true = MiniLMEmbedder().embed([texts[i] for i in rows])
    fidelity = np.sum(true * vecs[rows], axis=1)
    # Nearest-neighbour cosine inside a 100k set: real rows against recombined rows.
    pool = np.asarray(vecs[:100_000])
    probe_real = rng.choice(r, sample, replace=False)
    probe_mix = rng.choice(np.arange(r, 100_000), sample, replace=False)

    def nn(idx: np.ndarray) -> np.ndarray:
        sims = pool[idx] @ pool.T
        sims[np.arange(len(idx)), idx] = -2
        return sims.max(axis=1)

    q = base["queries"]
    top1_real = (q[:sample] @ np.asarray(vecs[:r]).T).max(axis=1)
    top1_all = (q[:sample] @ pool.T).max(axis=1)
    return {
        "real_turns": r, "queries": len(q), "embed_seconds": float(base["embed_seconds"]),
        "cos_recombined_vs_true_embedding_mean": float(fidelity.mean()),
        "cos_recombined_vs_true_embedding_p10": float(np.percentile(fidelity, 10)),
        "nn_cos_real_rows_median_100k": float(np.median(nn(probe_real))),
        "nn_cos_recombined_rows_median_100k": float(np.median(nn(probe_mix))),
        "query_top1_cos_real_only_median": float(np.median(top1_real)),
        "query_top1_cos_100k_median": float(np.median(top1_all)),
        "sample": sample,
    }


if __name__ == "__main__":
    os.environ.setdefault("MNEMO_DATA_DIR", str(Path(__file__).resolve().parents[2] / "shared" / "data"))
    t0 = time.perf_counter()
    vectors(1_000_000)
    print(json.dumps({**check(), "build_seconds": time.perf_counter() - t0}, indent=2))
