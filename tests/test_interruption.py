"""Ctrl-C during a tempered run keeps the draws of the chunks that finished (tests/toy_tempering.py's
lattice target): KeyboardInterrupt raised from inside the chunk loop, at a chosen call of ``run_scans``;
checkpoints; chunks cut short in time; and SIGINT sent to a process in a fit."""

import os
import pickle
import re
import signal
import subprocess
import sys
import threading
import time

import numpy as np
import pytest
import toy_tempering as toy

import interpretable_zoo as iz
from interpretable_zoo.inference import convergence, tempering
from interpretable_zoo.inference.checkpoint import Checkpoint

STATIC, DATA = toy.bimodal()[:2]
CHUNK = 32
OPTIONS = dict(num_chains=2, n_temperatures=4, scans_per_chunk=CHUNK, progress_bar=False)
pytestmark = pytest.mark.usefixtures("whole_chunks")  # the tests interrupt at a chosen chunk


def raise_at_call(monkeypatch, n: int, exception) -> None:
    """``tempering.run_scans`` raising ``exception`` on its ``n``-th call from now."""
    calls = []
    run_scans = tempering.run_scans

    def failing(*args, **kwargs):
        calls.append(None)
        if len(calls) == n:
            raise exception
        return run_scans(*args, **kwargs)

    monkeypatch.setattr(tempering, "run_scans", failing)


def interrupt_at_call(monkeypatch, n: int) -> None:
    """``tempering.run_scans`` raising KeyboardInterrupt on its ``n``-th call from now, as Ctrl-C would."""
    raise_at_call(monkeypatch, n, KeyboardInterrupt)


def test_interrupted_sampling_keeps_the_chunks_run_so_far(monkeypatch):
    """No tuning, 4 chunks asked for, Ctrl-C during the 3rd: the first two chunks' draws come back,
    equal to the first draws of the same run uninterrupted, with converged False and a warning."""
    whole = convergence.sample(toy.KERNEL, STATIC, DATA, tuning_rounds=0, num_samples=4 * CHUNK, seed=3, **OPTIONS)
    interrupt_at_call(monkeypatch, 3)
    with pytest.warns(UserWarning, match=r"^sampling: interrupted \(KeyboardInterrupt\); kept the 64 draws per chain"):
        cut = convergence.sample(toy.KERNEL, STATIC, DATA, tuning_rounds=0, num_samples=4 * CHUNK, seed=3, **OPTIONS)
    assert cut.records["x"].shape == (2, 2 * CHUNK)
    np.testing.assert_array_equal(cut.records["x"], whole.records["x"][:, : 2 * CHUNK])
    assert not cut.converged and cut.n_scans == 2 * CHUNK
    # the ladder is the state after the last whole chunk: the run can go on from there
    monkeypatch.undo()
    rest = convergence.extend(cut, toy.KERNEL, STATIC, DATA, num_samples=2 * CHUNK)
    np.testing.assert_array_equal(rest.records["x"], whole.records["x"][:, 2 * CHUNK :])


def test_interrupt_between_rounds_keeps_the_last_complete_round(monkeypatch):
    """Run until converged (targets out of reach): round 1 is one chunk, round 2 two; Ctrl-C in the
    first chunk of round 2 keeps round 1's draws."""
    unreachable = convergence.ConvergenceTarget(target_rhat=1.0, min_ess=1e9, max_seconds=None)
    interrupt_at_call(monkeypatch, 2)
    with pytest.warns(UserWarning, match=f"kept the {CHUNK} draws per chain"):
        cut = convergence.sample(toy.KERNEL, STATIC, DATA, tuning_rounds=0, target=unreachable, seed=4, **OPTIONS)
    assert cut.records["x"].shape == (2, CHUNK) and not cut.converged


def test_interrupt_while_tuning_returns_the_tuning_draws(monkeypatch):
    """Two tuning rounds (one chunk, then two): Ctrl-C in the 3rd chunk keeps the 2nd round's first chunk."""
    interrupt_at_call(monkeypatch, 3)
    with pytest.warns(UserWarning, match=rf"kept the {CHUNK} draws per chain run so far \(tuning draws\)"):
        cut = convergence.sample(toy.KERNEL, STATIC, DATA, tuning_rounds=2, num_samples=CHUNK, seed=5, **OPTIONS)
    assert cut.records["x"].shape == (2, CHUNK) and not cut.converged


@pytest.mark.parametrize("call, kept", [(2, CHUNK), (4, 2 * CHUNK)], ids=["second-tuning-round", "first-sampling-chunk"])
def test_interrupt_in_the_first_chunk_of_a_round_returns_the_last_tuning_round(monkeypatch, call, kept):
    """Two tuning rounds (calls 1 and 2-3), then sampling (call 4 on): Ctrl-C before the first chunk of the
    second tuning round, or of the sampling, ends keeps the tuning round run whole before it."""
    whole = convergence.sample(toy.KERNEL, STATIC, DATA, tuning_rounds=2, num_samples=CHUNK, seed=5, **OPTIONS)
    interrupt_at_call(monkeypatch, call)
    with pytest.warns(UserWarning, match=rf"kept the {kept} draws per chain run so far \(tuning draws\)"):
        cut = convergence.sample(toy.KERNEL, STATIC, DATA, tuning_rounds=2, num_samples=CHUNK, seed=5, **OPTIONS)
    assert cut.records["x"].shape == (2, kept) and not cut.converged
    assert cut.n_scans == CHUNK * (call - 1) and whole.n_scans == 4 * CHUNK


def test_interrupt_before_any_chunk_ends_propagates(monkeypatch):
    interrupt_at_call(monkeypatch, 1)
    with pytest.raises(KeyboardInterrupt):
        convergence.sample(toy.KERNEL, STATIC, DATA, tuning_rounds=0, num_samples=CHUNK, seed=6, **OPTIONS)


@pytest.fixture
def sigint_as_in_a_terminal():
    """Python's SIGINT handler for the test, also where the suite was started with SIGINT ignored (a
    background job's)."""
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    yield
    signal.signal(signal.SIGINT, previous)


def sigint_at_call(monkeypatch, n: int, times: int = 1) -> None:
    """SIGINT sent to this process ``times`` times right after ``tempering.run_scans``'s ``n``-th call from now
    returns, as Ctrl-C pressed while that chunk ran would be: the handler runs at the next bytecode."""
    calls = []
    run_scans = tempering.run_scans

    def signalling(*args, **kwargs):
        result = run_scans(*args, **kwargs)
        calls.append(None)
        if len(calls) == n:
            for _ in range(times):
                signal.raise_signal(signal.SIGINT)
        return result

    monkeypatch.setattr(tempering, "run_scans", signalling)


def test_sigint_during_a_chunk_ends_the_run_after_it_with_that_chunk_kept(monkeypatch, sigint_as_in_a_terminal):
    """SIGINT while the 3rd of 4 chunks runs: the run ends after that chunk and keeps it (the first 3 chunks
    of the uninterrupted run), and Python's handler is back afterwards. Control: with a SIGINT handler of
    the caller's own, the run leaves it alone, the handler sees the signal, and all 4 chunks run."""
    assert threading.current_thread() is threading.main_thread()  # where signal handlers run
    whole = convergence.sample(toy.KERNEL, STATIC, DATA, tuning_rounds=0, num_samples=4 * CHUNK, seed=3, **OPTIONS)
    sigint_at_call(monkeypatch, 3)
    with pytest.warns(UserWarning, match=r"kept the 96 draws per chain run so far"):
        cut = convergence.sample(toy.KERNEL, STATIC, DATA, tuning_rounds=0, num_samples=4 * CHUNK, seed=3, **OPTIONS)
    np.testing.assert_array_equal(cut.records["x"], whole.records["x"][:, : 3 * CHUNK])
    assert not cut.converged and signal.getsignal(signal.SIGINT) is signal.default_int_handler

    seen = []
    sigint_at_call(monkeypatch, 3)
    previous = signal.signal(signal.SIGINT, lambda signum, frame: seen.append(signum))
    try:
        own = convergence.sample(toy.KERNEL, STATIC, DATA, tuning_rounds=0, num_samples=4 * CHUNK, seed=3, **OPTIONS)
    finally:
        signal.signal(signal.SIGINT, previous)
    assert seen == [signal.SIGINT] and own.records["x"].shape == (2, 4 * CHUNK)


def test_sigint_between_tuning_rounds_keeps_the_round_run(monkeypatch, sigint_as_in_a_terminal):
    """SIGINT while the schedule is retuned after the first tuning round (no chunk in flight, where a
    KeyboardInterrupt would leave no handler to keep the draws): the run returns that round's draws."""
    retuned = convergence._retuned

    def signalling(*args):
        signal.raise_signal(signal.SIGINT)
        return retuned(*args)

    monkeypatch.setattr(convergence, "_retuned", signalling)
    with pytest.warns(UserWarning, match=rf"kept the {CHUNK} draws per chain run so far \(tuning draws\)"):
        cut = convergence.sample(toy.KERNEL, STATIC, DATA, tuning_rounds=2, num_samples=CHUNK, seed=5, **OPTIONS)
    assert cut.records["x"].shape == (2, CHUNK) and cut.n_scans == CHUNK


def test_a_second_sigint_aborts_without_the_draws(monkeypatch, sigint_as_in_a_terminal):
    sigint_at_call(monkeypatch, 2, times=2)
    with pytest.raises(KeyboardInterrupt):
        convergence.sample(toy.KERNEL, STATIC, DATA, tuning_rounds=0, num_samples=4 * CHUNK, seed=3, **OPTIONS)
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler


# ---------------------------------------------------------------- checkpoints: stop, resume, same draws


def stop_after_calls(monkeypatch, n: int) -> type[Exception]:
    """``tempering.run_scans`` dying (as a killed process would) on its ``n``-th call from now: an exception
    that the engine does not catch, so only the checkpoint file survives."""

    class Killed(Exception):
        pass

    raise_at_call(monkeypatch, n, Killed)
    return Killed


KERNELS = {"fixed-proposal": (toy.KERNEL, DATA), "learned-proposal": (toy.LEARNING_KERNEL, toy.jump_data(DATA))}


@pytest.mark.parametrize("kernel", KERNELS)
@pytest.mark.parametrize("stop_at", [2, 3, 4, 6], ids=["second-tuning-round", "mid-tuning-round", "sampling", "mid-sampling"])
def test_a_run_stopped_and_resumed_from_its_checkpoint_gives_the_same_draws(monkeypatch, tmp_path, stop_at, kernel):
    """Two tuning rounds (1 then 2 chunks: calls 1, 2-3) and 3 sampling chunks (calls 4-6), stopped at the
    start or in the middle of a tuning round or of sampling: resuming from the checkpoint runs only the
    chunks not yet run and gives the draws, schedule, ladder and learned proposal of the run done in one
    go, and removes the checkpoint."""
    kernel, data = KERNELS[kernel]
    options = dict(tuning_rounds=2, num_samples=3 * CHUNK, seed=7, **OPTIONS)
    whole = convergence.sample(kernel, STATIC, data, **options)
    path = tmp_path / "run.ckpt"
    checkpoint = Checkpoint(path, every_seconds=0)
    killed = stop_after_calls(monkeypatch, stop_at)
    with pytest.raises(killed):
        convergence.sample(kernel, STATIC, data, checkpoint=checkpoint, **options)
    assert path.exists()
    monkeypatch.undo()
    calls = []
    run_scans = tempering.run_scans
    monkeypatch.setattr(tempering, "run_scans", lambda *a, **k: calls.append(None) or run_scans(*a, **k))
    resumed = convergence.sample(kernel, STATIC, data, checkpoint=checkpoint, **options)
    assert len(calls) == 6 - (stop_at - 1)  # only the chunks the stopped run had not finished
    np.testing.assert_array_equal(resumed.records["x"], whole.records["x"])
    np.testing.assert_array_equal(resumed.schedule, whole.schedule)
    assert resumed.proposal == whole.proposal
    np.testing.assert_array_equal(resumed.ladder.rng_key, whole.ladder.rng_key)
    assert resumed.n_scans == whole.n_scans and not path.exists()


def test_a_checkpoint_of_other_settings_is_refused(monkeypatch, tmp_path):
    path = tmp_path / "run.ckpt"
    options = dict(tuning_rounds=0, num_samples=2 * CHUNK, **OPTIONS)
    killed = stop_after_calls(monkeypatch, 2)
    with pytest.raises(killed):
        convergence.sample(toy.KERNEL, STATIC, DATA, seed=1, checkpoint=Checkpoint(path, 0), **options)
    monkeypatch.undo()
    with pytest.raises(ValueError, match="^checkpoint: .* another kernel, data or sampling settings"):
        convergence.sample(toy.KERNEL, STATIC, DATA, seed=2, checkpoint=path, **options)
    with pytest.raises(ValueError, match="^checkpoint: every_seconds"):
        Checkpoint(path, every_seconds=-1)


def test_a_checkpoint_s_fingerprint_reads_the_kernel_s_functions():
    """The same kernel gives the same fingerprint; another step function (the negative control) makes another
    run."""
    from interpretable_zoo.inference.checkpoint import fingerprint

    settings = dict.fromkeys(("num_chains", "seed", "n_temperatures", "max_temperatures", "num_samples",
                              "tuning_rounds", "scans_per_chunk", "max_draws", "target"), 1)
    digest = fingerprint(toy.KERNEL, STATIC, DATA, settings)
    assert fingerprint(toy.KERNEL._replace(), STATIC, DATA, settings) == digest
    assert fingerprint(toy.KERNEL._replace(step=toy.KERNEL.init), STATIC, DATA, settings) != digest


def test_a_checkpoint_of_another_layout_a_damaged_one_or_no_checkpoint_is_refused_by_name(monkeypatch, tmp_path):
    from interpretable_zoo.inference import checkpoint

    options = dict(tuning_rounds=0, num_samples=2 * CHUNK, **OPTIONS)
    killed = stop_after_calls(monkeypatch, 2)
    with pytest.raises(killed):
        convergence.sample(toy.KERNEL, STATIC, DATA, seed=1, checkpoint=Checkpoint(tmp_path / "run.ckpt", 0), **options)
    monkeypatch.undo()
    written = (tmp_path / "run.ckpt").read_bytes()
    checkpoint._write_atomically(tmp_path / "old.ckpt", ("interpretable-zoo checkpoint", 1), {"a": 1})
    (tmp_path / "other.ckpt").write_bytes(pickle.dumps({"a": 1}))
    (tmp_path / "cut.ckpt").write_bytes(written[:-10])
    for name, message in [
        ("old.ckpt", "has the layout 1 of another version"),
        ("other.ckpt", "is not a checkpoint of this package"),
        ("cut.ckpt", "is truncated"),
    ]:
        with pytest.raises(ValueError, match=f"^checkpoint: .*{name} {message}"):
            convergence.sample(toy.KERNEL, STATIC, DATA, seed=1, checkpoint=tmp_path / name, **options)


def scripted_diagnose(verdicts, killed=None):
    """A ``convergence.diagnose`` answering its calls in turn from ``verdicts``: "pass" (R-hat 1, ESS 1000),
    "fail" (R-hat 2) or "kill" (raises ``killed``, as a process dying in the test would)."""
    calls = iter(verdicts)

    def diagnose(summaries):
        verdict = next(calls)
        if verdict == "kill":
            raise killed
        return {"x": (1.0 if verdict == "pass" else 2.0, 1000.0)}

    return diagnose


def test_a_run_stopped_between_a_checkpoint_and_its_convergence_test_resumes_to_the_same_end(monkeypatch, tmp_path):
    """Sampling rounds of 1 and 2 chunks; the test after the 1st chunk of round 2 passes, so the run ends
    there. A run that dies in that test (its checkpoint already written after the chunk) resumes by
    repeating the test on the chunks it restored: it runs no chunk and ends where the whole run did."""
    options = dict(tuning_rounds=0, seed=9, target=convergence.ConvergenceTarget(max_seconds=None), **OPTIONS)
    monkeypatch.setattr(convergence, "diagnose", scripted_diagnose(["fail", "pass"]))
    whole = convergence.sample(toy.KERNEL, STATIC, DATA, **options)
    assert whole.converged and whole.n_scans == 2 * CHUNK

    class Killed(Exception):
        pass

    path = tmp_path / "run.ckpt"
    monkeypatch.setattr(convergence, "diagnose", scripted_diagnose(["fail", "kill"], Killed))
    with pytest.raises(Killed):
        convergence.sample(toy.KERNEL, STATIC, DATA, checkpoint=Checkpoint(path, every_seconds=0), **options)
    assert path.exists()
    monkeypatch.setattr(convergence, "diagnose", scripted_diagnose(["pass"]))
    calls = []
    run_scans = tempering.run_scans
    monkeypatch.setattr(tempering, "run_scans", lambda *a, **k: calls.append(None) or run_scans(*a, **k))
    resumed = convergence.sample(toy.KERNEL, STATIC, DATA, checkpoint=Checkpoint(path, every_seconds=0), **options)
    assert calls == [] and resumed.converged and resumed.n_scans == whole.n_scans
    np.testing.assert_array_equal(resumed.records["x"], whole.records["x"])
    assert not path.exists()


# ---------------------------------------------------------------- chunks bounded in time


@pytest.mark.parametrize("fixed", [True, False], ids=["num_samples", "until-converged"])
def test_chunks_cut_to_single_scans_give_the_draws_of_whole_chunks(monkeypatch, fixed):
    """A chunk runs at most ``CHUNK_SECONDS`` at the measured pace, so that Ctrl-C is prompt; with that
    bound at 0 every chunk is one scan, and the run (tuning, sampling and, until converged, its tests)
    gives the draws, schedule and ladder of the run in whole chunks: chunk sizes change no decision."""
    target = convergence.ConvergenceTarget(target_rhat=1.05, min_ess=100, max_seconds=None)
    options = dict(OPTIONS, tuning_rounds=2, seed=8, **({"num_samples": 3 * CHUNK} if fixed else {"target": target}))
    whole = convergence.sample(toy.KERNEL, STATIC, DATA, **options)
    monkeypatch.setattr(convergence, "FIRST_CHUNK_SCANS", 1)
    monkeypatch.setattr(convergence, "CHUNK_SECONDS", 0.0)
    sizes = []
    run_scans = tempering.run_scans
    monkeypatch.setattr(tempering, "run_scans", lambda *a, **k: sizes.append(a[5]) or run_scans(*a, **k))
    cut = convergence.sample(toy.KERNEL, STATIC, DATA, **options)
    assert set(sizes) == {1} and len(sizes) == whole.n_scans
    np.testing.assert_array_equal(cut.records["x"], whole.records["x"])
    np.testing.assert_array_equal(cut.schedule, whole.schedule)
    np.testing.assert_array_equal(cut.ladder.rng_key, whole.ladder.rng_key)
    np.testing.assert_array_equal(cut.round_trip_rate, whole.round_trip_rate)
    assert (cut.barrier, cut.log_evidence, cut.log_evidence_se) == (whole.barrier, whole.log_evidence,
                                                                    whole.log_evidence_se)
    assert cut.converged == whole.converged and (fixed or whole.converged)


# ---------------------------------------------------------------- Ctrl-C delivered to a process

INTERRUPTED_FIT = """
import signal, sys, warnings
signal.signal(signal.SIGINT, signal.default_int_handler)  # as in a terminal, also where SIGINT was ignored
import numpy as np
import interpretable_zoo as iz
from interpretable_zoo.datasets.planted_rule_lists import planted_rule_lists

model, num_samples = sys.argv[1], None if sys.argv[2] == "converged" else int(sys.argv[2])
if model == "brl":
    data = planted_rule_lists(seed=0)
    # untempered scans of 20,000 steps: about 0.1 s each, so that a whole chunk (128 scans) lasts over 5 s
    fit = lambda **options: iz.fit_brl(data.X, data.y, antecedents=data.extras["antecedents"], num_chains=2,
                                       n_temperatures=1, num_warmup=0, steps_per_scan=20000, progress_bar=False,
                                       **options)
else:
    X = np.random.default_rng(0).integers(0, 3, size=(40, 8))
    fit = lambda **options: iz.fit_bcm(X, 3, num_chains=2, progress_bar=False, **options)
fit(num_samples=4)  # compiles the programs of the fit below (the same seed tunes the same ladders)
print("sampling", flush=True)
with warnings.catch_warnings(record=True):
    result = fit(num_samples=num_samples, max_seconds=10**6)
print("kept", result.run.summaries["log_joint"].shape[1], "draws per chain", flush=True)
"""


def run_and_interrupt(argv: list[str], ready: str, seconds_after: float = 3.0):
    """Start ``argv``, wait until its output matches ``ready`` (at most 300 s), send SIGINT ``seconds_after``
    later; returns (seconds from SIGINT to exit, exit status, stdout and stderr)."""
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    process = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env)
    output = []
    reader = threading.Thread(target=lambda: output.extend(iter(lambda: process.stdout.read(1), "")), daemon=True)
    reader.start()
    deadline = time.monotonic() + 300
    while not re.search(ready, "".join(output)) and process.poll() is None and time.monotonic() < deadline:
        time.sleep(0.1)
    assert process.poll() is None, "".join(output)
    time.sleep(seconds_after)
    sent = time.monotonic()
    process.send_signal(signal.SIGINT)
    try:
        status = process.wait(timeout=60)
    finally:
        process.kill()
    elapsed = time.monotonic() - sent
    reader.join(timeout=10)
    return elapsed, status, "".join(output)


@pytest.mark.parametrize("model, num_samples", [("brl", "1000000"), ("bcm", "1000000"), ("bcm", "converged")])
def test_ctrl_c_ends_a_fit_within_seconds_with_the_draws_so_far(model, num_samples):
    """SIGINT to a process in a fit of a million scans (or until converged, with a budget of days): the fit
    returns the draws run so far and the process ends within 5 s. BRL's scans of 20,000 steps make a whole
    chunk of 128 scans last longer than that, so only chunks cut short in time pass."""
    elapsed, status, output = run_and_interrupt([sys.executable, "-c", INTERRUPTED_FIT, model, num_samples],
                                                ready="sampling")
    kept = re.search(r"kept (\d+) draws per chain", output)
    assert status == 0 and kept and int(kept[1]) > 0, output
    assert elapsed < 5, (elapsed, output)


def test_ctrl_c_ends_izoo_fit_within_seconds_and_writes_the_draws_so_far(tmp_path):
    """`izoo fit` with --num-samples of a million: SIGINT once the progress bar counts scans ends it within 5 s,
    with the result of the draws so far saved."""
    data = tmp_path / "table.csv"
    rows = np.random.default_rng(0).integers(0, 3, size=(40, 8))
    data.write_text("\n".join([",".join(f"f{j}" for j in range(8))] + [",".join(map(str, row)) for row in rows]))
    out = tmp_path / "fit.pkl"
    cli = "import signal; signal.signal(signal.SIGINT, signal.default_int_handler); " \
          "import sys; from interpretable_zoo.cli import main; sys.exit(main())"
    argv = [sys.executable, "-c", cli, "fit", "bcm", "--data", str(data), "--n-clusters", "3", "--num-chains", "2",
            "--num-samples", "1000000", "--progress", "--out", str(out)]
    elapsed, status, output = run_and_interrupt(argv, ready=r"[1-9]\d* scans")
    assert status == 0 and out.exists(), output
    assert elapsed < 5, (elapsed, output)
    assert iz.load_result(out).run.summaries["log_joint"].shape[1] > 0
