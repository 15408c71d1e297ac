"""The speed rows of every model timed in a fresh process, whose XLA settings the caller chose: the size of the
CPU pool (PJRT_NPROC) or XLA's options (XLA_FLAGS), which XLA reads when JAX starts.

``python -m benchmarks.thread_pool_worker`` prints one JSON line: the median seconds over 3 interleaved
rounds of BRL's compiled step (10 chains), fit_brl's kernel in the engine's scans, fit_brl itself (as in
``brl_mh_speed``, per iteration and chain) and pysbrl beside them; of fit_brl at its defaults on Titanic
and tic-tac-toe (until converged, seed 1, as in ``convergence_brl``) and of a tempered fit of mushroom of
fixed length (its defaults, 256 tuning and 1,024 sampling scans), with the seconds that each fit's first
call spent compiling and a digest of its draws; of 100 BCM sweeps (one chain without
the split-merge move; 4 chains with it, as in ``bcm_tokens_per_second``); and of the models whose work is
large array operations rather than loops of small ones: prototype selection's greedy on USPS (as in
``prototype_selection_usps``), 1,000 Bayesian Sets queries on NELL (``bayesian_sets_nell``) and one MGM
fit of USPS (``mgm_usps``, one restart). XLA sizes its CPU client's pool when JAX starts, from PJRT_NPROC
(else the cores it may run on), and reads XLA_FLAGS then, so each setting needs its own process.
"""

from __future__ import annotations

import hashlib
import json
import os
import time

import numpy as np

from benchmarks.bench_bayesian_sets import BATCH_SIZE, SEED, random_queries
from benchmarks.bench_bcm import sweep_timer
from benchmarks.bench_brl import FitTimer, PysbrlTimer, engine_timer, ours_timer, tictactoe_antecedents
from benchmarks.bench_mgm import PAPER_CLUSTERS, binarised_usps
from benchmarks.runner import SPEED_ROUNDS, interleaved_rounds, median_of
from interpretable_zoo.datasets import load_mushroom, load_nell, load_tictactoe, load_titanic, load_usps, load_usps_bcm
from interpretable_zoo.inference.bayesian_sets import BayesianSets
from interpretable_zoo.inference.brl import BayesianRuleListClassifier
from interpretable_zoo.inference.mgm import fit_mgm
from interpretable_zoo.inference.prototype_selection import select_prototypes
from interpretable_zoo.inference.rule_mining import truth_table
from interpretable_zoo.inference.set_cover import dissimilarity_quantile
from interpretable_zoo.machine import usable_cores

BRL_TIMERS = ("brl_step", "brl_engine", "fit_brl")
"""The timers that pysbrl's, timed in the same process, is compared with."""


def call_timer(function):
    """(a timer of ``function()`` in seconds, the result of a first call, which compiles or loads from the cache)."""
    first = function()

    def seconds():
        start = time.perf_counter()
        function()
        return time.perf_counter() - start

    return seconds, first


DEFAULT_FITS = {"fit_brl_titanic": (load_titanic, ("train",), {}),
                "fit_brl_tictactoe": (load_tictactoe, (), {"negations": False, "max_cardinality": 3}),
                "fit_brl_mushroom": (load_mushroom, (), {"min_support": 0.3, "num_warmup": 256, "num_samples": 1024})}
"""fit_brl's fits (loader, its arguments, the classifier's options): Titanic and tic-tac-toe at their defaults,
as ``convergence_brl`` fits them, and mushroom's tempered defaults for a fixed number of scans."""


def default_fit_timers() -> tuple[dict, dict, dict]:
    """Timers of :data:`DEFAULT_FITS` (seed 1), the seconds each first fit spent compiling (0 where the
    compilation cache held its programs) and a digest of each fit's draws, which a fit that its time budget
    did not cut draws alike with any pool."""
    timers, compile_seconds, digests = {}, {}, {}
    for name, (load, arguments, options) in DEFAULT_FITS.items():
        data = load(*arguments)

        def fit(data=data, options=options):
            return BayesianRuleListClassifier(seed=1, progress_bar=False, **options).fit(data.X, data.y).result_

        timers[name], result = call_timer(fit)
        compile_seconds[name] = result.run.seconds["compile"]
        draws = np.asarray(result.run.summaries["log_joint"]).tobytes()
        digests[name] = hashlib.sha1(draws).hexdigest() if result.run.budget_cut is None else None
    return timers, compile_seconds, digests


def array_timers() -> dict:
    """The timers of the models whose work is large array operations (see the module's docstring)."""
    usps = load_usps("train")
    eps = dissimilarity_quantile(usps.X, 0.05, "l2")
    nell = load_nell().X
    sets, queries = BayesianSets(nell), random_queries(nell, BATCH_SIZE, np.random.default_rng(SEED))
    binary, _ = binarised_usps()
    calls = {
        "prototype_selection": lambda: select_prototypes(usps.X, usps.y, eps=eps),
        "bayesian_sets": lambda: sets.log_scores(queries),
        "mgm": lambda: fit_mgm(binary, PAPER_CLUSTERS, restarts=1, seed=0),
    }
    return {name: call_timer(call)[0] for name, call in calls.items()}


def main() -> None:
    data, items, antecedents = tictactoe_antecedents()
    table = truth_table(items, antecedents)
    codes = load_usps_bcm(70).X
    fit_timers, compile_seconds, digests = default_fit_timers()
    timers = {
        "brl_step": ours_timer(table, data.y, antecedents, 10, 50000),
        "brl_engine": engine_timer(table, data.y, antecedents),
        "fit_brl": FitTimer(items, data.y, antecedents, draws=100_000),
        **fit_timers,
        "pysbrl": PysbrlTimer(table, data.y),
        "bcm_sweeps_1_chain": sweep_timer(codes, 1, split_merge=False),
        "bcm_sweeps_4_chains": sweep_timer(codes, 4),
        **array_timers(),
    }
    rounds = interleaved_rounds(timers, SPEED_ROUNDS)
    pool_threads = int(os.environ.get("PJRT_NPROC") or usable_cores())
    print(json.dumps({"pool_threads": pool_threads, "digests": digests, "compile_seconds": compile_seconds,
                      **{name: median_of(rounds, name) for name in timers}}))


if __name__ == "__main__":
    main()
