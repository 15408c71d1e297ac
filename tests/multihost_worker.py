"""One process of tests/test_multiprocess.py: the fits of docs/multihost_example.py, and the facts the test
compares, pickled into ``--out`` (``process-<id>.pkl`` or ``single.pkl``).

``distributed``: one of several processes (``jax.distributed``), which says when its runtime has started
(:data:`STARTED`). Process 1 reads a clock that runs 20 times as fast as process 0's, so
that a decision it took from its own clock would part it from process 0. ``single``: one process, its fits
on 1 device (and for a fixed number of draws on 4 too), and the resumption of the checkpoint that the
processes left."""

import argparse
import contextlib
import pickle
import sys
import time
from functools import partial
from pathlib import Path

import jax
import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "docs"))
import multihost_example  # noqa: E402

STARTING, STARTED = "starting the distributed runtime", "the distributed runtime started"
"""What a ``distributed`` process prints before ``jax.distributed.initialize`` and after its first collective:
one that printed the first line only died in the runtime's start (the test skips)."""

STOP_AT_CALL = 2
"""The chunk in which the processes' checkpointed BRL fit (one tuning chunk, one sampling chunk) stops, as
a preempted job would: the chunks before it are in the checkpoint."""

FIXED = {"num_samples": 32, "num_warmup": 16, "progress_bar": False}
"""The fits of a fixed number of draws (the checkpointed ones among them)."""

BUDGET = {"min_ess": 1e9, "max_seconds": 1.0, "progress_bar": False}
"""Fits that only their time budget ends (a target out of reach)."""


class Stopped(Exception):
    """The end of a process stopped mid-run (the engine does not catch it, so only the checkpoint remains)."""


@contextlib.contextmanager
def counted_chunks(stop_at: int | None = None):
    """The calls of ``tempering.run_scans`` (one per chunk) while in the block, a list that grows with each;
    with ``stop_at``, that call raises :class:`Stopped`. Chunks are whole in the block (by default a run's
    first chunk is one scan and a chunk lasts at most ``convergence.CHUNK_SECONDS``)."""
    from interpretable_zoo.inference import convergence, tempering

    run_scans, calls = tempering.run_scans, []
    chunking = convergence.FIRST_CHUNK_SCANS, convergence.CHUNK_SECONDS

    def counting(*args, **kwargs):
        calls.append(None)
        if len(calls) == stop_at:
            raise Stopped
        return run_scans(*args, **kwargs)

    tempering.run_scans = counting
    convergence.FIRST_CHUNK_SCANS, convergence.CHUNK_SECONDS = 1 << 62, float("inf")
    try:
        yield calls
    finally:
        tempering.run_scans = run_scans
        convergence.FIRST_CHUNK_SCANS, convergence.CHUNK_SECONDS = chunking


def facts(results: dict) -> dict:
    """Per fit: its draws (records and summaries by name), whether it converged or a budget cut it, and the
    devices and processes that its chains ended on."""
    def devices(result):
        return result.run.ladder.rng_key.sharding.device_set

    return {name: {"draws": {key: np.asarray(value) for key, value in {**result.run.records, **result.run.summaries}.items()},
                   "converged": result.run.converged, "budget_cut": result.run.budget_cut,
                   "devices": len(devices(result)), "processes": sorted({d.process_index for d in devices(result)})}
            for name, result in results.items()}  # fmt: skip


def distributed(args) -> dict:
    from jax.experimental import multihost_utils

    print(STARTING, flush=True)
    jax.distributed.initialize(args.coordinator, args.num_processes, args.process_id, initialization_timeout=60)
    multihost_utils.sync_global_devices("started")  # a first collective: the processes reach each other
    print(STARTED, flush=True)
    if jax.process_index() == 1:
        time.perf_counter = partial(lambda real: 20 * real(), time.perf_counter)
    report = {
        "default": facts(multihost_example.fit_models(progress_bar=False)),
        "fixed": facts(multihost_example.fit_models(**FIXED)),
        "budget": facts(multihost_example.fit_models(**BUDGET)),
    }
    with counted_chunks(stop_at=STOP_AT_CALL), contextlib.suppress(Stopped):
        multihost_example.fit_models(checkpoints=args.out, checkpoint_seconds=0, **FIXED)
    # a checkpoint that process 0 sees and process 1 does not (its folder is empty)
    elsewhere = args.out if jax.process_index() == 0 else args.out / "empty"
    elsewhere.mkdir(exist_ok=True)
    try:
        multihost_example.fit_models(checkpoints=elsewhere, **FIXED)
    except ValueError as error:
        report["refused"] = str(error)
    else:
        report["refused"] = "(accepted)"
    return report


def single(args) -> dict:
    report = {"default/1": facts(multihost_example.fit_models(devices=1, progress_bar=False))}
    for devices in (4, 1):
        with counted_chunks() as calls:
            report[f"fixed/{devices}"] = facts(multihost_example.fit_models(devices=devices, **FIXED))
        report[f"fixed/{devices}/chunks"] = len(calls)
    report["checkpoint found"] = (args.out / "brl.ckpt").exists()
    with counted_chunks() as calls:
        report["resumed"] = facts(multihost_example.fit_models(checkpoints=args.out, devices=1, **FIXED))
    report["resumed/chunks"] = len(calls)
    report["checkpoint left"] = (args.out / "brl.ckpt").exists()
    return report


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("role", choices=["distributed", "single"])
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--coordinator")
    parser.add_argument("--num-processes", type=int)
    parser.add_argument("--process-id", type=int)
    args = parser.parse_args()
    if args.role == "distributed":
        report, name = distributed(args), f"process-{args.process_id}.pkl"
    else:
        report, name = single(args), "single.pkl"
    (args.out / name).write_bytes(pickle.dumps(report))


if __name__ == "__main__":
    main()
