"""Time to answer, as a user meets it: every case in fresh Python processes (``time_to_answer_worker``).

Per case: a process with an empty persistent compilation cache (cold), a new process reusing that cache
(warm), and inside the warm process a second fit of the same shapes (the next seed, a bootstrap resample
of the rows, same N). Beside them, the peer's whole process on the same task, where a cheap one exists.
Needs the real datasets (INTERPRETABLE_ZOO_DATA); peers: ``pip install -e '.[bench]'``.
"""

from __future__ import annotations

import importlib.util
import json
import math
import os
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from benchmarks import time_to_answer_worker as worker
from benchmarks.runner import Comparison, benchmark, format_seconds

ROOT = Path(__file__).resolve().parent.parent
PROCESS_TIMEOUT = 1800
CACHE_ENV = "INTERPRETABLE_ZOO_CACHE_DIR"


class WorkerFailed(RuntimeError):
    """A worker process exited with an error or printed no record."""


def run_worker(args: list[str], env: dict[str, str] | None = None) -> dict:
    """Run the worker in a new process and return its record, with ``process``: seconds from launch to
    the first answer (interpreter start-up, imports, data, fit, answer; a peer's harness code left out),
    ``exit``: seconds from the record's printing to the process's end, and ``load_average``: the
    1-minute load average at launch."""
    load_average = os.getloadavg()[0]
    launched = time.time()
    completed = subprocess.run(
        [sys.executable, "-m", "benchmarks.time_to_answer_worker", *args, "--launched-at", repr(launched)],
        cwd=ROOT, env={**os.environ, **(env or {})}, capture_output=True, text=True, timeout=PROCESS_TIMEOUT,
    )  # fmt: skip
    records = [line for line in completed.stdout.splitlines() if line.startswith("{")]
    if completed.returncode != 0 or not records:
        tail = " ".join(completed.stderr.strip().splitlines()[-3:])
        raise WorkerFailed(f"worker {' '.join(args)} exited with {completed.returncode}: {tail}")
    record = json.loads(records[-1])
    exit_seconds = time.time() - launched - record["startup"] - record["printed_at"]
    return {**record, "process": record["startup"] + record["answer_at"], "exit": exit_seconds, "load_average": load_average}


@dataclass(frozen=True)
class Peer:
    """A peer run: the worker's peer ``name`` with ``options``, on inputs that ``prepare(folder)`` writes."""

    name: str
    label: str
    module: str
    prepare: Callable[[Path], None]
    options: dict = field(default_factory=dict)


@dataclass(frozen=True)
class Case:
    case: str
    label: str
    peer: Peer | None
    no_peer: str = ""
    refits: int = 1
    """Refits in the warm process (seeds first + 1, first + 2, ...; bootstrap rows each); the refit row shows
    the first, and with more than one, the median and the slowest in its notes."""


def _save(folder: Path, **arrays) -> None:
    np.savez(folder / "inputs.npz", **arrays)


def _titanic_items(folder: Path) -> None:
    """Letham's split as the items our classifier builds (its encoder's defaults), for imodels."""
    from interpretable_zoo.datasets import load_titanic
    from interpretable_zoo.inference.rule_mining import fit_item_encoder

    train, test = load_titanic("train"), load_titanic("test")
    encoder = fit_item_encoder(train.X)
    _save(folder, X=encoder.transform(train.X), y=train.y, X_test=encoder.transform(test.X), y_test=test.y)


def _tictactoe_items(folder: Path) -> None:
    from interpretable_zoo.datasets import load_tictactoe
    from interpretable_zoo.inference.rule_mining import fit_item_encoder

    data = load_tictactoe()
    items = fit_item_encoder(data.X, negations=False).transform(data.X)
    _save(folder, X=items, y=data.y, X_test=items, y_test=data.y)


def _recipes(folder: Path) -> None:
    from interpretable_zoo.datasets import load_recipes

    _save(folder, X=load_recipes().X)


def _usps(folder: Path) -> None:
    from interpretable_zoo.datasets import load_usps

    train, test = load_usps("train"), load_usps("test")
    _save(folder, X=train.X.astype(np.float64), y=train.y, X_test=test.X.astype(np.float64), y_test=test.y)


def _movielens(folder: Path) -> None:
    """The matrix (sparse), our first query and the features with mean strictly between 0 and 1."""
    import scipy.sparse

    from interpretable_zoo import BayesianSets
    from interpretable_zoo.datasets import load_movielens

    data = load_movielens()
    _, query = worker.genre_query(data.X, data.y, 0)
    scipy.sparse.save_npz(folder / "X.npz", data.X.tocsr())
    _save(folder, query=query, informative=BayesianSets(data.X).informative)


IMODELS_FIXED = {"n_chains": worker.BRL_FIXED["num_chains"], "max_iter": worker.BRL_FIXED["num_samples"], "random_state": 1}

CASES = (
    Case("brl_titanic", "BRL Titanic (Letham's split), defaults",
         Peer("imodels_brl", "imodels BRL, defaults (3 chains x 50,000)", "imodels", _titanic_items, {"random_state": 1}),
         refits=10),
    Case("brl_titanic_fixed", "BRL Titanic, fixed 3 chains x 10000 iterations, one rung",
         Peer("imodels_brl", "imodels BRL, 3 chains x 10,000", "imodels", _titanic_items, IMODELS_FIXED)),
    Case("brl_tictactoe", "BRL tic-tac-toe, no negations, cardinality <= 3",
         Peer("imodels_brl", "imodels BRL, 3 chains x 10,000, cardinality <= 3", "imodels", _tictactoe_items,
              {**IMODELS_FIXED, "maxcardinality": 3})),
    Case("bcm_recipes", "BCM recipes, S = 4, defaults", None,
         "no peer: bcm_recipes has none, and lda's collapsed Gibbs is another model (a per-token speed reference only)"),
    Case("mgm_recipes", "MGM recipes, K = 4, defaults",
         Peer("kmeans", "scikit-learn KMeans (n_init=5)", "sklearn", _recipes, {"n_clusters": 4, "n_init": 5, "random_state": 0})),
    Case("prototypes_usps", "Prototype selection USPS, greedy, eps = 5th percentile",
         Peer("numpy_greedy", "NumPy greedy (scipy pdist/cdist)", "scipy", _usps)),
    Case("bayesian_sets_movielens", "Bayesian Sets MovieLens, one 3-movie genre query, top 10",
         Peer("bayessets", "bayessets 0.2.1 + argsort", "bayessets", _movielens)),
)  # fmt: skip


def _seconds(value) -> str:
    return "n/a" if value is None else format_seconds(value)


def _met(ok: bool) -> str:
    return "met" if ok else "NOT met"


def _programs(counts: dict) -> str:
    hits = counts["cache_hits"]
    return f"{counts['programs_compiled']}" + (f" (+{hits} loaded from the cache)" if hits else "")


def _columns(record: dict, part: dict, with_import: bool) -> tuple[tuple[str, str], ...]:
    sampling = (part.get("run_seconds") or {}).get("sampling")
    answer = part["answer_compiles"]
    return (
        ("import", _seconds(record["import"]) if with_import else "-"),
        ("data", _seconds(part["load"])),
        ("fit", _seconds(part["fit"])),
        ("of which compile", _seconds(part["compile_seconds"]) if part["compile_events"] else "-"),
        ("of which trace + lower", _seconds(part["trace_and_lower_seconds"] or None) if part["compile_events"] else "-"),
        ("programs compiled (fit)", _programs(part)),
        ("of which sampling", _seconds(sampling)),
        ("predict/explain", _seconds(part["answer"])),
        ("programs compiled (predict/explain)", _programs(answer)),
    )


def _peer_notes(record: dict | None, reason: str) -> str:
    if record is None:
        return f"peer: n/a ({reason})"
    first = record["first"]
    return (f"peer: import {_seconds(record['import'])}, data {_seconds(first['load'])}, fit {_seconds(first['fit'])}, "
            f"answer {_seconds(first['answer'])}, exit {_seconds(record['exit'])} ({first['notes']})")  # fmt: skip


def case_rows(case: Case, folder: Path) -> list[Comparison]:
    """The cold, warm and refit rows of one case (processes run here), with the peer beside them."""
    cache = folder / "cache"
    cold = run_worker([case.case], {CACHE_ENV: str(cache)})
    warm = run_worker([case.case, "--refits", str(case.refits)], {CACHE_ENV: str(cache)})
    peer_record, reason = None, case.no_peer
    if case.peer is not None:
        if importlib.util.find_spec(case.peer.module) is None:
            reason = f"{case.peer.module} is not installed; pip install -e '.[bench]'"
        else:
            inputs = folder / "peer"
            inputs.mkdir()
            case.peer.prepare(inputs)
            options = json.dumps(case.peer.options)
            peer_record = run_worker(["--peer", case.peer.name, "--inputs", str(inputs), "--options", options])
    peer_label = case.peer.label if case.peer is not None else "-"
    peer_seconds = None if peer_record is None else peer_record["process"]
    peer_notes = _peer_notes(peer_record, reason)

    rows = []
    for mode, record in (("cold (new process, empty cache)", cold), ("warm cache (new process)", warm)):
        goals = [f"goal import <= 0.5 s: `import interpretable_zoo` {_seconds(record['import_bare'])} "
                 f"{_met(record['import_bare'] <= 0.5)}, with the case's names {_seconds(record['import'])} "
                 f"{_met(record['import'] <= 0.5)}"]  # fmt: skip
        if case.case.startswith("brl_titanic") and record is warm:
            goals.append(f"goal warm process <= 3 s: {_seconds(record['process'])} {_met(record['process'] <= 3.0)}")
        if case.case == "brl_titanic_fixed" and record is warm:
            ratio = None if peer_seconds is None else peer_seconds / record["process"]
            ok = ratio is not None and ratio >= 2.0
            shown = "n/a" if ratio is None else f"{ratio:.2f}x"
            goals.append(f"goal >= 2x imodels' process at the same iterations: {shown} {_met(ok)}")
        notes = "; ".join([*goals, record["first"]["notes"], f"process exit {_seconds(record['exit'])}", peer_notes,
                           f"load average {record['load_average']:.1f}"])  # fmt: skip
        rows.append(Comparison(f"{case.label}: {mode}", record["process"], peer_label, peer_seconds, notes,
                               _columns(record, record["first"], with_import=True)))  # fmt: skip
    refit = warm["refit"]
    compiled = refit["programs_compiled"]
    goals = [f"goal a second fit of the same shapes compiles nothing: {compiled} programs {_met(compiled == 0)}"]
    fits, first_seed = np.asarray(warm["refit_fits"]), worker.CASES[case.case][-1]
    spread = (f"over {fits.size} refits (seeds {first_seed + 1}-{first_seed + fits.size}, bootstrap rows each) "
              f"fit median {_seconds(float(np.median(fits)))}, fastest {_seconds(fits.min())}, "
              f"slowest {_seconds(fits.max())}")
    if case.case == "brl_titanic":
        goals.append(f"goal refit <= 1 s: fit {_seconds(refit['fit'])} {_met(refit['fit'] <= 1.0)}"
                     + (f"; {spread}: median {_met(np.median(fits) <= 1.0)}" if fits.size > 1 else ""))
    elif fits.size > 1:
        goals.append(spread)
    if case.case == "bcm_recipes":
        share = refit["compile_seconds"] / refit["fit"]
        goals.append(f"goal compile share < 10 %: {share:.0%} {_met(share < 0.1)}")
    rows.append(
        Comparison(f"{case.label}: refit in the warm process (next seed, bootstrap rows)", refit["fit"] + refit["answer"],
                   "-", None, "; ".join([*goals, refit["notes"], "ours = fit + predict/explain"]),
                   _columns(warm, refit, with_import=False))  # fmt: skip
    )
    return rows


def run_cases(names=None) -> list[Comparison]:
    """Rows of the cases named (all by default); a case whose worker fails gives one row saying why."""
    rows = []
    for case in CASES:
        if names is not None and case.case not in names:
            continue
        with tempfile.TemporaryDirectory(prefix="izoo-time-to-answer-") as folder:
            try:
                rows += case_rows(case, Path(folder))
            except (WorkerFailed, subprocess.TimeoutExpired) as error:
                rows.append(Comparison(case.label, math.nan, "-", None, f"FAILED: {error}"))
    return rows


def require_data() -> None:
    """Raise DataHomeMissing / FileNotFoundError (the runner skips the benchmark with the reason) when
    a data file of the cases is absent."""
    from interpretable_zoo import datasets

    for split in ("train", "test"):
        datasets.load_titanic(split)
        datasets.load_usps(split)
    datasets.load_tictactoe()
    datasets.load_recipes()
    datasets.load_movielens()


@benchmark(
    "time_to_answer",
    peers=("imodels", "bayessets"),
    description=(
        "Time to answer as a user meets it, every measurement in a fresh Python process "
        "(`benchmarks/time_to_answer_worker.py`): cold = an empty persistent compilation cache "
        "(INTERPRETABLE_ZOO_CACHE_DIR = a new folder); warm cache = a new process reusing that folder; refit = "
        "inside the warm process, a second fit of the same shapes (next seed, bootstrap resample of the rows, same "
        "N; BRL Titanic defaults refits ten times, seeds 2-11 with their own resamples, since how long a run takes "
        "to converge varies with both: the row shows the first refit, its notes the median, fastest and slowest). "
        "ours / peer time = the whole process from launch to the answer (interpreter start-up, imports, reading "
        "the data, fit, predict or explain; a peer reads arrays prepared beforehand), for refit rows fit + "
        "predict/explain. import = `import interpretable_zoo` and the public names the case uses (this first "
        "imports JAX and the rest); compile = the seconds of JAX's backend-compile events during the fit (with a warm "
        "cache a cache hit fires this event too, its time then being the load); programs compiled = those events "
        "less the persistent-cache hits (in the fit, and apart in predict/explain); trace + lower = JAX's tracing and "
        "lowering to MLIR, which a warm cache does not skip; sampling = `run.seconds['sampling']` of MCMC fits that "
        "report it (the run's time less its compile events, so tracing counts as sampling). Peers: "
        "imodels' pure-Python BRL on the same items (BRL Titanic defaults against imodels' defaults; the fixed row "
        "at the same chains and iterations, the goal's comparison), scikit-learn KMeans for MGM, a NumPy greedy for "
        "prototype selection, `bayessets` for Bayesian Sets. Goals (in the notes): a second fit of the same "
        "shapes compiles nothing; BRL Titanic refit <= 1 s; BCM recipes refit compile share < 10 %; warm-cache "
        "process for BRL Titanic (fixed iterations) <= 3 s and >= 2x imodels' process at the same iterations; "
        "import <= 0.5 s. TIME_TO_ANSWER_CASES (comma-separated case names, e.g. brl_titanic,brl_titanic_fixed) "
        "narrows the cases."
    ),
)
def bench_time_to_answer() -> list[Comparison]:
    require_data()
    chosen = os.environ.get("TIME_TO_ANSWER_CASES")
    names = None if not chosen else chosen.split(",")
    unknown = sorted(set(names or ()) - {case.case for case in CASES})
    if unknown:
        raise ValueError(f"TIME_TO_ANSWER_CASES: unknown case(s) {unknown}; choose from {[c.case for c in CASES]}")
    return run_cases(names)
