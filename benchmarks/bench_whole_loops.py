"""XLA's CPU backend compiling loops whole: every model's speed rows with the package's setting against XLA's default.

The package raises ``xla_cpu_small_while_loop_byte_threshold`` when it is imported (``interpretable_zoo.xla_flags``),
unless ``XLA_FLAGS`` pass backend options of their own; XLA reads them once, when JAX starts. Each setting
therefore runs in its own process (``benchmarks.thread_pool_worker``), with a compilation cache of its own so
that the first fits' compile times count; the two alternate, WHOLE_LOOPS_RUNS times each (default 2).
"""

from __future__ import annotations

import os

from benchmarks.bench_thread_pool import TASKS, alternating_records, paired_rows
from benchmarks.runner import Comparison, benchmark, import_peer
from benchmarks.thread_pool_worker import DEFAULT_FITS

XLA_DEFAULT = "--xla_backend_extra_options=xla_cpu_small_while_loop_byte_threshold=1024"
"""XLA_FLAGS that keep XLA's own threshold (1 kB), which the package then leaves alone."""

FIT_TASKS = {**TASKS, "fit_brl_mushroom": "BRL, fit_brl's tempered defaults on mushroom (min_support 0.3), 256 "
                                           "tuning and 1,024 sampling scans, seed 1"}


@benchmark(
    "xla_whole_loops",
    peers=("pysbrl",),
    description=(
        "The rows of `xla_thread_pool` (BRL as in `brl_mh_speed`, pysbrl timed in the same process; BRL's default fits "
        "of Titanic and tic-tac-toe until converged; BCM's sweeps; prototype selection, Bayesian Sets and MGM) and a "
        "tempered BRL fit of mushroom of fixed length, with the threshold below which XLA's CPU backend compiles a "
        "loop as one function raised by the package (`interpretable_zoo.xla_flags`) against XLA's default of 1 kB "
        f"(`XLA_FLAGS={XLA_DEFAULT}`), each setting in its own process with a compilation cache of its own, the two "
        "alternating (WHOLE_LOOPS_RUNS runs each, default 2; the table gives medians over the runs of each "
        "process's medians of 3 interleaved rounds, the notes every run's ratio, for BRL pysbrl / ours in the "
        "same processes, and for the fits the seconds their first call spent compiling)."
    ),
)
def whole_loops() -> list[Comparison]:
    import_peer("pysbrl", "see benchmarks/bench_brl.py")
    base = {name: value for name, value in os.environ.items() if name != "XLA_FLAGS"}
    records = alternating_records({"package": base, "xla": {**base, "XLA_FLAGS": XLA_DEFAULT}},
                                  int(os.environ.get("WHOLE_LOOPS_RUNS", 2)), fresh_cache=True)

    def compiling_and_draws(name):
        if name not in DEFAULT_FITS:
            return ""
        compiled = {key: ", ".join(f"{r['compile_seconds'][name]:.1f}" for r in records[key]) for key in records}
        digests = {key: {r["digests"][name] for r in records[key]} for key in records}
        return (f"; first call compiling {compiled['package']} s against {compiled['xla']} s; the same draws in "
                f"every run of a setting: {all(len(d) == 1 and None not in d for d in digests.values())}, in both "
                f"settings: {digests['package'] == digests['xla']}")

    return paired_rows(records, FIT_TASKS, ("package", "loops compiled whole", "whole loops"),
                       ("xla", "the same, XLA's default threshold", "XLA's default"), compiling_and_draws)
