"""The BRL and BCM speed rows timed in a fresh process, whose XLA thread pool the caller sized with PJRT_NPROC.

``python -m benchmarks.thread_pool_worker`` prints one JSON line: the median seconds over 3 interleaved
rounds of BRL's compiled step (10 chains), fit_brl's kernel in the engine's scans, fit_brl itself (as in
``brl_mh_speed``, per iteration and chain) and pysbrl beside them, and of 100 BCM sweeps (one chain without
the split-merge move; 4 chains with it, as in ``bcm_tokens_per_second``). XLA sizes its CPU client's pool
when JAX starts, from PJRT_NPROC (else the cores it may run on), so each pool size needs its own process.
"""

from __future__ import annotations

import json
import os

from benchmarks.bench_bcm import sweep_timer
from benchmarks.bench_brl import FitTimer, PysbrlTimer, engine_timer, ours_timer, tictactoe_antecedents
from benchmarks.runner import SPEED_ROUNDS, interleaved_rounds, median_of
from interpretable_zoo.datasets import load_usps_bcm
from interpretable_zoo.inference.rule_mining import truth_table

BRL_TIMERS = ("brl_step", "brl_engine", "fit_brl")
"""The timers that pysbrl's, timed in the same process, is compared with."""


def main() -> None:
    data, items, antecedents = tictactoe_antecedents()
    table = truth_table(items, antecedents)
    codes = load_usps_bcm(70).X
    timers = {
        "brl_step": ours_timer(table, data.y, antecedents, 10, 50000),
        "brl_engine": engine_timer(table, data.y, antecedents),
        "fit_brl": FitTimer(items, data.y, antecedents, draws=100_000),
        "pysbrl": PysbrlTimer(table, data.y),
        "bcm_sweeps_1_chain": sweep_timer(codes, 1, split_merge=False),
        "bcm_sweeps_4_chains": sweep_timer(codes, 4),
    }
    rounds = interleaved_rounds(timers, SPEED_ROUNDS)
    pool_threads = int(os.environ.get("PJRT_NPROC") or len(os.sched_getaffinity(0)))
    print(json.dumps({"pool_threads": pool_threads, **{name: median_of(rounds, name) for name in timers}}))


if __name__ == "__main__":
    main()
