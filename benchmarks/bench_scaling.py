"""Scaling curves: prototype selection against the number of points, Bayesian Sets against the number of queries,
the BRL and BCM kernels' throughput against the number of chains.

Each size runs in a fresh process (``benchmarks.scaling_worker``) so that its peak resident memory
(``ru_maxrss``) is its own. Sizes can be narrowed with SCALING_SIZES (comma-separated point counts) and
SCALING_QUERIES (query counts) and SCALING_CHAINS (chain counts), the BRL iterations timed per chain count
with SCALING_CHAIN_ITERATIONS (iterations x chains, at least 2,000 iterations; default 100,000); a size whose worker fails
or exceeds SCALING_TIMEOUT seconds gives a row saying so.
Writes a PNG per benchmark next to RESULTS.md (named with the suffix ``_gpu`` for a run on a GPU).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np

from benchmarks.bench_prototype_selection import numpy_greedy
from benchmarks.runner import (SPEED_ROUNDS, Comparison, PeerUnavailable, backend_suffix, benchmark, import_peer,
                               format_seconds, median_of, ratio_range, time_call)
from interpretable_zoo.inference.memory import format_bytes

SIZES = (5_000, 10_000, 20_000, 60_000, 100_000, 200_000)
QUERY_COUNTS = (10, 100, 1_000)
CHAIN_COUNTS = (1, 2, 4, 8, 16, 32, 64)
FOLDER = Path(__file__).parent


def _sizes(variable: str, default: tuple[int, ...]) -> list[int]:
    text = os.environ.get(variable)
    return [int(part) for part in text.split(",")] if text else list(default)


def run_worker(*args: str, module: str = "benchmarks.scaling_worker", env: dict[str, str] | None = None) -> dict:
    """The JSON record of worker ``module`` (run with ``args``, in environment ``env``, default this process's),
    or {"error": why} when it failed or ran out of time."""
    timeout = float(os.environ.get("SCALING_TIMEOUT", 1800))
    try:
        completed = subprocess.run(
            [sys.executable, "-m", module, *args], capture_output=True, text=True, timeout=timeout, env=env
        )
    except subprocess.TimeoutExpired:
        return {"error": f"did not finish within {timeout:.0f} s"}
    if completed.returncode != 0:
        tail = (completed.stderr or completed.stdout).strip().splitlines()[-1:] or ["no output"]
        return {"error": f"exited with {completed.returncode}: {tail[0]}"}
    return json.loads(completed.stdout.strip().splitlines()[-1])


def _plot(path: Path, x, series: dict[str, tuple[list, list]], xlabel: str) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    figure, axes = plt.subplots(1, len(series), figsize=(5 * len(series), 4))
    for axis, (title, (ys, labels)) in zip(np.atleast_1d(axes), series.items()):
        for y, label in zip(ys, labels):
            points = [(a, b) for a, b in zip(x, y) if b is not None]
            if points:
                axis.plot(*zip(*points), marker="o", label=label)
        axis.set_xscale("log")
        axis.set_yscale("log")
        axis.set_xlabel(xlabel)
        axis.set_title(title)
        axis.grid(True, which="both", alpha=0.3)
        axis.legend()
    figure.tight_layout()
    figure.savefig(path, dpi=100)
    plt.close(figure)


@benchmark(
    "scaling_prototype_selection",
    description=(
        "Prototype selection (greedy, from features, Euclidean) on N points: USPS train replicated with small "
        "Gaussian noise (sd 0.01 per pixel), eps = the 5th percentile of 200,000 sampled pair dissimilarities; each N "
        "in a fresh process, time of `select_prototypes` (size estimate, sparse eps-ball cover, greedy, objective) and "
        "peak RSS of the process (VmHWM: ru_maxrss would carry over the benchmark process's own peak into the worker it forks; the resident memory before the call, imports and data, in its own "
        "column). Goals: 60,000 points <= 60 s and peak <= 2 GB; 200,000 points on this machine (24 GB). First row: "
        "full USPS (7,291 points, eps = the exact 5th percentile) against a straightforward NumPy greedy with "
        "incremental gain updates (`bench_prototype_selection.numpy_greedy`), goal < 0.5 s and >= 10x. The machine "
        "was shared with other jobs (see the load average): absolute times are inflated. Plot: "
        "scaling_prototype_selection.png (_gpu for a GPU run)."
    ),
)
def scaling_prototype_selection() -> list[Comparison]:
    from interpretable_zoo.datasets import load_usps
    from interpretable_zoo.inference.prototype_selection import select_prototypes
    from interpretable_zoo.inference.set_cover import dissimilarity_quantile

    try:
        train = load_usps("train")
    except (ValueError, FileNotFoundError) as error:
        raise PeerUnavailable(f"USPS data not available: {error}") from error
    X, y = train.X, train.y
    eps = dissimilarity_quantile(X, 0.05, "l2")
    ours = select_prototypes(X, y, eps=eps)
    same = [(int(c), int(k)) for c, k in zip(ours.prototypes, ours.prototype_codes)] == numpy_greedy(X, y, eps, 1 / len(y))
    ours_seconds = time_call(lambda: select_prototypes(X, y, eps=eps), repeat=5)
    peer_seconds = time_call(lambda: numpy_greedy(X, y, eps, 1 / len(y)), repeat=3)
    rows = [
        Comparison(
            "full USPS (7,291), eps = 5th percentile",
            ours_seconds,
            "NumPy greedy (scipy cdist, incremental gains)",
            peer_seconds,
            f"{len(ours.prototypes)} prototypes; same picks in the same order: {same}",
        )
    ]
    sizes, times, peaks = _sizes("SCALING_SIZES", SIZES), [], []
    for n in sizes:
        record = run_worker("prototypes", str(n))
        times.append(record.get("seconds") if "prototypes" in record else None)
        peaks.append(record["peak"] / 2**30 if "prototypes" in record else None)
        if "prototypes" not in record:
            rows.append(Comparison(f"N = {n:,}", float("nan"), "-", None, record.get("error", "no record")))
            continue
        split = (
            f"; cover {record['cover_seconds']:.1f} s + greedy {record['greedy_seconds']:.1f} s in a second call"
            if "cover_seconds" in record
            else ""
        )
        rows.append(
            Comparison(
                f"N = {n:,}",
                record["seconds"],
                "-",
                None,
                f"{record['prototypes']} prototypes, eps {record['eps']:.4f}, {record['pairs'] if 'pairs' in record else record['estimated_pairs']:,.0f} "
                f"(point, ball) pairs{' (estimated)' if 'pairs' not in record else ''}; size estimate before building "
                f"{format_bytes(record['estimated_bytes'])}{split}",
                columns=(("peak RSS", format_bytes(record["peak"])), ("RSS before", format_bytes(record["rss_before"]))),
            )
        )
    _plot(
        FOLDER / f"scaling_prototype_selection{backend_suffix()}.png",
        sizes,
        {"time (s)": ([times], ["select_prototypes"]), "peak RSS (GiB)": ([peaks], ["fresh process"])},
        "points N",
    )
    return rows


@benchmark(
    "scaling_bayesian_sets",
    peers=("bayessets",),
    description=(
        "Bayesian Sets on NELL (228,161 x 5,548 sparse, repeated phrases merged): B random queries (2-15 items), top 10 "
        "per query. Ours: one batched `query(queries, top_k=10)` (the pruned walk of `inference.bayesian_sets_top_k` over the queries "
        "in pieces on every core, BATCH_BYTES = 64 MiB of working memory, with reasons), and the same on one core; "
        "peer: `bayessets` scoring the queries one at a time (single-threaded SciPy), each top 10 picked by "
        "`numpy.argpartition` and only those sorted. Each in a fresh process; "
        "time of the second of two calls (the first in notes), peak RSS (VmHWM) with the RSS before the calls "
        "(imports, data, model), the largest over the rounds. Every count runs in 3 interleaved rounds of one "
        "process of ours, one of ours on one core and one of the peer's; the table gives medians and the notes the "
        "lowest and highest ratio of a round. Goal at 1,000 queries: >= 10x and memory <= 300 MB. "
        "Plot: scaling_bayesian_sets.png (_gpu for a GPU run)."
    ),
)
def scaling_bayesian_sets() -> list[Comparison]:
    import_peer("bayessets", "pip install bayessets")
    counts, ours_times, peer_times, ours_peaks, peer_peaks, rows = _sizes("SCALING_QUERIES", QUERY_COUNTS), [], [], [], [], []
    for count in counts:
        # rounds of one worker each, ours, the peer's, ours on one core: fresh processes vary by tens of percent
        records = [(run_worker("bayesian_sets", str(count)), run_worker("bayesian_sets", str(count), "--peer"),
                    run_worker("bayesian_sets", str(count), "--one-core")) for _ in range(SPEED_ROUNDS)]
        failed = [record["error"] for workers in records for record in workers if "error" in record]
        if failed:
            rows.append(Comparison(f"{count} queries", float("nan"), "bayessets", None, failed[0]))
            ours_times.append(None), peer_times.append(None), ours_peaks.append(None), peer_peaks.append(None)
            continue
        rounds = [{"ours": ours["seconds"], "peer": peer["seconds"], "one core": one_core["seconds"]}
                  for ours, peer, one_core in records]
        ours = max((workers[0] for workers in records), key=lambda record: record["peak"] - record["rss_before"])
        peer = max((workers[1] for workers in records), key=lambda record: record["peak"] - record["rss_before"])
        ours_times.append(median_of(rounds, "ours"))
        peer_times.append(median_of(rounds, "peer"))
        ours_peaks.append((ours["peak"] - ours["rss_before"]) / 2**20)
        peer_peaks.append((peer["peak"] - peer["rss_before"]) / 2**20)
        first = ", ".join(f"{o['first_seconds']:.3f}/{p['first_seconds']:.3f} s" for o, p, _ in records)
        rows.append(
            Comparison(
                f"{count} queries, top 10 with reasons",
                median_of(rounds, "ours"),
                "bayessets 0.2.1, one at a time + argpartition",
                median_of(rounds, "peer"),
                f"{ratio_range(rounds, 'ours', 'peer')}; first calls (ours/peer): {first}",
                columns=(
                    ("peak RSS (ours)", format_bytes(ours["peak"])),
                    ("above RSS before (ours)", format_bytes(ours["peak"] - ours["rss_before"])),
                    ("peak RSS (peer)", format_bytes(peer["peak"])),
                    ("ours on one core", format_seconds(median_of(rounds, "one core"))),
                    ("peer / ours on one core", f"{median_of(rounds, 'peer') / median_of(rounds, 'one core'):.2f}x "
                     f"({ratio_range(rounds, 'one core', 'peer')})"),
                ),
            )
        )
    _plot(
        FOLDER / f"scaling_bayesian_sets{backend_suffix()}.png",
        counts,
        {
            "time (s)": ([ours_times, peer_times], ["ours, batched", "bayessets"]),
            "memory above the loaded model (MiB)": ([ours_peaks, peer_peaks], ["ours, batched", "bayessets"]),
        },
        "queries",
    )
    return rows


@benchmark("scaling_chains", description=(
    "Iterations (BRL, tic-tac-toe, `bench_brl.ours_timer`) and sweeps (BCM, USPS 100 x 256, S = 10, `bench_bcm.sweeps_per_second`) "
    "per second over all vectorized chains, on one device, compilation excluded; x 1 chain: over the 1-chain rate; "
    "time column: seconds per BRL iteration per chain. Plot: scaling_chains.png (scaling_chains_gpu.png for a GPU "
    "run)."))  # fmt: skip
def scaling_chains() -> list[Comparison]:
    from benchmarks.bench_bcm import sweeps_per_second
    from benchmarks.bench_brl import ours_timer, tictactoe_antecedents
    from interpretable_zoo.datasets.smiley_faces import load_usps_bcm
    from interpretable_zoo.inference.rule_mining import truth_table

    data, items, antecedents = tictactoe_antecedents()
    codes = load_usps_bcm(10, seed=0).X
    table = truth_table(items, antecedents)
    counts = _sizes("SCALING_CHAINS", CHAIN_COUNTS)
    chain_iterations = int(os.environ.get("SCALING_CHAIN_ITERATIONS", 100_000))
    brl_rates, bcm_rates, rows = [], [], []
    for count in counts:
        timer = ours_timer(table, data.y, antecedents, count, max(2_000, chain_iterations // count))
        seconds = min(timer() for _ in range(3))
        brl_rates.append(1 / seconds)
        bcm_rates.append(count * sweeps_per_second(codes, count, sweeps=20))
        rows.append(
            Comparison(
                f"{count} chain{'s' if count > 1 else ''}",
                seconds,
                "-",
                None,
                columns=(
                    ("BRL iterations/s, all chains", f"{brl_rates[-1]:,.0f}"),
                    ("BRL x 1 chain", f"{brl_rates[-1] / brl_rates[0]:.1f}"),
                    ("BCM sweeps/s, all chains", f"{bcm_rates[-1]:,.1f}"),
                    ("BCM x 1 chain", f"{bcm_rates[-1] / bcm_rates[0]:.1f}"),
                ),
            )
        )
    _plot(
        FOLDER / f"scaling_chains{backend_suffix()}.png",
        counts,
        {
            "BRL (tic-tac-toe): iterations / s": ([brl_rates], ["all chains"]),
            "BCM (USPS 100 x 256): sweeps / s": ([bcm_rates], ["all chains"]),
        },
        "vectorized chains",
    )
    return rows
