"""The parallel-tempering engine and the run-until-converged driver on a bimodal lattice target whose
tempered posteriors and marginal likelihood are known exactly (tests/toy_tempering.py)."""

import warnings

import numpy as np
import pytest
import toy_tempering as toy
from compile_events import programs_compiled

from interpretable_zoo.diagnostics import exact_gof_test
from interpretable_zoo.inference import convergence, memory, tempering

# a fixed ladder: the engine's draws must be exact whatever the schedule
FIXED = dict(num_chains=4, n_temperatures=6, num_samples=6000, tuning_rounds=2, scans_per_chunk=512, progress_bar=False)


def tempered_run(data, seed=0, **options):
    static = toy.LatticeStatic(int(data.log_prior.shape[0]))
    return convergence.sample(toy.KERNEL, static, data, seed=seed, **{**FIXED, **options})


@pytest.fixture(scope="module")
def bimodal():
    return toy.bimodal()


@pytest.fixture(scope="module")
def run(bimodal):
    return tempered_run(bimodal[1])


def test_posterior_rung_matches_the_exact_posterior(bimodal, run):
    _, _, exact, _ = bimodal
    result = exact_gof_test(run.records["x"], exact, statistics={
        "left mode": (np.arange(exact.size) < exact.size / 2).astype(float),
        "x": np.arange(exact.size, dtype=float),
        "at a mode": np.isin(np.arange(exact.size), [2, exact.size - 3]).astype(float),
    })
    assert result.p_value > 0.01, result


def test_wrong_swap_rule_fails_the_same_test(bimodal):
    """Negative control: the states report twice their log-likelihood, so the swaps (and only they)
    target the wrong tempered distributions."""
    _, data, exact, _ = bimodal
    wrong = tempered_run(data._replace(report_scale=np.float64(2.0)))
    result = exact_gof_test(wrong.records["x"], exact, statistics={
        "left mode": (np.arange(exact.size) < exact.size / 2).astype(float),
        "x": np.arange(exact.size, dtype=float),
        "at a mode": np.isin(np.arange(exact.size), [2, exact.size - 3]).astype(float),
    })
    assert result.p_value < 1e-3, result


def test_stepping_stone_recovers_the_log_marginal_likelihood(bimodal, run):
    _, _, _, log_evidence = bimodal
    assert 0 < run.log_evidence_se < 0.05
    assert abs(run.log_evidence - log_evidence) < 4 * run.log_evidence_se


def test_barrier_round_trips_and_swap_acceptance(run):
    assert run.n_temperatures == 6 and run.schedule[0] == 0.0 and run.schedule[-1] == 1.0
    assert np.all(np.diff(run.schedule) > 0)
    assert 0.3 < run.barrier < 5.0
    # NRPT's round-trip rate is at most 1 / (2 + 2 Lambda) and near it with a tuned schedule
    assert 0.2 / (2 + 2 * run.barrier) < run.round_trip_rate <= 1.05 / (2 + 2 * run.barrier)
    assert run.swap_accept.shape == run.summaries["log_joint"].shape
    assert 0.0 < run.swap_accept.mean() < 1.0


def exact_acceptance(data, beta) -> float:
    """The lattice move's mean acceptance probability at stationarity of pi_beta: its proposal x +- 1 (1/2
    each, rejected off the lattice), accepted with min(1, pi_beta(x') / pi_beta(x))."""
    log_pi = np.asarray(data.log_prior, float) + beta * np.asarray(data.log_likelihood, float)
    pi = np.exp(log_pi - np.logaddexp.reduce(log_pi))
    right = log_pi[1:] - log_pi[:-1]  # log pi_beta(x + 1) / pi_beta(x)
    return float(0.5 * (pi[:-1] @ np.minimum(1.0, np.exp(right)) + pi[1:] @ np.minimum(1.0, np.exp(-right))))


def test_each_rung_reports_the_acceptance_of_its_own_tempered_target(bimodal, run):
    """The kernel's info (the lattice move accepted or not), averaged per rung over the last round's 4 x 6000
    scans, is the move's exact acceptance at that rung's beta, from 0.86 at the prior to 0.10 at the
    posterior; the same rates attributed to the rungs in reverse order fail the same tolerance."""
    _, data, _, _ = bimodal
    exact = np.array([exact_acceptance(data, beta) for beta in run.schedule])
    rates = run.move_rates["move"]
    assert rates.shape == (run.n_temperatures,)
    np.testing.assert_allclose(rates, exact, atol=0.02)
    assert np.abs(rates[::-1] - exact).max() > 0.5


def test_tuned_schedule_equalises_rejection():
    """Algorithm 4 of Syed et al.: the new rungs split the cumulative barrier into equal steps."""
    statistics = tempering.RoundStatistics(
        rejection=np.array([90.0, 10.0, 0.0]), attempts=np.full(3, 100.0),
        log_stepping_stone=np.zeros((2, 3)), batch_scans=np.ones(2), round_trips=0, n_scans=1,
        move_rates={},
    )
    schedule = tempering.tuned_schedule(np.array([0.0, 0.25, 0.5, 1.0]), statistics, 5)
    np.testing.assert_allclose(schedule, [0.0, 0.25 * 0.25 / 0.9, 0.25 * 0.5 / 0.9, 0.25 * 0.75 / 0.9, 1.0], rtol=1e-6)
    assert [tempering.rungs_for_barrier(b) for b in (0.1, 1.0, 4.0, 6.0, 40.0)] == [2, 2, 8, 16, 32]


@pytest.mark.parametrize(
    "tuning_rounds, rungs, tuning_scans",
    [
        # the number of rungs kept at the second round (the first is never trusted): tuning ends there
        ("auto", [8], 3),
        # 8 -> 16 at the first round, kept at the second
        ("auto", [16], 3),
        # 8 -> 16 -> 8 -> 8: kept at the third round
        ("auto", [16, 8, 8], 7),
        # the number of rungs changes every round (8 -> 4 -> 8 -> ...): the four rounds of "auto"
        ("auto", [4, 8], 15),
        # a fixed number of rounds is always run whole
        (3, [8], 7),
    ],
    ids=["kept", "changed once", "kept late", "always changed", "fixed"],
)
def test_auto_tuning_ends_once_a_round_keeps_the_number_of_rungs(bimodal, monkeypatch, tuning_rounds, rungs,
                                                                 tuning_scans):
    """Tuning rounds of 1, 2, 4, 8 chunks from 8 rungs; the number of rungs asked for after each round is
    stubbed call by call (the values cycling)."""
    calls = [0]

    def rungs_asked(*_, **__):
        calls[0] += 1
        return rungs[(calls[0] - 1) % len(rungs)]

    monkeypatch.setattr(tempering, "rungs_for_barrier", rungs_asked)
    result = convergence.sample(toy.KERNEL, toy.LatticeStatic(12), bimodal[1], num_chains=2, seed=0,
                                tuning_rounds=tuning_rounds, scans_per_chunk=8, num_samples=8, progress_bar=False)
    assert result.n_scans == 8 * tuning_scans + 8


def test_untempered_chains_disagree_and_say_so(bimodal):
    """One rung: chains started in different modes stay there; the run warns with its numbers. (A short
    budget: however fast the machine, few enough scans run that no chain crosses to the other mode.)"""
    _, data, _, _ = bimodal
    target = convergence.ConvergenceTarget(max_seconds=0.3)
    with pytest.warns(UserWarning, match="NOT converged: worst R-hat"):
        stuck = convergence.sample(toy.KERNEL, toy.LatticeStatic(12), data, num_chains=4, seed=0, n_temperatures=1,
                                   target=target, progress_bar=False)
    assert not stuck.converged
    assert stuck.diagnostics["x"][0] > 1.1
    assert "round trips" not in stuck.message()


def _scripted_clock(monkeypatch, seconds_per_scan: float, first_chunk_seconds: float = 0.0):
    """The clock that ``inference.convergence`` reads, moving ``seconds_per_scan`` per scan run, only while
    scanning, and ``first_chunk_seconds`` more in the first chunk (a cold compile); returns it ([seconds])."""
    clock = [0.0]
    run_scans = tempering.run_scans

    def scans_on_the_clock(kernel, static, data, ladder, schedule, n_scans, **options):
        clock[0] += seconds_per_scan * n_scans + (first_chunk_seconds if clock[0] == 0.0 else 0.0)
        return run_scans(kernel, static, data, ladder, schedule, n_scans, **options)

    monkeypatch.setattr(tempering, "run_scans", scans_on_the_clock)
    monkeypatch.setattr(tempering, "now", lambda: clock[0])
    return clock


def _untempered_run_on_a_scripted_clock(bimodal, monkeypatch, tuning_rounds: int, max_seconds: float):
    """An untempered run (it never converges) in chunks of 100 scans, on a clock that moves 0.01 s per scan
    and only while scanning; returns the run and the clock's final time."""
    clock = _scripted_clock(monkeypatch, 0.01)
    _, data, _, _ = bimodal
    with pytest.warns(UserWarning, match="NOT converged"):
        stuck = convergence.sample(toy.KERNEL, toy.LatticeStatic(12), data, num_chains=4, seed=0, n_temperatures=1,
                                   tuning_rounds=tuning_rounds, scans_per_chunk=100, progress_bar=False,
                                   target=convergence.ConvergenceTarget(max_seconds=max_seconds))  # fmt: skip
    return stuck, clock[0]


def test_a_round_that_reaches_the_budget_stops_within_a_scan_of_it(bimodal, monkeypatch):
    """A budget of 37.055 s: rounds of 100, 100, 200, ..., 1600 scans end at 32 s, and the round of 3200
    (the sixth of sampling) runs five chunks of 100, the 5 scans that fit and the one that crosses the
    deadline, not a sixth chunk of 100 (to 38 s)."""
    stuck, seconds = _untempered_run_on_a_scripted_clock(bimodal, monkeypatch, tuning_rounds=1, max_seconds=37.055)
    assert stuck.n_scans == 3706 and seconds == pytest.approx(37.06)
    assert (stuck.budget_cut, stuck.budget_cut_round) == ("sampling", 6)
    assert stuck.message().endswith("; the time budget ended during sampling round 6")


def test_a_budget_that_ends_a_tuning_round_ends_the_run_there(bimodal, monkeypatch):
    """Tuning rounds of 100 and 200 scans and a budget of 2.555 s: the second round, at the first round's
    pace, runs 100 scans, the 55 that fit and one more; its 156 draws are the result, not converged."""
    stuck, _ = _untempered_run_on_a_scripted_clock(bimodal, monkeypatch, tuning_rounds=2, max_seconds=2.555)
    assert stuck.n_scans == 100 + 156
    assert stuck.summaries["log_joint"].shape == (4, 156)
    assert (stuck.budget_cut, stuck.budget_cut_round) == ("tuning", 2)
    assert "the time budget ended during tuning round 2 of at most 2 (the draws are that round's)" in stuck.message()


@pytest.mark.parametrize("num_samples, warns", [(603, True), (602, False)])
def test_a_fixed_length_run_projected_to_run_long_says_so_from_its_second_chunk(bimodal, monkeypatch, num_samples,
                                                                               warns):
    """On a clock of 1 s a scan, with a cold compile of 1,000 s in the first chunk (1 scan, which alone would
    project (num_samples - 1) x 1,001 s): the second chunk (1 scan, at the first one's pace) projects the
    num_samples - 2 scans left at 1 s each, a warning past LONG_RUN_SECONDS = 600 s and none at it."""
    _scripted_clock(monkeypatch, 1.0, first_chunk_seconds=1000.0)
    _, data, _, _ = bimodal
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        convergence.sample(toy.KERNEL, toy.LatticeStatic(12), data, num_chains=2, seed=0, n_temperatures=1,
                           tuning_rounds=0, scans_per_chunk=100, num_samples=num_samples, progress_bar=False)
    projections = [str(w.message) for w in caught if "projected" in str(w.message)]
    expected = ["sampling: num_samples=603 is projected to run 10 min more, 601 scans at 1 s a scan (1 rung x 2 "
                "chains), as timed on its last chunk. Ctrl-C ends it within about 2 s and keeps the draws so far."]
    assert projections == (expected if warns else [])


def test_durations_read_in_the_unit_that_suits_them():
    assert [convergence.format_seconds(s) for s in (0.0123, 4.56, 601.0, 7260.0)] == ["12.3 ms", "4.56 s", "10 min",
                                                                                     "2 h 01 min"]


@pytest.fixture(scope="module")
def converged_auto(bimodal):
    """A default auto-tempered run that converges well within its budget."""
    _, data, _, _ = bimodal
    return convergence.sample(toy.KERNEL, toy.LatticeStatic(12), data, num_chains=4, seed=2, progress_bar=False,
                              target=convergence.ConvergenceTarget(max_seconds=120.0))


def test_auto_tempering_converges_and_stops(converged_auto):
    result = converged_auto
    assert result.converged and result.budget_cut is None
    assert result.round_trip_rate > 0
    assert f"({result.round_trip_rate:.3g} round trips per scan and chain)" in result.message()
    rhat, ess = convergence.worst(result.diagnostics)
    assert rhat <= 1.01 and ess >= 400
    assert 2 <= result.n_temperatures <= 8


def test_the_clock_moves_no_draw_of_a_run_within_its_budget(bimodal, converged_auto, monkeypatch):
    """Rounds count scans: on a clock 50 times slower (0.05 s per scan) whose first chunk also takes 1000 s
    (a cold compile on a busy machine), the run of ``converged_auto`` ends within a budget of 2000 s with
    its draws: its two tuning rounds end at 1038.4 s, past half the budget, where a rule that stopped
    tuning at half the budget would have stopped it after one round. A budget of 1030 s ends the slow run
    in its second tuning round (which ends at 1000 + 0.05 * 256 * 3 = 1038.4 s), and the run says so."""
    _, data, _, _ = bimodal
    clock = _scripted_clock(monkeypatch, 0.05, first_chunk_seconds=1000.0)
    slow = convergence.sample(toy.KERNEL, toy.LatticeStatic(12), data, num_chains=4, seed=2, progress_bar=False,
                              target=convergence.ConvergenceTarget(max_seconds=2000.0))
    assert slow.converged and slow.budget_cut is None and 1000.0 < clock[0] < 2000.0
    assert slow.n_scans == converged_auto.n_scans
    np.testing.assert_array_equal(slow.records["x"], converged_auto.records["x"])

    clock[0] = 0.0
    with pytest.warns(UserWarning, match="ended during tuning round 2 of at most 4"):
        cut = convergence.sample(toy.KERNEL, toy.LatticeStatic(12), data, num_chains=4, seed=2, progress_bar=False,
                                 target=convergence.ConvergenceTarget(max_seconds=1030.0))
    assert not cut.converged and (cut.budget_cut, cut.budget_cut_round) == ("tuning", 2)
    assert cut.n_scans < converged_auto.n_scans


def test_same_seed_same_draws_and_no_compilation_on_refit(bimodal):
    _, data, _, _ = bimodal
    first = tempered_run(data, seed=5, num_samples=700)
    with programs_compiled() as compiles:
        again = tempered_run(data, seed=5, num_samples=700)
        other = tempered_run(toy.bimodal(slope=2.0, tilt=-0.2)[1], seed=6, num_samples=700)
    assert compiles == []
    np.testing.assert_array_equal(first.records["x"], again.records["x"])
    assert not np.array_equal(first.records["x"], other.records["x"])


def test_a_chunk_run_in_parts_runs_one_program(bimodal, run):
    """A chunk's first part starts from ``no_statistics`` and its later parts from the sums so far: both
    calls take arguments of the same types, so that the chunk's one program serves both (the control:
    the first call of these shapes compiles it)."""
    _, data, _, _ = bimodal
    static = toy.LatticeStatic(int(data.log_prior.shape[0]))
    with programs_compiled() as compiles:
        _, first_part, _ = tempering.run_scans(toy.KERNEL, static, data, run.ladder, run.schedule, 1, capacity=3)
    assert compiles == ["jit(ladder_scans)"]
    with programs_compiled() as compiles:
        tempering.run_scans(toy.KERNEL, static, data, run.ladder, run.schedule, 2, capacity=3, statistics=first_part)
    assert compiles == []


def test_extend_continues_from_the_last_state(bimodal):
    _, data, _, _ = bimodal
    run = tempered_run(data, seed=7, num_samples=512)
    longer = convergence.extend(run, toy.KERNEL, toy.LatticeStatic(12), data, num_samples=512)
    assert longer.n_scans == run.n_scans + 512
    np.testing.assert_array_equal(longer.schedule, run.schedule)
    # the continuation is the same chain as one longer run of the same kernel from the same state
    direct = tempering.run_scans(toy.KERNEL, toy.LatticeStatic(12), data, run.ladder, run.schedule, 512)
    np.testing.assert_array_equal(longer.records["x"], np.swapaxes(np.asarray(direct[2][0]["x"]), 0, 1))


def test_a_learned_proposal_reaches_the_kernel_keeps_the_posterior_exact_and_is_carried_to_extend(bimodal, monkeypatch,
                                                                                                    whole_chunks):
    """A kernel whose proposal the engine adapts from round to round (toy LEARNING_KERNEL: the share of
    two-site jumps): every round runs with what the rounds before it taught, extend continues with the
    run's last one, and the posterior rung still matches the exact posterior."""
    static, data, exact, _ = bimodal
    shares, learned = [], []
    run_scans, learn = tempering.run_scans, toy.LEARNING_KERNEL.learn_proposal

    def recording_learn(*args):
        learned.append(learn(*args))
        return learned[-1]

    kernel = toy.LEARNING_KERNEL._replace(learn_proposal=recording_learn)
    monkeypatch.setattr(tempering, "run_scans", lambda k, st, d, *a, **kw: shares.append(float(d.jump_share))
                        or run_scans(k, st, d, *a, **kw))
    run = convergence.sample(kernel, static, toy.jump_data(data), seed=0, **FIXED)
    chunks = -(-FIXED["num_samples"] // FIXED["scans_per_chunk"])
    # tuning rounds of 1 and 2 chunks, then the sampling round: each with the share the round before taught
    assert len(learned) == 2 and len(set(learned)) == 2
    assert shares == [0.0] + 2 * [pytest.approx(learned[0])] + chunks * [pytest.approx(learned[1])]
    assert run.proposal == learned[-1] and 0.1 <= run.proposal <= 0.55
    result = exact_gof_test(run.records["x"], exact, statistics={
        "left mode": (np.arange(exact.size) < exact.size / 2).astype(float),
        "x": np.arange(exact.size, dtype=float),
    })
    assert result.p_value > 0.01, result
    shares.clear()
    longer = convergence.extend(run, kernel, static, toy.jump_data(data), num_samples=FIXED["scans_per_chunk"])
    assert shares == [pytest.approx(run.proposal)] and longer.proposal == run.proposal


@pytest.mark.parametrize(
    "options, argument",
    [
        ({"num_chains": 0}, "num_chains"),
        ({"seed": -1}, "seed"),
        ({"n_temperatures": 0}, "n_temperatures"),
        ({"n_temperatures": "many"}, "n_temperatures"),
        ({"num_samples": 0}, "num_samples"),
        ({"scans_per_chunk": 2.5}, "scans_per_chunk"),
        ({"tuning_rounds": "some"}, "tuning_rounds"),
        ({"tuning_rounds": -1}, "tuning_rounds"),
    ],
)
def test_bad_arguments_are_named(bimodal, options, argument):
    with pytest.raises(ValueError, match=argument):
        tempered_run(bimodal[1], **options)


@pytest.mark.parametrize(
    "options, argument",
    [({"target_rhat": 0.99}, "target_rhat"), ({"min_ess": 0}, "min_ess"), ({"max_seconds": -1.0}, "max_seconds"),
     ({"target_rhat": float("nan")}, "target_rhat")],
)
def test_bad_convergence_targets_are_named(options, argument):
    with pytest.raises(ValueError, match=argument):
        convergence.ConvergenceTarget(**options)


def test_a_long_run_is_diagnosed_in_threads_as_it_would_be_in_turn(monkeypatch):
    """A fixed-length run judges every draw, so large windows are ranked in threads: the table is the
    one ranked summary by summary (continuous, tied and constant summaries, one with a trailing axis)."""
    rng = np.random.default_rng(3)
    summaries = {"walk": np.cumsum(rng.normal(size=(4, 40_000)), axis=1), "length": rng.integers(0, 6, (4, 40_000)),
                 "constant": np.ones((4, 40_000)), "pair": rng.normal(size=(4, 40_000, 2))}
    assert sum(value.size for value in summaries.values()) >= convergence.PARALLEL_DIAGNOSIS_DRAWS
    threaded = convergence.diagnose(summaries)
    monkeypatch.setattr(convergence, "PARALLEL_DIAGNOSIS_DRAWS", float("inf"))
    in_turn = convergence.diagnose(summaries)
    assert list(threaded.items()) == list(in_turn.items())
    assert list(threaded) == ["walk", "length", "constant", "pair[0]", "pair[1]"] and threaded["walk"][0] > 1.01


ROUND = 32  # scans in the first sampling round; rounds double


def stubbed_diagnose(passing_call):
    """A ``convergence.diagnose`` that passes (R-hat 1, ESS 1000) at its ``passing_call``-th call (from 0)
    and fails (R-hat 2) at every other; and the numbers of draws per chain it was given, call by call."""
    seen = []

    def diagnose(summaries):
        seen.append(next(iter(summaries.values())).shape[1])
        return {"x": (1.0, 1000.0) if len(seen) - 1 == passing_call else (2.0, 1000.0)}

    return diagnose, seen


R = ROUND
# the windows judged, call by call, with chunks of one first round (R scans; rounds double): round 1 alone
# (R); round 2 joined to round 1 after its first chunk (2R), then at its end joined (3R) and alone (2R);
# round 3 joined after each of its first three chunks (3R, 4R, 5R), then at its end joined (6R) and alone (4R)
WINDOWS = [R, 2 * R, 3 * R, 2 * R, 3 * R, 4 * R, 5 * R, 6 * R, 4 * R]


@pytest.mark.parametrize(
    "passing_call, kept, scans",
    [
        # the second round joined to the first passes at its end: stop there with both rounds' draws
        (2, 3 * R, 3 * R),
        # the third round joined to the second passes after two of its four chunks: stop there
        (5, 4 * R, 5 * R),
        # the third round joined to the second fails (the second still held the approach), alone it passes
        (8, 4 * R, 7 * R),
    ],
    ids=["joined", "after a chunk", "alone"],
)
def test_a_round_is_judged_after_every_chunk_joined_to_the_round_before_or_at_its_end_alone(
    bimodal, monkeypatch, passing_call, kept, scans
):
    diagnose, seen = stubbed_diagnose(passing_call)
    monkeypatch.setattr(convergence, "diagnose", diagnose)
    static = toy.LatticeStatic(int(bimodal[1].log_prior.shape[0]))
    result = convergence.sample(toy.KERNEL, static, bimodal[1], num_chains=2, n_temperatures=3, tuning_rounds=0,
                                scans_per_chunk=ROUND, target=convergence.ConvergenceTarget(max_seconds=None),
                                progress_bar=False)
    assert seen == WINDOWS[: passing_call + 1]
    assert result.converged and result.records["x"].shape[1] == kept and result.n_scans == scans


def test_a_long_window_is_tested_a_fixed_number_of_times_per_doubling():
    """Every chunk up to 16, then every 2nd chunk up to 32, every 4th up to 64: 8 tests per doubling."""
    due = [n for n in range(1, 65) if convergence._test_due(n)]
    assert due == [*range(1, 17), *range(18, 33, 2), *range(36, 65, 4)]
    assert sum(convergence._test_due(n) for n in range(1024, 2048)) == convergence.TESTS_PER_DOUBLING


def _ar1_chains(rng, n_chains, n_draws, phi):
    """``n_chains`` stationary AR(1) chains with lag-one correlation ``phi`` (all the same distribution)."""
    noise = rng.standard_normal((n_chains, n_draws))
    chains = np.empty_like(noise)
    chains[:, 0] = noise[:, 0] / np.sqrt(1 - phi**2)
    for t in range(1, n_draws):
        chains[:, t] = phi * chains[:, t - 1] + noise[:, t]
    return chains


def test_agreeing_slowly_mixing_chains_have_rhat_about_one_plus_chains_over_ess():
    """What :func:`convergence.ess_for_rhat` rests on: over 100 sets of 8 agreeing AR(1) chains (phi 0.9,
    bulk ESS about 420), the mean R-hat - 1 is within 20 % of the mean 8 / ESS. Negative control:
    independent draws (phi 0) have R-hat near 1 whatever their ESS (below half the same ratio)."""
    from interpretable_zoo.diagnostics import rank_statistics

    rng = np.random.default_rng(0)

    def excess_and_bound(phi):
        excess, bound = [], []
        for _ in range(100):
            chains = _ar1_chains(rng, 8, 1000, phi)
            excess.append(rank_statistics.rank_rhat(chains) - 1)
            bound.append(8 / rank_statistics.bulk_ess(chains))
        return np.mean(excess), np.mean(bound)

    excess, bound = excess_and_bound(0.9)
    assert 0.8 <= excess / bound <= 1.2, (excess, bound)
    assert convergence.ess_for_rhat(8, 1.01) == pytest.approx(800)
    excess, bound = excess_and_bound(0.0)
    assert excess / bound < 0.5, (excess, bound)


def _unconverged_warning(bimodal, num_chains: int, kernel=toy.KERNEL) -> str:
    """The warning of a 2-rung run of ``num_chains`` chains that a budget of 1 ms ends in its first round."""
    static = toy.LatticeStatic(int(bimodal[1].log_prior.shape[0]))
    with pytest.warns(UserWarning, match="NOT converged") as caught:
        convergence.sample(kernel, static, bimodal[1], num_chains=num_chains, n_temperatures=2, tuning_rounds=0,
                           scans_per_chunk=16, target=convergence.ConvergenceTarget(max_seconds=1e-3),
                           progress_bar=False)
    return str(caught[0].message)


@pytest.mark.parametrize("num_chains, rhat, ess, hint", [
    (8, 1.02, 1000.0, "8 chains reach R-hat 1.01 at a bulk ESS of about 800, more than min_ess"),
    (4, 1.02, 1000.0, None),  # 4 chains need about 400, which min_ess already asks
    (8, 1.005, 100.0, None),  # R-hat met: the ESS target is what failed
])
def test_the_unconverged_warning_says_how_much_ess_the_rhat_target_needs(bimodal, monkeypatch, num_chains, rhat,
                                                                          ess, hint):
    monkeypatch.setattr(convergence, "diagnose", lambda summaries: {"x": (rhat, ess)})
    message = _unconverged_warning(bimodal, num_chains)
    if hint is None:
        assert "chains / bulk ESS" not in message
    else:
        assert hint in message


@pytest.mark.parametrize("barrier, hint", [
    (3.0, "Lambda = 3.0 wants about 8 rungs, and each pair of its 2 rejects about 1.00 of its swaps; "
          "n_temperatures=8 runs that many, each scan costing about 4.0x as much. If the longer ladder measures a "
          "larger Lambda, its replicas have not settled on their rungs, and more rungs will not help."),
    (0.8, None),  # 2 Lambda rounds to 2 rungs: the ladder has what the barrier wants
])
def test_the_unconverged_warning_says_when_the_ladder_is_short_for_its_barrier(bimodal, monkeypatch, barrier, hint):
    """The barrier Lambda that the last round measured wants about 2 Lambda rungs (rounded to a power of two,
    as ``n_temperatures="auto"`` picks them); a run with fewer says how many, and what its pairs reject."""
    monkeypatch.setattr(tempering, "communication_barrier", lambda statistics: barrier)
    message = _unconverged_warning(bimodal, num_chains=4)
    if hint is None:
        assert "short for its barrier" not in message
    else:
        assert message.endswith(" The ladder is short for its barrier: " + hint)


def test_the_ladder_hint_of_usps_40_per_digit():
    """The barrier and ladder of convergence_bcm_usps40 (benchmarks/RESULTS.md): 32 rungs, the cap of
    n_temperatures="auto", for a Lambda of 28.5; 12 (the recipes') fits in 32."""
    hint = convergence._ladder_hint(28.5, 32)
    assert "Lambda = 28.5 wants about 64 rungs, and each pair of its 32 rejects about 0.92" in hint
    assert convergence._ladder_hint(12.0, 32) == "" and convergence._ladder_hint(28.5, 1) == ""


def numpy_asks_for_huge_pages() -> bool:
    """NumPy's switch of ``madvise(MADV_HUGEPAGE)`` for its large arrays, read by setting it and back."""
    value = memory._set_madvise_hugepage(True)
    memory._set_madvise_hugepage(value)
    return value


@pytest.mark.parametrize("before", [True, False])
def test_the_engine_joins_and_judges_its_draws_without_huge_pages_and_restores_numpy_s_switch(bimodal, monkeypatch,
                                                                                              before):
    """The records are joined and diagnosed with NumPy's huge pages off (``memory.small_pages``), in a run
    and in its extension; after either, and after a run that raises, NumPy's switch is as it was."""
    if memory._set_madvise_hugepage is None:
        pytest.skip("this NumPy has no switch for huge pages, and allocates as it always does")
    seen, diagnose = [], convergence.diagnose
    monkeypatch.setattr(convergence, "diagnose", lambda summaries: seen.append(numpy_asks_for_huge_pages())
                        or diagnose(summaries))
    initial = memory._set_madvise_hugepage(before)
    try:
        run = tempered_run(bimodal[1], num_samples=512)
        assert numpy_asks_for_huge_pages() is before
        convergence.extend(run, toy.KERNEL, toy.LatticeStatic(12), bimodal[1], num_samples=512)
        assert numpy_asks_for_huge_pages() is before
        with pytest.raises(ValueError, match="num_chains"):
            tempered_run(bimodal[1], num_chains=0)
        assert numpy_asks_for_huge_pages() is before
    finally:
        memory._set_madvise_hugepage(initial)
    assert len(seen) >= 2 and not any(seen)
