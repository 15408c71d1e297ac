"""Run a target kernel under parallel tempering until its chains agree (or a time budget ends).

The run is a sequence of rounds of doubling length, as in Pigeons.jl: the first ``tuning_rounds`` adapt
the tempering schedule (and, with ``n_temperatures="auto"``, the number of rungs) and are discarded (by
default up to four, fewer once a round after the first keeps the number of rungs); each later round
runs with the schedule tuned on the round before it, and is itself a valid MCMC run started where the
previous one stopped. A kernel that learns its proposal (``TargetKernel.learn_proposal``) runs every
round, tuning or sampling, with the proposal that the rounds before it taught; within a round it is
fixed. During a sampling round the label-free summaries of the posterior rung (the log joint and the
kernel's summaries) are checked: the run stops when every one has rank-normalised split R-hat <=
``target_rhat`` and bulk ESS >= ``min_ess`` (Vehtari et al. 2021; ArviZ's formulas), or when
``max_seconds`` have passed; the result keeps the draws judged, says which (``converged``), and warns
with the numbers when the budget ended first. :func:`sample` says which draws are judged and when, and
where the budget cuts. A fixed ``num_samples`` runs exactly that many scans after the tuning rounds
instead.

Scans run in compiled chunks of ``scans_per_chunk``; every chunk of a run, and of any later run of the
same shapes, reuses one compiled program. Tuning and sampling advance in rounds counted in scans, never in
seconds, so a run that converges within its budget gives the same draws for the same seed on any machine
load and device count; when the budget ends it, how far it got depends on the machine's speed.
"""

from __future__ import annotations

import contextlib
import math
import numbers
import sys
import warnings
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field

import jax
import numpy as np
import pandas as pd

from interpretable_zoo.diagnostics import rank_statistics
from interpretable_zoo.inference import interruption, memory, progress, tempering
from interpretable_zoo.inference.checkpoint import CheckpointWriter, as_checkpoint, fingerprint
from interpretable_zoo.inference.validation import check_positive_int, check_seed
from interpretable_zoo.machine import usable_cores

_COMPILE_SECONDS = [0.0]


def _count_compile_time(event: str, duration: float, **_) -> None:
    if event == "/jax/core/compile/backend_compile_duration":
        _COMPILE_SECONDS[0] += duration


jax.monitoring.register_event_duration_secs_listener(_count_compile_time)


def compile_seconds() -> float:
    """XLA compilation time of this process so far (seconds)."""
    return _COMPILE_SECONDS[0]


@dataclass(frozen=True)
class ConvergenceTarget:
    """When a run may stop: every label-free summary at R-hat <= ``target_rhat`` and bulk ESS >=
    ``min_ess``; ``max_seconds`` of wall time at most (None: no limit)."""

    target_rhat: float = 1.01
    min_ess: float = 400.0
    max_seconds: float | None = 300.0

    def __post_init__(self):
        if not _is_real(self.target_rhat) or not self.target_rhat >= 1.0:
            raise ValueError(f"target_rhat: must be a number >= 1, got {self.target_rhat!r}")
        if not _is_real(self.min_ess) or not self.min_ess > 0:
            raise ValueError(f"min_ess: must be a positive number, got {self.min_ess!r}")
        if self.max_seconds is not None and (not _is_real(self.max_seconds) or not self.max_seconds > 0):
            raise ValueError(f"max_seconds: must be a positive number or None, got {self.max_seconds!r}")


def _is_real(value) -> bool:
    return isinstance(value, numbers.Real) and not isinstance(value, bool) and math.isfinite(value)


MAX_DRAWS = 2000
"""Draws kept per chain by default (a longer round is thinned evenly to this many)."""

DEFAULT_TUNING_ROUNDS = 4
"""The most tuning rounds of a run with ``tuning_rounds="auto"``, which ends tuning after the second
round, or a later one, that keeps the number of rungs. The sampling rounds go on retuning the schedule
and relearning a kernel's proposal from their draws, so tuning only has to find the number of rungs and
leave the start behind; a learned proposal moves the barrier from round to round, so the rungs' places
on it do not settle within a few tuning rounds."""


def tuning_rounds_for(num_warmup: int | None, scans_per_chunk: int) -> int | str:
    """The number of tuning rounds (``scans_per_chunk`` * 2^r scans each) that covers ``num_warmup``
    scans; "auto" for None."""
    if num_warmup is None:
        return "auto"
    num_warmup = check_positive_int(num_warmup, "num_warmup", minimum=0)
    return math.ceil(math.log2(num_warmup / scans_per_chunk + 1))


def check_tuning_rounds(tuning_rounds) -> int | str:
    """``"auto"`` or an integer number of tuning rounds >= 0."""
    if isinstance(tuning_rounds, str):
        if tuning_rounds != "auto":
            raise ValueError(f"tuning_rounds: expected 'auto' or an integer >= 0, got {tuning_rounds!r}")
        return tuning_rounds
    return check_positive_int(tuning_rounds, "tuning_rounds", minimum=0)


def check_temperatures(n_temperatures) -> int | str:
    """``"auto"`` or an integer number of rungs >= 1 (1: no tempering)."""
    if isinstance(n_temperatures, str):
        if n_temperatures != "auto":
            raise ValueError(f"n_temperatures: expected 'auto' or an integer >= 1, got {n_temperatures!r}")
        return n_temperatures
    return check_positive_int(n_temperatures, "n_temperatures")


STATE_COPIES = 3
"""Copies of every replica's state that a compiled chunk holds at once (the scan's carry, the step's new
states and the swap round's), for :func:`check_run_memory`."""


def _nbytes(tree) -> int:
    return sum(math.prod(leaf.shape) * np.dtype(leaf.dtype).itemsize for leaf in jax.tree.leaves(tree))


def check_run_memory(kernel: tempering.TargetKernel, static, data, *, num_chains: int, n_rungs: int, auto_rungs: bool,
                     largest_round: int, chunk: int) -> None:
    """InsufficientMemoryError, before anything is compiled or allocated, when the run would not fit: the
    replicas' states (``num_chains`` x ``n_rungs``, :data:`STATE_COPIES` copies, and the kernel's
    ``scratch`` per replica) on the device, and the records and summaries of a ``chunk`` on the device and
    of the ``largest_round`` on the host (twice: the round's chunks, and their concatenation). The shapes
    come from tracing ``init``, ``record`` and ``summaries`` abstractly (``jax.eval_shape``), not from
    running them. ``auto_rungs``: ``n_rungs`` is the most that ``n_temperatures="auto"`` may choose."""
    state = jax.eval_shape(lambda data: kernel.init(static, data, jax.random.PRNGKey(0)), data)
    batch = jax.tree.map(lambda x: jax.ShapeDtypeStruct((1, *x.shape), x.dtype), state)
    per_scan = jax.eval_shape(
        lambda data, states: (kernel.record(static, data, states), kernel.summaries(static, data, states)), data, batch
    )
    scan_bytes = _nbytes(per_scan) + 8  # and the log joint and the swap acceptance
    scratch_bytes, scratch_what, scratch_setting = (0, None, None) if kernel.scratch is None else kernel.scratch(static)
    states_bytes = STATE_COPIES * _nbytes(state)
    replica_bytes = states_bytes + scratch_bytes
    replicas = num_chains * n_rungs
    needed = replicas * replica_bytes + num_chains * (chunk + 2 * largest_round) * scan_bytes
    named = scratch_bytes > states_bytes  # the kernel's work is named where it outweighs the states
    settings = ["num_chains", "n_temperatures", *([scratch_setting] if named and scratch_setting else []),
                "num_samples"]
    rungs = f"{n_rungs} rungs" + (' (the most that n_temperatures="auto" may choose)' if auto_rungs else "")
    memory.check_memory(
        needed,
        f"{', '.join(settings[:-1])}: {num_chains} chains x {rungs} = {replicas} replicas of "
        f"{memory.format_bytes(replica_bytes)} each{f' (with {scratch_what})' if named else ''}, and the "
        f"records of {largest_round} scans of every chain",
        f"lower {', '.join(settings[:-1])} or {settings[-1]}",
    )


def diagnose(summaries: dict[str, np.ndarray]) -> dict[str, tuple[float, float]]:
    """Rank-normalised split R-hat and bulk ESS of each (chain, draw, ...) summary; a summary with
    trailing axes counts as one scalar per entry, named ``name[i]``. A scalar equal in every draw of
    every chain agrees perfectly (R-hat 1, ESS the number of draws); one constant within chains but
    not across them never converges (R-hat inf). The statistics are ArviZ's ``rhat(method="rank")`` and
    ``ess(method="bulk")`` (``diagnostics.rank_statistics``, which does not import ArviZ)."""
    scalars = {}
    for name, values in summaries.items():
        values = np.asarray(values, dtype=np.float64)
        flat = values.reshape(*values.shape[:2], -1)
        for index in range(flat.shape[-1]):
            scalars[name if values.ndim == 2 else f"{name}[{index}]"] = flat[..., index]
    if sum(scalar.size for scalar in scalars.values()) < PARALLEL_DIAGNOSIS_DRAWS:
        return {label: _rhat_and_ess(scalar) for label, scalar in scalars.items()}
    # NumPy's sorts and FFTs release the GIL
    with ThreadPoolExecutor(min(usable_cores(), DIAGNOSIS_THREADS)) as pool:
        return dict(zip(scalars, pool.map(_rhat_and_ess, scalars.values())))


PARALLEL_DIAGNOSIS_DRAWS = 1 << 18
"""Draws (all summaries together) from which :func:`diagnose` ranks the summaries in threads: a fit of
a fixed ``num_samples`` keeps and judges every draw, and ranking a million of them takes about 0.1 s."""

DIAGNOSIS_THREADS = 4
"""At most this many summaries are ranked at once, since each ranking holds a few arrays of the window's size."""


def _rhat_and_ess(scalar: np.ndarray) -> tuple[float, float]:
    """(R-hat, bulk ESS) of one (chain, draw) scalar for :func:`diagnose`."""
    if np.ptp(scalar) == 0:
        return 1.0, float(scalar.size)
    with np.errstate(all="ignore"):
        rhat, ess = rank_statistics.rank_rhat_and_bulk_ess(scalar)
    return (rhat if math.isfinite(rhat) else math.inf, ess if math.isfinite(ess) else 0.0)


def worst(table: dict[str, tuple[float, float]]) -> tuple[float, float]:
    """(largest R-hat, smallest bulk ESS) over the summaries."""
    return max(r for r, _ in table.values()), min(e for _, e in table.values())


@dataclass
class TemperedRun:
    """A finished run. ``records`` and ``summaries``: name -> (chain, draw, ...) arrays of the posterior
    rung (the last sampling round, joined to the one before it when those converged, thinned to at most
    ``max_draws`` per chain); ``swap_accept`` (chain, draw);
    ``schedule`` the inverse temperatures; ``barrier`` Lambda; ``round_trip_rate`` round trips per scan
    and chain in the last round; ``move_rates`` move name -> (K,): per rung, from the prior's to the
    posterior's, the mean of what the kernel reported for the move in the last round (acceptance
    probabilities and the like, ``tempering.RoundStatistics``); ``log_evidence`` +- ``log_evidence_se``
    (stepping stone, NaN without tempering);
    ``diagnostics`` name -> (R-hat, bulk ESS); ``seconds`` {"total", "compile", "sampling"};
    ``ladder``, ``settings``, ``proposal`` (the kernel's learned proposal that the last round ran with,
    None for a kernel that learns none): what :func:`extend` needs to continue. ``budget_cut``: None, or
    "tuning" / "sampling" when the ``max_seconds`` cut ended the run, in round ``budget_cut_round``
    (counted from 1 within its stage); only then can the draws of a seed depend on the machine's pace."""

    records: dict
    summaries: dict
    swap_accept: np.ndarray
    schedule: np.ndarray
    barrier: float
    round_trip_rate: float
    log_evidence: float
    log_evidence_se: float
    diagnostics: dict
    converged: bool
    n_scans: int
    thin: int
    seconds: dict
    ladder: object = field(repr=False)
    settings: dict = field(repr=False)
    proposal: object = field(default=None, repr=False)
    budget_cut: str | None = None
    budget_cut_round: int | None = None
    move_rates: dict = field(default_factory=dict)

    @property
    def n_temperatures(self) -> int:
        return len(self.schedule)

    def budget_note(self) -> str:
        """Where the time budget ended the run ("during tuning round 2 of at most 4"), or empty."""
        if self.budget_cut is None:
            return ""
        if self.budget_cut == "tuning":
            rounds = self.settings["tuning_rounds"]
            most = DEFAULT_TUNING_ROUNDS if rounds == "auto" else rounds
            return f"during tuning round {self.budget_cut_round} of at most {most}"
        return f"during sampling round {self.budget_cut_round}"

    def message(self) -> str:
        rhat, ess = worst(self.diagnostics)
        state = "converged" if self.converged else "NOT converged"
        trips = f" ({self.round_trip_rate:.3g} round trips per scan and chain)" if self.n_temperatures > 1 else ""
        return (
            f"{state}: worst R-hat {rhat:.3f}, worst bulk ESS {ess:.0f} over {self.summaries['log_joint'].shape[0]} "
            f"chains x {self.summaries['log_joint'].shape[1]} draws (every {self.thin} scans), "
            f"{self.n_temperatures} temperatures{trips}"
            + (f"; the time budget ended {self.budget_note()}" if self.budget_cut else "")
            + (" (the draws are that round's)" if self.budget_cut == "tuning" else "")
        )


class TemperedResult:
    """What every tempered fit's result offers, from its ``run`` (a :class:`~interpretable_zoo.inference.convergence.TemperedRun`) and ``target``
    ((static, data) of its kernel): convergence facts, the log evidence, and :meth:`extend`. A subclass
    defines ``_kernel()`` and ``_with_run(run)`` (the same result around another run)."""

    @property
    def converged(self) -> bool:
        return self.run.converged

    @property
    def budget_cut(self) -> str | None:
        """The stage in which ``max_seconds`` ended the run, "tuning" or "sampling"; None when it did not
        (:class:`~interpretable_zoo.inference.convergence.TemperedRun`)."""
        return self.run.budget_cut

    @property
    def diagnostics(self) -> pd.DataFrame:
        """R-hat and bulk ESS (columns ``r_hat``, ``ess_bulk``, as in ``az.summary``) of each label-free
        summary over the kept draws, one row per summary under its name in ``idata.posterior`` (an entry of
        an array summary as ``name[i]``), as :func:`~interpretable_zoo.diagnostics.inference_data.summary`
        names it. ``run.diagnostics`` holds the same under the engine's names."""
        table = pd.DataFrame(list(self.run.diagnostics.values()), columns=["r_hat", "ess_bulk"],
                             index=pd.Index([self._posterior_name(name) for name in self.run.diagnostics], name="summary"))
        order = self._summary_var_names()
        bases = [label.split("[")[0] for label in table.index]  # an array summary's entries share its place
        return table.iloc[np.argsort([order.index(b) if b in order else len(order) for b in bases], kind="stable")]

    def _posterior_name(self, name: str) -> str:
        """The ``idata.posterior`` name of the engine's summary ``name`` (a subclass maps those it renames)."""
        return name

    def _summary_var_names(self) -> tuple[str, ...]:
        """The label-free summaries in ``idata.posterior``, in the order ``diagnostics.summary`` lists them."""
        return tuple(self.run.diagnostics)

    @property
    def move_rates(self) -> pd.DataFrame:
        """The moves' acceptance per rung, as a table with a column per move (what the kernel reported for
        it, such as the re-split or split-merge acceptance) and a row per inverse temperature of the last
        round, prior first; ``idata.posterior.attrs["move_rate_<move>"]`` holds the same."""
        return pd.DataFrame({name: np.asarray(rates, float) for name, rates in self.run.move_rates.items()},
                            index=pd.Index(np.asarray(self.run.schedule, float), name="inverse_temperature"))

    @property
    def log_evidence(self) -> float:
        """Stepping-stone log marginal likelihood (NaN when run untempered); ``log_evidence_se`` its error."""
        return self.run.log_evidence

    @property
    def log_evidence_se(self) -> float:
        return self.run.log_evidence_se

    def extend(self, num_samples: int | None = None, *, max_seconds: float | None = None,
               progress_bar: bool | None = None):
        """Continue the chains from their last state (no new tuning): ``num_samples`` more scans, or by
        default until converged within ``max_seconds`` (the fit's budget unless given). Returns a new
        result holding the new draws."""
        target = self.run.settings["target"]
        if max_seconds is not None:
            target = ConvergenceTarget(target.target_rhat, target.min_ess, max_seconds)
        run = extend(self.run, self._kernel(), *self.target, num_samples=num_samples, target=target,
                     progress_bar=progress_bar)
        return self._with_run(run)


def _thinned(chunks: list, max_draws: int):
    """Concatenate chunk outputs over the draw axis (axis 1 after moving chains first) and thin them to
    at most ``max_draws`` draws per chain; returns (tree, thinning interval)."""
    # joined along the leading draw axis (whole rows) and then viewed chains first, not copied axis by axis
    tree = jax.tree.map(lambda *xs: np.swapaxes(np.concatenate([tempering.to_host(x) for x in xs]), 0, 1), *chunks)
    n_draws = jax.tree.leaves(tree)[0].shape[1]
    thin = max(1, math.ceil(n_draws / max_draws))
    return jax.tree.map(lambda x: x[:, thin - 1 :: thin], tree), thin


@memory.small_pages()
def sample(
    kernel: tempering.TargetKernel,
    static,
    data,
    *,
    num_chains: int = 4,
    seed: int = 0,
    n_temperatures="auto",
    max_temperatures: int = 32,
    num_samples: int | None = None,
    tuning_rounds: int | str = "auto",
    scans_per_chunk: int = 256,
    max_draws: int = MAX_DRAWS,
    target: ConvergenceTarget = ConvergenceTarget(),
    progress_bar: bool | None = None,
    description: str = "sampling",
    initial_states=None,
    devices=None,
    checkpoint=None,
) -> TemperedRun:
    """Tempered sampling of ``kernel`` on (``static``, ``data``) until converged (the rounds: see the module
    docstring).

    ``n_temperatures``: rungs per chain, or "auto" (start at 8, then about 2 Lambda after each tuning
    round, at most ``max_temperatures``); 1 runs the kernel untempered. ``tuning_rounds``: rounds of
    ``scans_per_chunk`` * 2^r scans (r = 0, 1, ...) that tune the schedule and are discarded; "auto":
    at most :data:`DEFAULT_TUNING_ROUNDS`, ending after the second or a later round that keeps the
    number of rungs.
    ``num_samples``: run exactly that many scans after tuning (no convergence stopping; ``max_seconds`` is
    ignored). ``max_draws``: draws kept per chain (thinned evenly). ``initial_states``: one kernel state
    per chain (leading axis ``num_chains``) where all of the chain's rungs start; by default each replica
    starts from the kernel's ``init``. ``devices``: the chains are split over several devices when there
    are (:func:`~interpretable_zoo.inference.tempering.chain_mesh`); the same seed gives the same draws on 1, 2 or 4 devices.
    ``checkpoint``: a path or an ``inference.checkpoint.Checkpoint``;
    the run writes its state there as it goes and, when the file exists, resumes from it (same draws as
    an uninterrupted run); a finished run removes it.

    The draws judged: after chunks of a sampling round (every chunk at first, then
    :data:`TESTS_PER_DOUBLING` times per doubling of the draws judged), the draws of the round so far joined
    to the sampling round before it (rounds double: at the end of a round about the last three quarters of
    the sampling; a round with the schedule before it still draws the same posterior rung), or, at the end
    of a round, the round's draws alone (about the second half, the classical warm-up rule: on a slowly
    mixing posterior the round before may still hold the approach to it). Checking within a round, rather
    than at its end only, stops a run that has converged without doubling it once more; being tested more
    often, a run that hovers at the target is a little likelier to be judged converged on a chance dip (the
    reported R-hat and ESS are those of the kept draws). For chains that mix slowly R-hat is about
    1 + (number of chains) / (bulk ESS) even when they agree, so with more than four chains the R-hat
    target asks for a larger ESS than ``min_ess`` (:func:`ess_for_rhat`; the warning of an unconverged run
    says so).

    The budget: the one decision that reads the clock is the ``max_seconds`` cut, which may end a tuning
    round or a sampling round. A chunk that would end past the budget runs only the scans that fit at the
    pace measured so far, so a run ends within about a scan of ``max_seconds``. When the budget ends a
    tuning round, the run ends there with that round's draws (not converged); the result says where the
    budget cut in (``TemperedRun.budget_cut``). The clock also sizes the compiled chunks (at most
    :data:`CHUNK_SECONDS` each, so that Ctrl-C is prompt), which changes no draw.
    """
    settings = {
        "num_chains": check_positive_int(num_chains, "num_chains"),
        "seed": check_seed(seed),
        "n_temperatures": check_temperatures(n_temperatures),
        "max_temperatures": check_positive_int(max_temperatures, "max_temperatures"),
        "num_samples": None if num_samples is None else check_positive_int(num_samples, "num_samples"),
        "tuning_rounds": check_tuning_rounds(tuning_rounds),
        "scans_per_chunk": check_positive_int(scans_per_chunk, "scans_per_chunk"),
        "max_draws": check_positive_int(max_draws, "max_draws"),
        "target": target,
        "progress_bar": progress_bar,
        "description": description,
    }
    if not isinstance(target, ConvergenceTarget):
        raise ValueError(f"target: expected a ConvergenceTarget, got {type(target).__name__}")
    auto_rungs = settings["n_temperatures"] == "auto"
    auto_rounds = settings["tuning_rounds"] == "auto"
    max_rounds = DEFAULT_TUNING_ROUNDS if auto_rounds else settings["tuning_rounds"]
    check_run_memory(
        kernel, static, data, num_chains=settings["num_chains"], chunk=settings["scans_per_chunk"],
        n_rungs=settings["max_temperatures"] if auto_rungs else settings["n_temperatures"], auto_rungs=auto_rungs,
        largest_round=max(settings["num_samples"] or 0, settings["scans_per_chunk"] * 2 ** max(max_rounds - 1, 0)),
    )
    checkpoint = as_checkpoint(checkpoint)
    mesh = tempering.chain_mesh(num_chains, devices)
    settings["devices"] = 1 if mesh is None else mesh.size
    writer = None if checkpoint is None else CheckpointWriter(
        checkpoint, fingerprint(kernel, static, data, settings, initial_states)  # of the data on this host
    )
    start, compile_start = tempering.now(), compile_seconds()
    saved = None if writer is None else writer.load()
    if saved is None:
        n_rungs = 8 if settings["n_temperatures"] == "auto" else settings["n_temperatures"]
        schedule = tempering.default_schedule(n_rungs)
        keys = tempering.chain_keys(settings["seed"], num_chains)
        ladder = tempering.initial_ladder(kernel, static, data, keys, n_rungs, initial_states)
        first_round, proposal = 0, None
    else:
        start -= saved["elapsed"]
        schedule, ladder = saved["schedule"], tempering.Ladder(*saved["ladder"])
        first_round = saved["round_index"] if saved["stage"] == "tuning" else max_rounds
        proposal = saved["proposal"]
    data = _with_proposal(kernel, static, data, proposal, mesh)
    ladder = tempering.shard_ladder(ladder, mesh)
    deadline = None if num_samples is not None or target.max_seconds is None else start + target.max_seconds
    cut = None  # (statistics, outputs, budget cut or None for an interruption) of a tuning round that ended the run
    last_tuning = None  # (statistics, outputs) of the last tuning round run whole: the draws of a run interrupted
    # before a later round's first chunk ended
    pace = _Pace(_planned_scans(settings, first_round, max_rounds, auto_rounds), description)
    with _watched(progress_bar, description) as (bar, stop):
        for round_index in range(first_round, max_rounds):
            partial = _saved_chunks(saved) if round_index == first_round else None
            ladder, statistics, outputs, interrupted = _run_round(
                kernel, static, data, ladder, schedule, settings["scans_per_chunk"] * 2**round_index, settings, bar,
                deadline, partial,
                _saver(writer, start, stage="tuning", round_index=round_index, schedule=schedule, proposal=proposal),
                pace=pace, stop=stop,
            )
            out_of_time = deadline is not None and tempering.now() > deadline
            interrupted = interrupted or stop.asked()  # before the next round's retuning and compilation
            if interrupted or out_of_time:
                if statistics is None and last_tuning is None:
                    raise KeyboardInterrupt  # before the run's first chunk ended: no draws to keep
                # the tuning draws so far are the result
                statistics, outputs = (statistics, outputs) if statistics is not None else last_tuning
                cut = (statistics, outputs, None if interrupted else ("tuning", round_index + 1))
                break
            last_tuning = statistics, outputs
            tuned, retuned_ladder = _retuned(ladder, schedule, statistics, settings)
            settled = auto_rounds and round_index >= 1 and len(tuned) == len(schedule)
            facts = tempering.RoundFacts(schedule, statistics.move_rates, tuned=settled or round_index == max_rounds - 1)
            proposal, data = _relearned(kernel, static, data, outputs, ladder, settings, proposal, mesh, facts)
            schedule, ladder = tuned, retuned_ladder
            if settled:
                break
        resume = saved if saved is not None and saved["stage"] == "sampling" else None
        return _sampling_rounds(kernel, static, data, ladder, schedule, settings, start, compile_start, bar, cut,
                                resume=resume, writer=writer, pace=pace, proposal=proposal, last_tuning=last_tuning,
                                stop=stop)


def _planned_scans(settings, first_round=0, max_rounds=0, auto_rounds=False) -> tuple[int, str] | None:
    """(scans, what sets them) of a fixed-length run from tuning round ``first_round`` on, for its time
    projection (:class:`_Pace`); tuning rounds "auto" count at most ``max_rounds``. None until converged."""
    if settings["num_samples"] is None:
        return None
    tuning = sum(settings["scans_per_chunk"] * 2**r for r in range(first_round, max_rounds))
    after = f" after {'at most ' if auto_rounds else ''}{tuning:,} tuning scans" if tuning else ""
    return settings["num_samples"] + tuning, f"num_samples={settings['num_samples']}{after}"


@contextlib.contextmanager
def _watched(progress_bar, description: str):
    """The run's progress bar (or None) and its Ctrl-C request (``interruption``), for the block's duration."""
    bar = progress.bar(progress_bar, description, unit=" scans")
    try:
        with interruption.stop_on_sigint() as stop:
            yield bar, stop
    finally:
        if bar is not None:
            bar.close()


def _with_proposal(kernel, static, data, proposal, mesh):
    """The kernel's data with a learned ``proposal`` in place of the one it holds (None: ``data`` as
    given), on the devices of ``mesh`` (``tempering.place_data``)."""
    if proposal is not None:
        data = kernel.with_proposal(static, data, proposal)
    return tempering.place_data(kernel, static, data, mesh)


def _relearned(kernel, static, data, outputs, ladder, settings, proposal, mesh, facts: tempering.RoundFacts):
    """(proposal, data) for the next round: what a round (its chunks' ``outputs``, final ``ladder`` and
    ``facts``), run with ``proposal`` on ``data``, teaches the kernel; both unchanged for a kernel that
    learns none."""
    if kernel.learn_proposal is None:
        return proposal, data
    records, _ = _thinned([output[0] for output in outputs], settings["max_draws"])
    proposal = kernel.learn_proposal(static, data, records, ladder.states, proposal, facts)
    return proposal, _with_proposal(kernel, static, data, proposal, mesh)


def _saved_chunks(saved):
    """(chunk statistics, outputs) of the round a checkpoint stopped in, or None."""
    if saved is None:
        return None
    return [tempering.SwapStatistics(*c) for c in saved["chunk_statistics"]], list(saved["outputs"])


def _saver(writer, start, **position):
    """The per-chunk hook of ``_run_round`` that checkpoints ``position`` with the chunk's ladder, or None."""
    if writer is None:
        return None

    def save(ladder, chunk_statistics, outputs):
        writer.maybe_write({**position, "ladder": tuple(ladder), "chunk_statistics": [tuple(c) for c in chunk_statistics],
                            "outputs": outputs}, tempering.now() - start)

    return save


@memory.small_pages()
def extend(run: TemperedRun, kernel: tempering.TargetKernel, static, data, *, num_samples: int | None = None,
           target: ConvergenceTarget | None = None, progress_bar: bool | None = None) -> TemperedRun:
    """Continue a run from its last state, with its schedule: until converged (``target``, by default the
    run's), or exactly ``num_samples`` more scans. No tuning is repeated; the new run keeps only the new
    draws. Continuing is the same as having run longer: the random stream carries on from the ladder."""
    num_samples = None if num_samples is None else check_positive_int(num_samples, "num_samples")
    settings = {**run.settings, "num_samples": num_samples}
    if target is not None:
        settings["target"] = target
    if progress_bar is not None:
        settings["progress_bar"] = progress_bar
    mesh = tempering.chain_mesh(settings["num_chains"], settings["devices"])
    data = _with_proposal(kernel, static, data, run.proposal, mesh)
    check_run_memory(kernel, static, data, num_chains=settings["num_chains"], n_rungs=len(run.schedule),
                     auto_rungs=False, largest_round=num_samples or 0, chunk=settings["scans_per_chunk"])
    start, compile_start = tempering.now(), compile_seconds()
    with _watched(settings["progress_bar"], settings["description"]) as (bar, stop):
        return _sampling_rounds(kernel, static, data, run.ladder, run.schedule, settings, start, compile_start, bar,
                                proposal=run.proposal, stop=stop)


def _retuned(ladder, schedule, statistics, settings):
    """The schedule tuned on a round's statistics, with a new number of rungs when it is "auto"."""
    if len(schedule) == 1:
        return schedule, ladder
    n_rungs = len(schedule)
    if settings["n_temperatures"] == "auto":
        n_rungs = tempering.rungs_for_barrier(
            tempering.communication_barrier(statistics), maximum=settings["max_temperatures"]
        )
    new_schedule = tempering.tuned_schedule(schedule, statistics, n_rungs)
    if n_rungs != len(schedule):
        mesh = tempering.chain_mesh(settings["num_chains"], settings["devices"])
        ladder = tempering.shard_ladder(tempering.resized_ladder(ladder, schedule, new_schedule), mesh)
    return new_schedule, ladder


CHUNK_SECONDS = 2.0
"""The longest a compiled chunk should run at the measured pace. Ctrl-C ends a run after the chunk in
flight, so this bounds how long it takes (a chunk is at least one scan)."""

FIRST_CHUNK_SCANS = 1
"""Scans of a run's first chunk, run before any pace is measured. One scan of a run too large for
:data:`CHUNK_SECONDS` keeps Ctrl-C prompt (and the chunk's program, compiled then, serves every size)."""


LONG_RUN_SECONDS = 600.0
"""A run whose remaining work is projected to take longer than this says so in a warning
(:class:`TimeProjection`)."""


def format_seconds(seconds: float) -> str:
    """A duration for a message: seconds below a minute, else minutes, else hours and minutes."""
    if seconds < 1:
        return f"{seconds * 1e3:.3g} ms"
    if seconds < 60:
        return f"{seconds:.3g} s"
    if seconds < 3600:
        return f"{seconds / 60:.0f} min"
    return f"{int(seconds // 3600)} h {round(seconds % 3600 / 60):02d} min"


def _count(number: int, noun: str) -> str:
    return f"{number:,} {noun}{'' if number == 1 else 's'}"


class TimeProjection:
    """The remaining time of a run of ``total`` units of work (scans, compiled calls, iterations), projected
    once from its second timed part (the first one's time may include compiling): past
    :data:`LONG_RUN_SECONDS`, a warning whose text is ``message(left, units_left, per_unit, **context)``
    (seconds, units, seconds), raised ``stacklevel`` frames above :meth:`record`."""

    def __init__(self, total: int, message, stacklevel: int):
        self.total, self.message, self.stacklevel = total, message, stacklevel
        self.parts = self.done = 0

    def record(self, seconds: float, units: int, **context):
        """One timed part of ``units`` units; ``context`` goes to the message."""
        self.parts, self.done = self.parts + 1, self.done + units
        per_unit = seconds / max(units, 1)
        left = (self.total - self.done) * per_unit
        if self.parts == 2 and left > LONG_RUN_SECONDS:
            warnings.warn(self.message(left, self.total - self.done, per_unit, **context),
                          stacklevel=self.stacklevel + 1)


class _Pace:
    """Seconds per scan and rung of the last chunk run, carried from round to round (a retuned round may
    have another number of rungs, and a scan costs about as much per rung).

    ``planned``: (scans, what sets them) of a fixed-length run, the scans counted from this pace's first
    chunk on, or None for a run until converged. Such a run projects its remaining time
    (:class:`TimeProjection`)."""

    def __init__(self, planned: tuple[int, str] | None = None, description: str = "sampling"):
        self.seconds_per_rung_scan = None
        self.projection = None
        if planned is not None:
            scans, setting = planned

            def message(left, scans_left, per_scan, n_rungs, n_chains):
                return (f"{description}: {setting} is projected to run {format_seconds(left)} more, "
                        f"{scans_left:,} scans at {format_seconds(per_scan)} a scan ({_count(n_rungs, 'rung')} x "
                        f"{_count(n_chains, 'chain')}), as timed on its last chunk. Ctrl-C ends it within about "
                        f"{CHUNK_SECONDS:g} s and keeps the draws so far.")

            self.projection = TimeProjection(scans, message, stacklevel=4)

    def record(self, seconds: float, n_scans: int, n_rungs: int, n_chains: int):
        self.seconds_per_rung_scan = seconds / (n_scans * n_rungs)
        if self.projection is not None:
            self.projection.record(seconds, n_scans, n_rungs=n_rungs, n_chains=n_chains)

    def scans_that_fit(self, size: int, deadline, n_rungs: int) -> int:
        """``size``, or fewer when a chunk of that size would run longer than :data:`CHUNK_SECONDS` or end
        past ``deadline`` at this pace; at least 1. Before any pace is measured, at most
        :data:`FIRST_CHUNK_SCANS`. Every process of a ``jax.distributed`` run reads one clock
        (``tempering.now``), so all of them run chunks of the same sizes."""
        if self.seconds_per_rung_scan is None:
            return min(size, FIRST_CHUNK_SCANS)
        left = CHUNK_SECONDS if deadline is None else min(CHUNK_SECONDS, deadline - tempering.now())
        per_scan = self.seconds_per_rung_scan * n_rungs
        return size if left >= size * per_scan else max(1, math.floor(left / per_scan))


def _run_round(kernel, static, data, ladder, schedule, n_scans, settings, bar, deadline=None, partial=None,
               on_chunk=None, finished=None, *, pace: _Pace, stop: interruption.StopRequest):
    """Up to ``n_scans`` scans in chunks, stopping early at ``deadline`` (a time of ``tempering.now``), at a
    Ctrl-C request (``stop``, read before each chunk: the chunks run so far are kept), or at a KeyboardInterrupt
    (the compiled call it cuts is dropped, the ladder stays after the last call run); returns
    the ladder, the round's statistics (None when no chunk ran), the chunks' outputs and whether it was
    interrupted. A chunk that would end past the deadline, or run longer than :data:`CHUNK_SECONDS`, at the
    ``pace`` (updated here) of the chunk before it, in this round or an earlier one, runs only the scans
    that fit, at least one (the same compiled program runs any count up to a chunk), so a round that
    reaches the deadline ends within about a scan of it, and Ctrl-C takes effect within about
    :data:`CHUNK_SECONDS`. ``partial``: (statistics, outputs) of the round's chunks already run (from a checkpoint);
    ``on_chunk(ladder, statistics, outputs)`` is called after every chunk; ``finished(outputs)`` True ends
    the round after a chunk. ``finished`` is asked only after a whole number of ``scans_per_chunk`` scans,
    so a chunk shortened at the deadline moves no test of it: the draws of a run that the deadline does
    not end do not depend on the pace."""
    chunk = settings["scans_per_chunk"]
    chunk_statistics, outputs = partial or ([], [])
    done = sum(int(c.n_scans) for c in chunk_statistics)
    interrupted = False
    in_progress = None  # the statistics of the chunk's parts run so far, which its next part adds to
    while done < n_scans:
        if stop.asked():
            interrupted = True
            break
        # the test of the chunks so far, here rather than after the chunk: a checkpoint is written before
        # it, so a run resumed from one repeats it on the chunks it restored
        if outputs and finished is not None and done % chunk == 0 and finished(outputs):
            break
        # up to the next whole number of chunks: a chunk run in parts (at the deadline, or to keep each part
        # within CHUNK_SECONDS) leaves the rest aligned
        size = pace.scans_that_fit(min(chunk - done % chunk, n_scans - done), deadline, len(schedule))
        began = tempering.now()
        try:
            ladder, in_progress, output = tempering.run_scans(kernel, static, data, ladder, schedule, size,
                                                              capacity=chunk, statistics=in_progress)
        except KeyboardInterrupt:
            if stop.requested:  # a second Ctrl-C: abort
                raise
            interrupted = True
            break
        pace.record(tempering.now() - began, size, len(schedule), settings["num_chains"])
        outputs.append(output)
        done += size
        if done % chunk == 0 or done == n_scans:
            chunk_statistics.append(in_progress)
            in_progress = None
            if on_chunk is not None:
                on_chunk(ladder, chunk_statistics, outputs)
        if bar is not None:
            bar.update(size)
        if deadline is not None and tempering.now() > deadline:
            break
    if in_progress is not None:  # a chunk that the deadline or an interruption cut: its parts run so far
        chunk_statistics.append(in_progress)
    statistics = tempering.combine(chunk_statistics) if chunk_statistics else None
    return ladder, statistics, outputs, interrupted


def _verdict(windows, settings, may_converge=True):
    """The first of ``windows`` (each a list of chunk outputs) whose thinned summaries meet the target, else
    the last: (that window, its diagnostics table, (worst R-hat, worst ESS), converged); never converged
    without ``may_converge`` (an interrupted run, or tuning draws)."""
    target: ConvergenceTarget = settings["target"]
    for kept in windows:
        summaries, _ = _thinned([output[1] for output in kept], settings["max_draws"])
        table = diagnose(summaries)
        rhat, ess = worst(table)
        converged = bool(rhat <= target.target_rhat and ess >= target.min_ess and may_converge)
        if converged:
            break
    return kept, table, (rhat, ess), converged


TESTS_PER_DOUBLING = 8
"""A sampling round tests its draws so far, joined to the round before, after every chunk while that
window spans fewer than twice this many chunks, then this many times per doubling of it (``_test_due``):
the test (ranks and autocorrelations of up to ``max_draws`` draws per chain) can cost more than the
chunk of cheap scans it follows, and tested after every chunk a long run would spend most of its time
testing, while it still stops within 1 / TESTS_PER_DOUBLING of the window past the chunk that first
passes."""


def _test_due(window_chunks: int) -> bool:
    """Whether a window of n = ``window_chunks`` whole chunks is tested: when n is a multiple of
    max(1, 2^floor(log2 n) / TESTS_PER_DOUBLING) (counts only, so a resumed run tests where an
    uninterrupted one does)."""
    spacing = max(1, 2 ** int(math.log2(max(window_chunks, 1))) // TESTS_PER_DOUBLING)
    return window_chunks % spacing == 0


def _converged_so_far(previous, settings, bar, n_rungs, passed):
    """A sampling round's ``finished`` test (``_run_round``): the round's draws so far, joined to the
    round before it (``previous``: its (statistics, outputs), or None), meet the target, judged when
    ``_test_due``; a passing verdict (``_verdict``) is appended to ``passed``. The progress bar
    shows the worst R-hat and ESS of every test."""

    def finished(outputs):
        window = outputs if previous is None else previous[1] + outputs
        if not _test_due(sum(len(output[2]) for output in window) // settings["scans_per_chunk"]):
            return False
        verdict = _verdict([window], settings)
        if bar is not None:
            bar.set_postfix_str(f"K={n_rungs} R-hat={verdict[2][0]:.3f} ESS={verdict[2][1]:.0f}")
        if verdict[3]:
            passed.append(verdict)
        return verdict[3]

    return finished


def ess_for_rhat(num_chains: int, target_rhat: float) -> float:
    """The bulk ESS at which ``num_chains`` chains that mix slowly but agree reach R-hat ``target_rhat``:
    split R-hat is then about 1 + num_chains / ESS (each of the 2 M split chains' means varies by about
    1 / (its ESS) of the variance); with more than four chains the target asks for more than the bulk ESS
    of 400 that Vehtari et al. (2021) advise for four (8 agreeing AR(1) chains at bulk ESS 685: R-hat
    1.011 on average, <= 1.01 in 40 % of runs)."""
    return math.inf if target_rhat <= 1.0 else num_chains / (target_rhat - 1.0)


def _rhat_hint(rhat: float, num_chains: int, target: ConvergenceTarget) -> str:
    """A sentence for the unconverged warning when R-hat missed its target and ``num_chains`` chains need
    more than ``min_ess`` to meet it (:func:`ess_for_rhat`); else empty."""
    needed = ess_for_rhat(num_chains, target.target_rhat)
    if rhat <= target.target_rhat or not target.min_ess < needed < math.inf:
        return ""
    return (f" R-hat falls as the draws grow, to about 1 + chains / bulk ESS when the chains agree: {num_chains} "
            f"chains reach R-hat {target.target_rhat} at a bulk ESS of about {needed:.0f}, more than min_ess.")


def _ladder_hint(barrier: float, n_rungs: int) -> str:
    """A sentence for the unconverged warning when the ladder has fewer rungs than its measured barrier
    Lambda wants (:func:`~interpretable_zoo.inference.tempering.rungs_for_barrier`, uncapped): its K - 1
    pairs then reject about Lambda / (K - 1) of their swaps each, and few replicas cross from the
    reference to the target however long the run; else empty. Lambda is measured on replicas that may not
    have settled on their rungs, so the sentence says how to tell (docs/guides/convergence.md)."""
    wanted = tempering.rungs_for_barrier(barrier, maximum=sys.maxsize)
    if n_rungs < 2 or wanted <= n_rungs:
        return ""
    rejected = min(1.0, barrier / (n_rungs - 1))
    return (f" The ladder is short for its barrier: Lambda = {barrier:.1f} wants about {wanted} rungs, and each "
            f"pair of its {n_rungs} rejects about {rejected:.2f} of its swaps; n_temperatures={wanted} runs that "
            f"many, each scan costing about {wanted / n_rungs:.1f}x as much. If the longer ladder measures a larger "
            "Lambda, its replicas have not settled on their rungs, and more rungs will not help.")


def _sampling_rounds(kernel, static, data, ladder, schedule, settings, start, compile_start, bar, cut=None,
                     resume=None, writer=None, pace=None, proposal=None, last_tuning=None, *,
                     stop: interruption.StopRequest):
    """Sampling rounds until converged, out of time or interrupted; ``cut``: (statistics, outputs, budget
    cut) of a tuning round that the budget (budget cut ("tuning", round)) or an interruption (None) ended,
    whose draws then are the result; ``resume``: a checkpoint saved while sampling,
    ``writer``: the run's checkpoint writer (None: no checkpoints); ``pace``: the ``_Pace`` of the
    tuning rounds (None, as for :func:`extend`: measured from a first chunk of :data:`FIRST_CHUNK_SCANS`
    scans); ``proposal``: the kernel's learned proposal, which ``data`` already holds; ``last_tuning``:
    (statistics, outputs) of the last tuning round, the result of a run interrupted before its first sampling
    chunk ended; ``stop``: the run's Ctrl-C request."""
    pace = _Pace(_planned_scans(settings), settings["description"]) if pace is None else pace
    mesh = tempering.chain_mesh(settings["num_chains"], settings["devices"])
    target: ConvergenceTarget = settings["target"]
    fixed = settings["num_samples"]
    deadline = None if fixed is not None or target.max_seconds is None else start + target.max_seconds
    n_scans = fixed or settings["scans_per_chunk"]
    previous = None  # (statistics, outputs) of the last complete round
    partial = None
    if resume is not None:
        n_scans, partial = int(resume["n_scans"]), _saved_chunks(resume)
        if resume["previous"] is not None:
            previous = (tempering.RoundStatistics(*resume["previous"][0]), list(resume["previous"][1]))
    while True:
        if cut is None:
            saver = _saver(writer, start, stage="sampling", n_scans=n_scans, schedule=schedule, proposal=proposal,
                           previous=None if previous is None else (tuple(previous[0]), previous[1]))
            passed = []  # the verdict that ended the round after a chunk
            finished = None if fixed is not None else _converged_so_far(
                previous, settings, bar, len(schedule), passed
            )
            ladder, statistics, outputs, interrupted = _run_round(
                kernel, static, data, ladder, schedule, n_scans, settings, bar, deadline, partial, saver, finished,
                pace=pace, stop=stop,
            )
            partial, budget_cut = None, None
        else:
            statistics, outputs, budget_cut = cut
            interrupted, passed = budget_cut is None, []
        if statistics is None:  # interrupted before this round's first chunk ended: keep the round before
            if previous is None and last_tuning is None:
                raise KeyboardInterrupt
            if previous is None:
                (statistics, outputs), cut = last_tuning, (*last_tuning, None)  # tuning draws
            else:
                (statistics, outputs), previous = previous, None
        scans_run = statistics.n_scans
        out_of_time = deadline is not None and tempering.now() > deadline
        # the draws judged (and kept): this round joined to the one before it, else this round alone; a
        # round cut short (converged after a chunk, or by the budget or an interruption) is always joined
        # to the one before it
        joined = [] if previous is None else [previous[1] + outputs]
        windows = (joined or [outputs]) if scans_run < n_scans else [*joined, outputs]
        kept, table, (rhat, ess), converged = passed[0] if passed else _verdict(
            windows, settings, may_converge=cut is None and not interrupted
        )
        if cut is None and out_of_time and not passed and not interrupted:
            budget_cut = ("sampling", round(math.log2(n_scans / settings["scans_per_chunk"])) + 1)
        (records, summaries, swap_accept), thin = _thinned(kept, settings["max_draws"])
        if bar is not None:
            bar.set_postfix_str(f"K={len(schedule)} R-hat={rhat:.3f} ESS={ess:.0f}")
        if fixed is not None or converged or out_of_time or interrupted:
            break
        facts = tempering.RoundFacts(schedule, statistics.move_rates, tuned=True)
        schedule, ladder = _retuned(ladder, schedule, statistics, {**settings, "n_temperatures": len(schedule)})
        proposal, data = _relearned(kernel, static, data, outputs, ladder, settings, proposal, mesh, facts)
        previous, n_scans = (statistics, outputs), 2 * n_scans
    barrier = tempering.communication_barrier(statistics) if len(schedule) > 1 else 0.0
    evidence, evidence_se = tempering.log_evidence(statistics)
    total = tempering.now() - start
    compiling = compile_seconds() - compile_start
    run = TemperedRun(
        records=records,
        summaries=summaries,
        swap_accept=swap_accept,
        schedule=np.asarray(schedule),
        barrier=barrier,
        round_trip_rate=statistics.round_trips / max(scans_run * settings["num_chains"], 1),
        log_evidence=evidence,
        log_evidence_se=evidence_se,
        diagnostics=table,
        converged=converged,
        n_scans=int(ladder.scan),
        thin=thin,
        seconds={"total": total, "compile": compiling, "sampling": total - compiling},
        ladder=ladder,
        settings=settings,
        proposal=proposal,
        budget_cut=None if budget_cut is None else budget_cut[0],
        budget_cut_round=None if budget_cut is None else budget_cut[1],
        move_rates=statistics.move_rates,
    )
    if writer is not None and not interrupted:
        writer.remove()
    if interrupted:
        warnings.warn(
            f"{settings['description']}: interrupted (KeyboardInterrupt); kept the {summaries['log_joint'].shape[1]} "
            f"draws per chain run so far{' (tuning draws)' if cut is not None else ''}: {run.message()}. "
            "result.converged is False; continue with result.extend().",
            stacklevel=3,
        )
    elif not converged and fixed is None:
        warnings.warn(
            f"{settings['description']}: the time budget (max_seconds={target.max_seconds}) ended before the "
            f"chains agreed: {run.message()}; targets R-hat <= {target.target_rhat}, bulk ESS >= {target.min_ess}. "
            f"Raise max_seconds, or continue with result.extend().{_rhat_hint(rhat, settings['num_chains'], target)}"
            f"{_ladder_hint(barrier, len(schedule))}",
            stacklevel=3,
        )
    return run
