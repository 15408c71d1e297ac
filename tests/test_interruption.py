"""Ctrl-C during a tempered run keeps the draws of the chunks that finished (tests/toy_tempering.py's
lattice target): KeyboardInterrupt raised from inside the chunk loop, at a chosen call of ``run_scans``."""

import pickle

import numpy as np
import pytest
import toy_tempering as toy

from interpretable_zoo.inference import convergence, tempering
from interpretable_zoo.inference.checkpoint import Checkpoint

STATIC, DATA = toy.bimodal()[:2]
CHUNK = 32
OPTIONS = dict(num_chains=2, n_temperatures=4, scans_per_chunk=CHUNK, progress_bar=False)


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


def test_interrupt_before_any_chunk_ends_propagates(monkeypatch):
    interrupt_at_call(monkeypatch, 1)
    with pytest.raises(KeyboardInterrupt):
        convergence.sample(toy.KERNEL, STATIC, DATA, tuning_rounds=0, num_samples=CHUNK, seed=6, **OPTIONS)


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
