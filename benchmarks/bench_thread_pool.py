"""XLA's CPU thread pool: every model's speed rows with a pool of one thread against the default pool.

XLA sizes the pool of its CPU client once, when JAX starts: PJRT_NPROC threads, else one per core the process
may run on. Each configuration therefore runs in its own process (``benchmarks.thread_pool_worker``); the
two alternate, THREAD_POOL_RUNS times each (default 2), so that both see the same drift of the machine.
"""

from __future__ import annotations

import os
import statistics
import tempfile

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
    base = {name: value for name, value in os.environ.items() if name not in ("PJRT_NPROC", "NPROC")}
    records = alternating_records({"default": base, "one": {**base, "PJRT_NPROC": "1"}},
                                  int(os.environ.get("THREAD_POOL_RUNS", 2)))
    threads = next((record["pool_threads"] for record in records["default"] if "pool_threads" in record), None)

    def same_draws(name):
        if not name.startswith("fit_brl_"):
            return ""
        digests = {record["digests"][name] for runs_of in records.values() for record in runs_of}
        return f"; converged, the same draws in every run: {len(digests) == 1 and None not in digests}"

    default = f"default pool of {threads} threads" if threads else "default pool"
    return paired_rows(records, TASKS, ("one", "pool of 1 thread", "1 thread"),
                       ("default", f"the same, {default}", f"{threads} threads"), same_draws)


def alternating_records(environments: dict[str, dict[str, str]], runs: int, fresh_cache: bool = False) -> dict:
    """The worker's (``benchmarks.thread_pool_worker``) record in each environment (name -> its variables),
    the environments taking turns, ``runs`` times each; with ``fresh_cache``, each run with a compilation
    cache of its own."""
    records = {key: [] for key in environments}
    for _ in range(runs):
        for key, env in environments.items():
            with tempfile.TemporaryDirectory() as cache:
                env = {**env, "INTERPRETABLE_ZOO_CACHE_DIR": cache} if fresh_cache else env
                records[key].append(run_worker(module="benchmarks.thread_pool_worker", env=env))
    return records


def paired_rows(records: dict, tasks: dict, ours: tuple[str, str, str], other: tuple[str, str, str],
                notes_of=lambda name: "") -> list[Comparison]:
    """A row per task of ``tasks`` (timer name -> task) of :func:`alternating_records`: the medians of the
    records under ``ours`` against ``other`` (each: the environment's name, the row's wording, the label of
    pysbrl's ratio), every pair's ratio, pysbrl / ours in the same processes for BRL's timers, and
    ``notes_of(name)``; rows that say so when a worker failed."""
    (key, setting, label), (other_key, other_setting, other_label) = ours, other
    failed = [record["error"] for runs_of in records.values() for record in runs_of if "error" in record]
    if failed:
        return [Comparison(f"{task}, {setting}", float("nan"), other_setting, None, f"a worker failed: {failed[0]}")
                for task in tasks.values()]
    rows = []
    for name, task in tasks.items():
        ratios = ", ".join(f"{o[name] / r[name]:.2f}x" for o, r in zip(records[other_key], records[key]))
        notes = f"per pair of runs {ratios}"
        if name in BRL_TIMERS:
            against = [f"{statistics.median(r['pysbrl'] / r[name] for r in records[k]):.2f}x ({text})"
                       for k, text in ((key, label), (other_key, other_label))]
            notes += f"; pysbrl / ours in the same process: {', '.join(against)}"
        rows.append(Comparison(f"{task}, {setting}", statistics.median(r[name] for r in records[key]), other_setting,
                               statistics.median(r[name] for r in records[other_key]), notes + notes_of(name)))
    return rows
