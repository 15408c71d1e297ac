"""One scaling measurement in a fresh process, so that its peak resident memory is its own; prints one JSON line.

``python -m benchmarks.scaling_worker prototypes N`` selects prototypes (greedy, from features) on N points:
USPS train replicated with small Gaussian noise (sd 0.01 per pixel, pixels in [-1, 1]), eps = the 5th
percentile of 200,000 random pair dissimilarities. ``python -m benchmarks.scaling_worker bayesian_sets B``
answers B random NELL queries (2-15 items) with their top 10 in one batched ``query``, or with
``--peer`` scores them with `bayessets` one at a time keeping the top 10 (``--one-core``: on one core). Peak memory is the process's
high-water mark of resident memory (VmHWM); ``rss_before`` is the resident memory just before the timed call.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import time
from pathlib import Path

NOISE = 0.01
QUANTILE = 0.05
SAMPLED_PAIRS = 200_000
TOP_K = 10
SPLIT_UP_TO = 20_000  # up to this many points, a second call times the cover and the greedy apart
SEED = 0


def _rss_bytes() -> int:
    fields = Path("/proc/self/statm").read_text().split()
    return int(fields[1]) * resource.getpagesize()


def _peak_bytes() -> int:
    """The process's peak resident memory: VmHWM of /proc/self/status, which starts afresh at exec (ru_maxrss
    keeps the forking parent's peak, so a worker started by a large benchmark process would report that)."""
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) * 1024
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024


def replicated_usps(n_points: int, seed: int = SEED):
    """The first n_points of USPS train repeated, each copy after the first with N(0, NOISE^2) added per pixel."""
    import numpy as np

    from interpretable_zoo.datasets import load_usps

    train = load_usps("train")
    copies = -(-n_points // len(train.X))
    rng = np.random.default_rng(seed)
    X = np.concatenate([train.X] + [train.X + rng.normal(0, NOISE, train.X.shape) for _ in range(copies - 1)])
    return X[:n_points], np.tile(train.y, copies)[:n_points]


def sampled_quantile(X, q: float, seed: int = SEED) -> float:
    """The q-quantile of SAMPLED_PAIRS random pair dissimilarities (i != j), Euclidean."""
    import numpy as np

    rng = np.random.default_rng(seed)
    i, j = rng.integers(0, len(X), (2, SAMPLED_PAIRS))
    i, j = i[i != j], j[i != j]
    distances = [np.linalg.norm(X[i[s : s + 10_000]] - X[j[s : s + 10_000]], axis=1) for s in range(0, len(i), 10_000)]
    return float(np.quantile(np.concatenate(distances), q))


def prototypes(n_points: int) -> dict:
    from interpretable_zoo.inference import set_cover
    from interpretable_zoo.inference.memory import InsufficientMemoryError
    from interpretable_zoo.inference.prototype_selection import select_prototypes

    X, y = replicated_usps(n_points)
    eps = sampled_quantile(X, QUANTILE)
    estimate = set_cover.estimate_cover(X, None, eps)
    record = {"n": n_points, "eps": eps, "estimated_pairs": estimate.pairs(), "estimated_bytes": estimate.bytes()}
    record["rss_before"] = _rss_bytes()
    start = time.perf_counter()
    try:
        result = select_prototypes(X, y, eps=eps)
    except InsufficientMemoryError as error:
        record.update(error=str(error), seconds=time.perf_counter() - start, peak=_peak_bytes())
        return record
    record.update(seconds=time.perf_counter() - start, peak=_peak_bytes())
    record.update(prototypes=len(result.prototypes), objective=result.objective)
    if n_points > SPLIT_UP_TO:
        return record
    cover_start = time.perf_counter()
    cover = set_cover.ball_cover(X, None, eps)
    greedy_start = time.perf_counter()
    set_cover.greedy(cover, y, 10, 1.0 / len(y))
    record.update(
        cover_seconds=greedy_start - cover_start, greedy_seconds=time.perf_counter() - greedy_start, pairs=cover.n_pairs
    )
    return record


def bayesian_sets(n_queries: int, peer: bool) -> dict:
    import numpy as np

    from benchmarks.bench_bayesian_sets import random_queries
    from interpretable_zoo.datasets import load_nell
    from interpretable_zoo.inference.bayesian_sets import BayesianSets

    dataset = load_nell()
    X = dataset.X.tocsr()
    queries = random_queries(X, n_queries, np.random.default_rng(SEED))
    if peer:
        from bayessets import BernoulliBayesianSet

        model = BernoulliBayesianSet(X)

        def answer():
            tops = []
            for query in queries:
                scores = model.query(query)
                scores[query] = -np.inf
                top = np.argpartition(-scores, TOP_K)[:TOP_K]  # the top k unordered, then only they are sorted
                tops.append(top[np.argsort(-scores[top], kind="stable")])
            return tops
    else:
        model = BayesianSets(X, item_names=dataset.sample_names)

        def answer():
            return model.query(queries, top_k=TOP_K)

    record = {"queries": n_queries, "peer": peer, "rss_before": _rss_bytes()}
    start = time.perf_counter()
    answer()
    record["first_seconds"] = time.perf_counter() - start
    start = time.perf_counter()
    answer()
    record.update(seconds=time.perf_counter() - start, peak=_peak_bytes())
    return record


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.scaling_worker")
    parser.add_argument("case", choices=("prototypes", "bayesian_sets"))
    parser.add_argument("size", type=int)
    parser.add_argument("--peer", action="store_true")
    parser.add_argument("--one-core", action="store_true", help="run on one of the process's cores")
    args = parser.parse_args()
    if args.one_core:
        os.sched_setaffinity(0, {min(os.sched_getaffinity(0))})
    record = prototypes(args.size) if args.case == "prototypes" else bayesian_sets(args.size, args.peer)
    print(json.dumps(record), flush=True)


if __name__ == "__main__":
    main()
