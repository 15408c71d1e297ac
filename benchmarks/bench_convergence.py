"""Convergence at default settings: each MCMC fit as a user runs it (tempering engine, run until the
label-free summaries agree), beside the same kernel untempered (one rung) given the same wall time, and
BCM's collapsed kernel beside its partially collapsed one."""

from __future__ import annotations

import ast
import os
import time
import warnings

import numpy as np

from interpretable_zoo.datasets import load_adult, load_mushroom, load_recipes, load_tictactoe, load_titanic
from interpretable_zoo.datasets.smiley_faces import load_usps_bcm
from interpretable_zoo.inference.bcm import fit_bcm
from interpretable_zoo.inference.brl import BayesianRuleListClassifier
from interpretable_zoo.inference.convergence import diagnose, worst

from benchmarks.runner import Comparison, benchmark

SEED = 1


def _fit(fit):
    """Run ``fit()`` (returning a result with ``.run``), timing it whole (compilation included)."""
    start = time.perf_counter()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        result = fit()
    return result, time.perf_counter() - start


def _describe(run, seconds: float) -> str:
    rhat, ess = worst(run.diagnostics)
    chains, draws = run.summaries["log_joint"].shape
    evidence = "n/a" if not np.isfinite(run.log_evidence) else f"{run.log_evidence:.1f} ± {run.log_evidence_se:.2f}"
    return (
        f"{chains} x {draws} draws (every {run.thin} scans), compile {run.seconds['compile']:.1f} s, "
        f"{run.n_scans} scans in all, {run.seconds['sampling'] / max(run.n_scans, 1):.2f} s a scan, "
        f"R-hat {rhat:.3f}, ESS {ess:.0f}, ESS/s {ess / seconds:.1f}, log Z {evidence}, K = {run.n_temperatures}, "
        f"Lambda {run.barrier:.1f}, round trips per scan and chain {run.round_trip_rate:.4f}, "
        f"converged {run.converged}"
        + "".join(f"; {name} per rung from the reference {' '.join(f'{rate:.2f}' for rate in rates)}"
                  for name, rates in run.move_rates.items())
    )


def _untempered_wanted() -> bool:
    """CONVERGENCE_UNTEMPERED=skip leaves out the untempered fits (half the time, for a short device lease)."""
    choice = os.environ.get("CONVERGENCE_UNTEMPERED", "run")
    if choice not in ("run", "skip"):
        raise ValueError(f"CONVERGENCE_UNTEMPERED: expected 'run' or 'skip', got {choice!r}")
    return choice == "run"


def _extra_settings() -> dict:
    """CONVERGENCE_SETTINGS (comma-separated name=value, e.g. ``n_temperatures=64,max_seconds=520``) replaces
    defaults of every fit the benchmark runs; the untempered fit keeps its one rung and the tempered fit's time."""
    text = os.environ.get("CONVERGENCE_SETTINGS", "")
    settings = {}
    for item in filter(None, text.split(",")):
        name, equals, value = item.partition("=")
        if not equals or not name.isidentifier():
            raise ValueError(f"CONVERGENCE_SETTINGS: expected name=value items, got {item!r}")
        try:
            settings[name] = ast.literal_eval(value)  # numbers and True / False as Python reads them
        except (ValueError, SyntaxError):
            settings[name] = value  # a name, such as kernel=collapsed
    return settings


def _settings_text(options: dict) -> str:
    return ", ".join(f"{k}={v}" for k, v in options.items()) or "defaults"


def _row(case: str, settings: str, tempered_fit, plain_fit) -> Comparison:
    """One case: the default (tempered) fit, then the one-rung fit with the tempered fit's wall time."""
    untempered_wanted = _untempered_wanted()  # a bad value is refused before the long fit, not after it
    tempered, seconds = _fit(tempered_fit)
    tempered_text = _describe(tempered.run, seconds)
    print(f"{case}: tempered {seconds:.1f} s, {tempered_text}", flush=True)
    if not untempered_wanted:
        notes = f"{settings}; tempered: {tempered_text}; untempered: not run (CONVERGENCE_UNTEMPERED=skip)"
        return Comparison(case, seconds, "untempered, same budget", None, notes)
    plain, plain_seconds = _fit(lambda: plain_fit(seconds))
    gain = (worst(tempered.run.diagnostics)[1] / seconds) / max(worst(plain.run.diagnostics)[1] / plain_seconds, 1e-9)
    notes = (
        f"{settings}; tempered: {tempered_text}; untempered: {_describe(plain.run, plain_seconds)}; "
        f"worst-ESS/s ratio {gain:.1f}x"
    )
    return Comparison(case, seconds, "untempered, same budget", plain_seconds, notes)


def _brl_row(case: str, X, y, **options) -> Comparison:
    options = {**options, **_extra_settings()}

    def tempered():
        return BayesianRuleListClassifier(seed=SEED, progress_bar=False, **options).fit(X, y).result_

    def plain(seconds):
        return BayesianRuleListClassifier(
            seed=SEED, progress_bar=False, **{**options, "n_temperatures": 1, "max_seconds": seconds}
        ).fit(X, y).result_

    return _row(case, _settings_text(options), tempered, plain)


SEEDS = (1, 2, 3, 4, 5, 6)


def _brl_seeds_row(case: str, X, y, **options) -> Comparison:
    """The default fit with each of SEEDS: how many converge, their wall times (median as ours) and their log
    evidence (seeds whose chains all settled in different modes disagree on it beyond its standard error)."""
    options = {**options, **_extra_settings()}
    settings = _settings_text(options)
    fits = []
    for seed in SEEDS:
        classifier = BayesianRuleListClassifier(seed=seed, progress_bar=False, **options)
        result, seconds = _fit(lambda: classifier.fit(X, y).result_)
        rhat, ess = worst(result.run.diagnostics)
        evidence = f"{result.log_evidence:.1f} ± {result.log_evidence_se:.2f}"
        fits.append((seed, seconds, result.run.converged, rhat, ess, evidence))
        print(f"{case}: seed {seed}: {seconds:.1f} s, converged {result.run.converged}", flush=True)
    per_seed = "; ".join(f"seed {s}: {t:.1f} s, R-hat {r:.3f}, ESS {e:.0f}, log Z {z}, converged {c}"
                         for s, t, c, r, e, z in fits)
    notes = f"{settings}; converged {sum(fit[2] for fit in fits)} of {len(fits)}; {per_seed}"
    return Comparison(case, float(np.median([fit[1] for fit in fits])), "-", None, notes)


@benchmark(
    "convergence_brl",
    description=(
        "BRL at default settings (8 chains, non-reversible parallel tempering from a reference -- lists of mean "
        "length half the longest, their rules drawn by the learned rule weights averaged over all chains, "
        "redrawn at every scan at the reference -- with an adapted schedule, insert/delete/swap/replace/neighbour "
        "moves (the rules proposed by weights learned from round to round, in two independent groups of chains, or "
        "a rule exchanged for one that differs from it in one item), run until "
        "every label-free summary -- log posterior, list length, mean "
        "cardinality -- reaches R-hat <= 1.01 and bulk ESS >= 400, or 60 s) against the same kernel with one "
        "rung (plain Metropolis-Hastings) given the same wall time. Ours and peer columns: whole-fit wall "
        "times (mining and compilation included); ESS is the worst bulk ESS over the summaries; the ratio is "
        "of worst ESS per second; the tictactoe_seeds and mushroom_seeds rows fit the defaults with six seeds. "
        "CONVERGENCE_CASES (comma-separated: titanic, tictactoe, tictactoe_seeds, mushroom, mushroom_seeds, adult) "
        "narrows the cases; "
        "CONVERGENCE_UNTEMPERED=skip leaves out the untempered fits; CONVERGENCE_SETTINGS (name=value, "
        "comma-separated) replaces defaults of every fit."
    ),
)
def convergence_brl() -> list[Comparison]:
    cases = {
        "titanic": lambda: _brl_row("BRL, Titanic (Letham's training split)", *_xy(load_titanic("train"))),
        "tictactoe": lambda: _brl_row("BRL, tic-tac-toe", *_xy(load_tictactoe()), negations=False, max_cardinality=3),
        "tictactoe_seeds": lambda: _brl_seeds_row(f"BRL, tic-tac-toe, defaults with seeds {SEEDS[0]}-{SEEDS[-1]} "
                                                  "(median wall time)", *_xy(load_tictactoe()),
                                                  negations=False, max_cardinality=3),
        "mushroom": lambda: _brl_row("BRL, mushroom", *_xy(load_mushroom()), min_support=0.3),
        "mushroom_seeds": lambda: _brl_seeds_row(f"BRL, mushroom, defaults with seeds {SEEDS[0]}-{SEEDS[-1]} "
                                                 "(median wall time)", *_xy(load_mushroom()), min_support=0.3),
        "adult": lambda: _brl_row("BRL, adult", *_xy(load_adult())),
    }
    chosen = os.environ.get("CONVERGENCE_CASES")
    names = list(cases) if not chosen else chosen.split(",")
    unknown = sorted(set(names) - set(cases))
    if unknown:
        raise ValueError(f"CONVERGENCE_CASES: unknown case(s) {unknown}; choose from {list(cases)}")
    return [cases[name]() for name in names]


def _xy(data):
    return data.X, data.y


def _bcm_row(case: str, X, n_clusters: int, **options) -> Comparison:
    options = {**options, **_extra_settings()}

    def tempered():
        return fit_bcm(X, n_clusters, seed=SEED, progress_bar=False, **options)

    def plain(seconds):
        return fit_bcm(X, n_clusters, seed=SEED, progress_bar=False,
                       **{**options, "n_temperatures": 1, "max_seconds": seconds})

    return _row(case, _settings_text(options), tempered, plain)


_BCM_DESCRIPTION = (
    "BCM at default settings (4 chains, non-reversible parallel tempering, the default kernel: collapsed Gibbs "
    "with the observation re-split and cluster split-merge moves; run until the log joint, sorted cluster "
    "sizes and number of subspace features reach R-hat <= 1.01 and bulk ESS >= 400, or 300 s) against the same "
    "kernel with one rung given the same wall time (CONVERGENCE_UNTEMPERED=skip leaves it out; CONVERGENCE_SETTINGS, "
    "name=value comma-separated, replaces defaults of every fit). Columns as in "
    "convergence_brl. One benchmark per data set (each row takes up to 10 minutes)."
)


@benchmark("convergence_bcm_recipes", description=_BCM_DESCRIPTION)
def convergence_bcm_recipes() -> list[Comparison]:
    recipes = load_recipes()
    return [_bcm_row("BCM, recipes, S = 4", recipes.X, 4)]


def _usps_row(per_digit: int) -> list[Comparison]:
    usps = load_usps_bcm(per_digit, seed=SEED)
    return [_bcm_row(f"BCM, USPS {per_digit} per digit, 7 bins, S = 10", usps.X, 10, n_values=7)]


@benchmark("convergence_bcm_usps40", description=_BCM_DESCRIPTION)
def convergence_bcm_usps40() -> list[Comparison]:
    return _usps_row(40)


@benchmark("convergence_bcm_usps70", description=_BCM_DESCRIPTION)
def convergence_bcm_usps70() -> list[Comparison]:
    return _usps_row(70)


def shared_diagnostics(summaries: dict, log_joint_name: str) -> dict:
    """(R-hat, bulk ESS) of the label-free summaries that the collapsed and the partially collapsed kernels
    share: the sorted cluster sizes, the active subspace features and the collapsed log joint (the collapsed
    kernel's ``log_joint``, the partially collapsed kernel's ``collapsed_log_joint``)."""
    shared = {name: values for name, values in summaries.items()
              if name.startswith("cluster_size_") or name == "n_subspace_features"}
    shared["collapsed_log_joint"] = summaries[log_joint_name]
    return diagnose(shared)


@benchmark(
    "bcm_kernels_ess",
    description=(
        "The headline of BCM's samplers: bulk ESS per second of the label-free summaries, through fit_bcm at its "
        "default settings (4 chains, non-reversible parallel tempering with n_temperatures='auto', until "
        "R-hat <= 1.01 and bulk ESS >= 400, or 300 s; seed 1), on the recipes (56 x 147, S = 4) and on USPS 40 "
        "per digit (400 x 256, 7 bins, S = 10): kernel='collapsed' (`bcm_gibbs`: eq. (1), the observation "
        "re-split move, cluster split-merge on every fourth sweep and on every sweep at the posterior's rung, the "
        "prototypes and omega) against kernel='partially_collapsed' (`bcm_pcgibbs`: phi explicit, all "
        "observations at once, the re-split move given phi). The time columns are whole-fit wall seconds "
        "(compilation included) per effective draw of the worst shared summary (sorted cluster sizes, active "
        "subspace features, collapsed log joint), so the ratio is of worst ESS per second; the notes give each "
        "summary's R-hat and ESS per second, the rungs, Lambda and round trips."
    ),
)
def kernels_ess() -> list[Comparison]:
    usps = load_usps_bcm(40, seed=SEED)
    cases = {"recipes, S = 4": (load_recipes().X, 4, None),
             "USPS 40 per digit, 7 bins, S = 10": (usps.X, 10, 7)}
    rows = []
    for case, (X, n_clusters, n_values) in cases.items():
        per_draw, notes = {}, {}
        for kernel, log_joint_name in (("collapsed", "log_joint"), ("partially_collapsed", "collapsed_log_joint")):
            result, seconds = _fit(lambda: fit_bcm(X, n_clusters, n_values=n_values, seed=1, kernel=kernel,
                                                   progress_bar=False))
            run = result.run
            table = shared_diagnostics(run.summaries, log_joint_name)
            rhat, ess = worst(table)
            per_draw[kernel] = seconds / ess
            notes[kernel] = (
                f"{kernel}: {seconds:.1f} s, {run.n_scans} scans (compile {run.seconds['compile']:.1f} s), "
                f"K = {run.n_temperatures}, Lambda {run.barrier:.2f}, round trips per scan and chain "
                f"{run.round_trip_rate:.4f}, converged {run.converged}, worst R-hat {rhat:.3f}, worst ESS {ess:.0f}; "
                + ", ".join(f"{summary} R-hat {r:.3f} ESS/s {e / seconds:.2f}" for summary, (r, e) in table.items())
            )
            print(f"{case}: {notes[kernel]}", flush=True)
        rows.append(Comparison(f"s per effective draw of the worst shared summary, {case}, defaults",
                               per_draw["collapsed"], "kernel='partially_collapsed'", per_draw["partially_collapsed"],
                               "; ".join(notes.values())))
    return rows
