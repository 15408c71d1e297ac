"""XLA's CPU thread pool: every model's speed rows with a pool of one thread against the default pool.

XLA sizes the pool of its CPU client once, when JAX starts: PJRT_NPROC threads, else one per core the process
may run on. Each configuration therefore runs in its own process (``benchmarks.thread_pool_worker``); the
two alternate, THREAD_POOL_RUNS times each (default 2), so that both see the same drift of the machine.
"""

from __future__ import annotations

import os
import statistics

from benchmarks.bench_scaling import run_worker
from benchmarks.runner import Comparison, benchmark, import_peer
from benchmarks.thread_pool_worker import BRL_TIMERS

TASKS = {
    "brl_step": "BRL, s / iteration / chain, 10 chains, the compiled step",
    "brl_engine": "BRL, s / iteration / chain, 10 chains, fit_brl's kernel in the engine's compiled scans",
    "fit_brl": "BRL, s / iteration / chain, 10 chains through fit_brl, 1 MH step per draw, untempered",
    "fit_brl_titanic": "BRL, fit_brl's defaults until converged, Titanic (Letham's training split), seed 1",
    "fit_brl_tictactoe": "BRL, fit_brl's defaults until converged, tic-tac-toe, seed 1",
    "bcm_sweeps_1_chain": "BCM, 100 sweeps, 1 chain, no split-merge",
    "bcm_sweeps_4_chains": "BCM, 100 sweeps, 4 vectorized chains, split-merge every fourth sweep",
    "prototype_selection": "prototype selection, USPS 7,291 x 256, greedy at eps = the 5th percentile",
    "bayesian_sets": "Bayesian Sets, NELL, 1,000 queries, batched log scores",
    "mgm": "MGM, USPS 7,291 x 256 binarised, K = 13, one restart",
}


@benchmark(
    "xla_thread_pool",
    peers=("pysbrl",),
    description=(
        "The rows of `brl_mh_speed` (tic-tac-toe, 1,328 antecedents; pysbrl timed in the same process), "
        "whole default fits of `convergence_brl` (seed 1, until converged; the time of a converged answer), "
        "`bcm_tokens_per_second` (USPS 700 x 256, S = 10), `prototype_selection_usps`, `bayesian_sets_nell` and "
        "`mgm_usps` (one restart) with XLA's CPU pool of one thread (PJRT_NPROC=1) "
        "against the default pool (one thread per core), each configuration in its own process, the two "
        "alternating (THREAD_POOL_RUNS runs each, default 2; the table gives medians over the runs of each "
        "process's medians of 3 interleaved rounds, the notes every run's ratio and, for BRL, pysbrl / ours "
        "in the same processes). No goal: it tells whether the scaling guide's advice holds where it is run. "
        "The same seed gives the same draws with either pool."
    ),
)
def thread_pool() -> list[Comparison]:
    import_peer("pysbrl", "see benchmarks/bench_brl.py")
    runs = int(os.environ.get("THREAD_POOL_RUNS", 2))
    base = {name: value for name, value in os.environ.items() if name not in ("PJRT_NPROC", "NPROC")}
    records = {"default": [], "one": []}
    for _ in range(runs):
        records["default"].append(run_worker(module="benchmarks.thread_pool_worker", env=base))
        records["one"].append(run_worker(module="benchmarks.thread_pool_worker", env={**base, "PJRT_NPROC": "1"}))
    failed = [record["error"] for runs_of in records.values() for record in runs_of if "error" in record]
    if failed:
        return [Comparison(f"{task}, pool of 1 thread", float("nan"), "the same, default pool", None,
                           f"a worker failed: {failed[0]}") for task in TASKS.values()]
    default_threads = records["default"][0]["pool_threads"]
    rows = []
    for name, task in TASKS.items():
        one = statistics.median(record[name] for record in records["one"])
        default = statistics.median(record[name] for record in records["default"])
        ratios = ", ".join(f"{d[name] / o[name]:.2f}x" for d, o in zip(records["default"], records["one"]))
        notes = f"per pair of runs {ratios}"
        if name in BRL_TIMERS:
            against = [
                f"{statistics.median(r['pysbrl'] / r[name] for r in records[key]):.2f}x ({label})"
                for key, label in (("one", "1 thread"), ("default", f"{default_threads} threads"))
            ]
            notes += f"; pysbrl / ours in the same process: {', '.join(against)}"
        if name.startswith("fit_brl_"):
            digests = {record["digests"][name] for runs_of in records.values() for record in runs_of}
            notes += f"; converged, the same draws in every run: {len(digests) == 1 and None not in digests}"
        rows.append(Comparison(f"{task}, pool of 1 thread", one,
                               f"the same, default pool of {default_threads} threads", default, notes))
    return rows
