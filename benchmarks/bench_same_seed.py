"""The same seed gives the same draws under any machine load: each default fit that converges within its
budget runs twice in fresh processes with empty compilation caches, once on the quiet machine and once
beside one CPU-bound process per core, and the two runs' draws are compared bit for bit. Needs the real
datasets (INTERPRETABLE_ZOO_DATA) for tic-tac-toe.
"""

from __future__ import annotations

import subprocess
import sys

from benchmarks.runner import Comparison, benchmark, fresh_process_record
from interpretable_zoo.machine import usable_cores

CASES = {
    "BRL, Titanic (Letham's training split), defaults": (
        "d = iz.datasets.load_titanic(); "
        "result = iz.BayesianRuleListClassifier(seed={seed}, progress_bar=False).fit(d.X, d.y).result_"
    ),
    "BRL, tic-tac-toe, negations=False, max_cardinality=3": (
        "d = load_tictactoe(); result = iz.BayesianRuleListClassifier(negations=False, max_cardinality=3, "
        "seed={seed}, progress_bar=False).fit(d.X, d.y).result_"
    ),
    "BCM, three planted groups of 10 observations, S = 3, 8 chains": (
        "X = np.repeat([[0, 0, 0, 0], [1, 1, 1, 1], [2, 2, 0, 1]], 10, axis=0); "
        "result = iz.fit_bcm(X, 3, num_chains=8, seed={seed}, progress_bar=False)"
    ),
}

WORKER = """
import hashlib, json, time
import numpy as np
import interpretable_zoo as iz
from interpretable_zoo.datasets import load_tictactoe
start = time.perf_counter()
{fit}
seconds = time.perf_counter() - start
run = result.run
digest = hashlib.sha256()
for group in (run.records, run.summaries):
    for name in sorted(group):
        digest.update(name.encode()); digest.update(np.ascontiguousarray(group[name]).tobytes())
print(json.dumps({{"seconds": seconds, "compile": run.seconds["compile"], "digest": digest.hexdigest(),
                  "converged": bool(run.converged), "budget_cut": run.budget_cut, "n_scans": int(run.n_scans)}}))
"""

BUSY_LOOP = "while True: pass"


def _fit_in_fresh_process(fit: str, cores_busy: int, seed: int = 1) -> dict:
    """The worker's report of ``fit`` (with ``seed``) run in a new process with an empty compilation cache,
    beside ``cores_busy`` processes that each keep a core busy."""
    burners = [subprocess.Popen([sys.executable, "-c", BUSY_LOOP]) for _ in range(cores_busy)]
    try:
        return fresh_process_record(WORKER.format(fit=fit.format(seed=seed)))
    finally:
        for burner in burners:
            burner.kill()
            burner.wait()


@benchmark(
    "same_seed_under_load",
    description=(
        "The default fits that converge within their budget, seed 1, each in a fresh process with an empty "
        "compilation cache: ours on the quiet machine, the peer column the same fit beside one CPU-bound "
        "process per core (a Python busy loop each). Times are whole fits, compiling included. Goal: the two "
        "runs' draws identical (a SHA-256 of every record and summary of the kept draws), however long the "
        "compiling and the scans took. Control: seed 2 on the quiet machine must give other draws, or the "
        "digest would not tell runs apart."
    ),
)
def same_seed_under_load() -> list[Comparison]:
    rows = []
    for task, fit in CASES.items():
        quiet = _fit_in_fresh_process(fit, 0)
        loaded = _fit_in_fresh_process(fit, usable_cores())
        other_seed = _fit_in_fresh_process(fit, 0, seed=2)
        print(task, quiet, loaded, other_seed, flush=True)
        same = quiet["digest"] == loaded["digest"]
        control = "differ (as they must)" if other_seed["digest"] != quiet["digest"] else "are the SAME: control failed"
        rows.append(Comparison(
            task, quiet["seconds"], f"the same fit beside {usable_cores()} busy processes", loaded["seconds"],
            f"goal identical draws: {'met' if same else 'NOT met'}; converged {quiet['converged']} and "
            f"{loaded['converged']}, {quiet['n_scans']} and {loaded['n_scans']} scans; compile "
            f"{quiet['compile']:.1f} s and {loaded['compile']:.1f} s; budget cut {quiet['budget_cut']} and "
            f"{loaded['budget_cut']}; seed 2's draws {control}",
        ))  # fmt: skip
    return rows
