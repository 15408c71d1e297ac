"""Fits whose chains are split over 2 processes of 2 CPU devices each (``jax.distributed`` on 127.0.0.1,
CPU collectives by gloo): every process receives every draw, the draws are those of one process on 4
devices and on 1, a time budget ends every process at the same scan, and one process resumes the
checkpoint that the two left. The fits are docs/multihost_example.py's (:func:`fit_models`), run by
tests/multihost_worker.py; JAX fixes its devices at start-up, so every run is a subprocess."""

import os
import pickle
import re
import socket
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from multihost_worker import STARTED, STARTING, STOP_AT_CALL

WORKER = Path(__file__).with_name("multihost_worker.py")
TIMEOUT = 300
"""Seconds a worker may take (about 30 on 2 CPU cores); a hung one fails the test instead of blocking it."""

MODELS = ("brl", "bcm")


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def environment(devices: int) -> dict:
    flags = f"{os.environ.get('XLA_FLAGS', '')} --xla_force_host_platform_device_count={devices}"
    return {**os.environ, "XLA_FLAGS": flags, "JAX_CPU_COLLECTIVES_IMPLEMENTATION": "gloo"}


def finish(worker: subprocess.Popen, workers) -> tuple[int, str, str]:
    """(exit status, stdout, stderr) of ``worker``; when it runs past :data:`TIMEOUT`, every worker is stopped
    and the test fails with the end of what each wrote."""
    try:
        stdout, stderr = worker.communicate(timeout=TIMEOUT)
    except subprocess.TimeoutExpired:
        tails = []
        for index, process in enumerate(workers):
            process.kill()
            tails.append(f"process {index}:\n{process.communicate()[1][-2000:]}")
        pytest.fail(f"a worker ran past {TIMEOUT} s (a hang: did the processes take different paths?)\n" + "\n".join(tails))
    return worker.returncode, stdout, stderr


def first_error(stderr: str) -> str:
    """The first error line of a worker's stderr (JAX's runtime logs one starting "F<date>" before it aborts;
    Python, "...Error: ..."), else its last line."""
    lines = [line.strip() for line in stderr.splitlines() if line.strip()]
    errors = [line for line in lines if re.match(r"F\d{4} ", line) or "Error" in line]
    return (errors or lines or ["(nothing on stderr)"])[0][:300]


@pytest.fixture(scope="module")
def reports(tmp_path_factory):
    """The pickled reports of the 2 processes ("process 0", "process 1") and then of one process ("single")."""
    folder = tmp_path_factory.mktemp("multiprocess")
    address = f"127.0.0.1:{free_port()}"
    workers = [
        subprocess.Popen([sys.executable, str(WORKER), "distributed", "--out", str(folder), "--coordinator", address,
                          "--num-processes", "2", "--process-id", str(index)],
                         env=environment(2), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        for index in range(2)
    ]  # fmt: skip
    outcomes = [finish(worker, workers) for worker in workers]
    unstarted = [stderr for _, stdout, stderr in outcomes if STARTING in stdout and STARTED not in stdout]
    if unstarted:
        reasons = " / ".join(first_error(stderr) for stderr in unstarted)
        pytest.skip(f"jax.distributed (CPU collectives by gloo) does not start on 127.0.0.1 here: {reasons}")
    for index, (status, _, stderr) in enumerate(outcomes):
        assert status == 0, f"process {index} failed:\n{stderr[-4000:]}"
    single = subprocess.run([sys.executable, str(WORKER), "single", "--out", str(folder)], env=environment(4),
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, timeout=TIMEOUT)
    assert single.returncode == 0, single.stderr[-4000:]
    names = {"process 0": "process-0.pkl", "process 1": "process-1.pkl", "single": "single.pkl"}
    return {name: pickle.loads((folder / file).read_bytes()) for name, file in names.items()}


def assert_same_draws(first: dict, second: dict, *, same_devices: bool = True) -> None:
    """Every draw of every chain equal, the log joint of runs on different numbers of devices to float32
    rounding (each device's replicas are a batch of another size, whose terms XLA may sum in another
    order); the 8 chains are not all one (so equal draws are the same chains, not a constant). Two chains
    alone may share their draws: a fit that a budget cut after a scan or two has one draw a chain, and a
    discrete posterior's chains can sit in the same state."""
    assert first.keys() == second.keys()
    for key in first:
        if key == "log_joint" and not same_devices:
            np.testing.assert_allclose(first[key], second[key], rtol=1e-6, err_msg=key)
        else:
            np.testing.assert_array_equal(first[key], second[key], err_msg=key)
    chains = [np.concatenate([np.ravel(first[key][chain]) for key in sorted(first)]) for chain in range(8)]
    assert first["log_joint"].shape[0] == 8 and len({chain.tobytes() for chain in chains}) > 1


@pytest.mark.parametrize("run", ["default", "fixed", "budget"])
@pytest.mark.parametrize("model", MODELS)
def test_every_process_receives_every_chain_s_draws(reports, run, model):
    one, other = reports["process 0"][run][model], reports["process 1"][run][model]
    assert one["processes"] == other["processes"] == [0, 1] and one["devices"] == 4  # the chains were split
    assert_same_draws(one["draws"], other["draws"])


@pytest.mark.parametrize("run, devices", [("default", 1), ("fixed", 4), ("fixed", 1)])
@pytest.mark.parametrize("model", MODELS)
def test_two_processes_draw_what_one_process_draws(reports, model, run, devices):
    """Until converged (within the budget, so the draws depend on the seed alone) or for a fixed number of
    draws, the 2 processes' draws are one process's on 1 device, and on 4 (the same 2 chains per device)."""
    split, alone = reports["process 0"][run][model], reports["single"][f"{run}/{devices}"][model]
    assert alone["devices"] == devices and alone["processes"] == [0]
    if run == "default":
        assert split["converged"] and alone["converged"]
    assert_same_draws(split["draws"], alone["draws"], same_devices=devices == 4)


@pytest.mark.parametrize("model", MODELS)
def test_a_time_budget_ends_every_process_at_the_same_scan(reports, model):
    """A target out of reach and a budget of a second: the budget ends the fit at the same place on both
    processes (on process 0's clock: process 1's runs 20 times as fast), with the same draws (compared
    above)."""
    cuts = [reports[process]["budget"][model]["budget_cut"] for process in ("process 0", "process 1")]
    assert cuts[0] in ("tuning", "sampling") and cuts[0] == cuts[1]


def test_one_process_resumes_the_checkpoint_of_two(reports):
    """The processes' BRL fit stopped in its chunk STOP_AT_CALL, after process 0 had checkpointed the chunks
    before it: one process on one device resumes there, runs only the chunks left (BCM's run whole) and
    draws what the uninterrupted fits drew on that device; a finished fit removes its checkpoint."""
    single = reports["single"]
    assert single["checkpoint found"] and not single["checkpoint left"]
    assert single["resumed/chunks"] == single["fixed/1/chunks"] - (STOP_AT_CALL - 1)
    for model in MODELS:
        assert_same_draws(single["resumed"][model]["draws"], single["fixed/1"][model]["draws"])


@pytest.mark.parametrize("process", ["process 0", "process 1"])
def test_a_checkpoint_that_one_process_alone_sees_is_refused_by_every_process(reports, process):
    """Process 0's folder holds the BRL checkpoint, process 1's is empty: resuming on one and starting on the
    other would part them, so both refuse, naming the path's problem."""
    assert reports[process]["refused"].startswith("checkpoint: ")
    assert "is seen by processes [0] of 2 only" in reports[process]["refused"]
