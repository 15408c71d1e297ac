"""Bayesian Rule Lists against imodels' BayesianRuleListClassifier (pure Python) and pysbrl (C, MAP lists).

Needs the real datasets (INTERPRETABLE_ZOO_DATA); peers: `pip install imodels six` and
`apt-get install libgsl-dev; pip install --no-build-isolation pysbrl pyfim`.
"""

from __future__ import annotations

import os
import tempfile
import time
import warnings

import jax
import jax.numpy as jnp
import numpy as np
import numpyro.distributions as dist
import pandas as pd
from sklearn.metrics import roc_auc_score
from sklearn.model_selection import StratifiedKFold

from benchmarks.runner import (
    SPEED_ROUNDS,
    Comparison,
    PeerUnavailable,
    benchmark,
    import_peer,
    interleaved_rounds,
    median_of,
    ratio_range,
    rows_against,
    time_call,
)
from interpretable_zoo.datasets import load_adult, load_mushroom, load_tictactoe, load_titanic, load_titanic_table
from interpretable_zoo.inference import brl_mh, tempering
from interpretable_zoo.inference.brl import DEFAULT_MAX_LENGTH, KERNEL, STEPS_PER_SCAN, BayesianRuleListClassifier, fit_brl
from interpretable_zoo.inference.convergence import worst
from interpretable_zoo.inference.rule_mining import (antecedent_neighbours, fit_item_encoder, mine_antecedents,
                                                     truth_table)
from interpretable_zoo.models import brl

SEED = 0
FIT = {}
"""Fits at the defaults: 8 chains in two learning groups, tempering, until converged (at most 60 s)."""
IMODELS_ITERATIONS = 10000  # per chain, 3 chains (its default chain count)


def _imodels():
    return import_peer("imodels", "pip install imodels six")


def tictactoe_antecedents(min_support=0.05):
    data = load_tictactoe()
    encoder = fit_item_encoder(data.X)
    items = encoder.transform(data.X)
    antecedents = mine_antecedents(items, data.y, min_support=min_support, max_cardinality=2, item_columns=encoder.item_columns)
    return data, items, antecedents


def ours_timer(table, y, antecedents, num_chains, num_iterations, capacity=20, n_rungs=1, block=100,
               neighbour_moves=False):
    """A function timing ``num_iterations`` iterations of ``num_chains`` vectorized chains (compiled here)
    and returning seconds per iteration per chain. One rung and ``block`` > 1: the kernel's ``step``,
    ``block`` MH iterations per call, no trace kept. Otherwise the tempering engine's compiled scans (an MH
    step of every rung, a swap round and the posterior rung's record per iteration), without its host
    work. ``neighbour_moves``: the kernel proposes neighbour moves too, as ``fit_brl``'s does."""
    cardinalities = np.array([len(a) for a in antecedents])
    keys = jax.random.split(jax.random.PRNGKey(SEED), num_chains)
    neighbours = antecedent_neighbours(antecedents) if neighbour_moves else None
    if n_rungs == 1 and block > 1:
        static, data = brl_mh.make_target(table, cardinalities, 2, y, brl.Priors(), capacity, steps_per_call=block,
                                          neighbours=neighbours)
        states = jax.vmap(lambda key: brl_mh.init(static, data, key))(keys)
        calls = num_iterations // block

        def call(i, states):
            return brl_mh.step(static, data, states, jax.vmap(lambda key: jax.random.fold_in(key, i))(keys), jnp.ones(num_chains))[0]

        run = jax.jit(lambda states: jax.lax.fori_loop(0, calls, call, states))
        iterations = calls * block
    else:
        static, data = brl_mh.make_target(table, cardinalities, 2, y, brl.Priors(), capacity, neighbours=neighbours,
                                          tempered=n_rungs > 1)  # as fit_brl builds it
        states = tempering.initial_ladder(KERNEL, static, data, tempering.chain_keys(SEED, num_chains), n_rungs)
        schedule = jnp.asarray(tempering.default_schedule(n_rungs))
        run = lambda ladder: tempering.ladder_scans(KERNEL, static, data, ladder, schedule, num_iterations, num_iterations)  # noqa: E731
        iterations = num_iterations
    jax.block_until_ready(run(states))

    def seconds_per_iteration():
        start = time.perf_counter()
        jax.block_until_ready(run(states))
        return (time.perf_counter() - start) / (iterations * num_chains)

    return seconds_per_iteration


class FitTimer:
    """Times ``fit_brl`` at ``num_chains`` chains, 1 Metropolis-Hastings step per draw, untempered (unless
    ``options`` say otherwise), a fixed number of draws and no tuning, in seconds per draw per chain: the
    difference between fits of ``draws`` and ``draws // 10`` draws, so that the set-up (truth table,
    neighbour tables, fit-time check) and the result (its InferenceData) cancel out; ``setup_seconds``: that
    fixed cost, per fit, and ``engine_seconds``: the sampling engine's share per draw and chain
    (``convergence.sample``, its chunks' host work included), of the last call."""

    FIXED = {"n_temperatures": 1, "steps_per_scan": 1, "num_warmup": 0, "progress_bar": False, "seed": SEED}

    def __init__(self, items, y, antecedents, num_chains=10, draws=20000, **options):
        self.items, self.y, self.antecedents = items, y, antecedents
        self.num_chains, self.draws = num_chains, draws
        self.options = {**self.FIXED, **options}
        self.setup_seconds = self.engine_seconds = None
        self._fit(draws // 10), self._fit(draws)  # compiles; whatever the first fit of each length runs once

    def _fit(self, draws):
        start = time.perf_counter()
        result = fit_brl(self.items, self.y, antecedents=self.antecedents, num_chains=self.num_chains,
                         num_samples=draws, **self.options)
        return time.perf_counter() - start, result.run.seconds["total"]

    def __call__(self):
        (short, _), (long, engine) = self._fit(self.draws // 10), self._fit(self.draws)
        per_draw = (long - short) / (self.draws - self.draws // 10)
        self.setup_seconds = short - per_draw * (self.draws // 10)
        self.engine_seconds = engine / (self.draws * self.num_chains)
        return per_draw / self.num_chains


def write_sbrl_files(table, y, directory):
    """The antecedent truth tables and labels in pysbrl's text format."""
    data_path, label_path = os.path.join(directory, "data.txt"), os.path.join(directory, "label.txt")
    with open(data_path, "w") as file:
        file.write(f"n_items: {table.shape[1]}\nn_samples: {table.shape[0]}\n")
        for k in range(table.shape[1]):
            file.write(f"{{a{k}}}  " + " ".join("1" if bit else "0" for bit in table[:, k]) + "\n")
    with open(label_path, "w") as file:
        file.write(f"n_items: 2\nn_samples: {len(y)}\n")
        for label in (0, 1):
            file.write(f"{{label={label}}} " + " ".join("1" if v == label else "0" for v in y) + "\n")
    return data_path, label_path


FIT_ROW = "10 chains through fit_brl, 1 MH step per draw, untempered"
FIT_NOTES = (
    "fit_brl's lists of at most 30 rules with neighbour moves; per draw: the difference of fits of 10,000 and "
    "100,000 draws"
)
"""The row of ``brl_mh_speed`` that times the whole engine (``convergence.sample``) at one step per draw."""
KERNEL_ROW = "10 chains, fit_brl's kernel, compiled step"
"""The row that times fit_brl's kernel (lists of at most 30 rules, neighbour moves) as the plain step is timed
(100 iterations per call): against the 10-chain row, the cost of that configuration."""
ENGINE_ROW = "10 chains, fit_brl's kernel in the engine's compiled scans, 1 MH step per scan, untempered"
"""The row that times the same kernel (lists of at most 30 rules, neighbour moves, one step per call) in the
engine's compiled scans without their host work: this row minus KERNEL_ROW is the scans' own work (one call
of the step a scan, the record, the summaries and the swap statistics), FIT_ROW minus this row the host's
share of a draw."""


def engine_timer(table, y, antecedents):
    """The timer of :data:`ENGINE_ROW` (10 chains, 20,000 scans a call)."""
    return ours_timer(table, y, antecedents, 10, 20000, n_rungs=1, block=1, neighbour_moves=True,
                      capacity=brl.list_capacity(len(antecedents), DEFAULT_MAX_LENGTH))


@benchmark(
    "brl_mh_speed",
    peers=("imodels", "pysbrl"),
    description=(
        "Tic-tac-toe (958 boards; 1,328 antecedents mined per class at support 0.05, cardinality <= 2). Time per "
        "Metropolis-Hastings iteration per chain. Goals: at least 100x imodels' pure-Python BRL (which mines its "
        "own antecedents from the same items); at least 1x pysbrl (same antecedents, 10 chains; pysbrl keeps only "
        "MAP lists, ours a posterior) with 10 vectorized chains on CPU; on a GPU, 1,000 vectorized chains (the GPU "
        "run times 10 to 10,000 chains against pysbrl on the same machine's CPU, and leaves imodels out). Ours: "
        "lists of at most 20 rules, the kernel's compiled sample step (100 iterations per call, uniforms drawn "
        "once per call) without trace collection; plain Metropolis-Hastings (one rung) unless the row names "
        "a 4-rung tempering ladder (the engine's scans: 4 MH steps, a swap round and a kept record), fit_brl's "
        "kernel (lists of at most 30 rules with neighbour moves) as a compiled step (100 iterations per call) "
        "or in the engine's compiled scans (one step per call) without their host work, or fit_brl (the whole "
        "engine at 1 MH step per draw, that kernel). Against pysbrl the rows split a draw's cost: the plain "
        "step; the fit's kernel configuration (its step row against the 10-chain row); the scans' own work "
        "(the engine's row against the kernel's step: a call of the step per scan, the record, the summaries "
        "and the swap statistics); the host's share (fit_brl's row against the engine's: chunk dispatch, "
        "transfers, the convergence verdict and the result). Every "
        "configuration and peer is timed once per round, in 3 interleaved rounds; the table gives medians and "
        "the notes the lowest and highest ratio of a round."
    ),
)
def bench_speed() -> list[Comparison]:
    data, items, antecedents = tictactoe_antecedents()
    table = truth_table(items, antecedents)
    on_gpu = jax.default_backend() == "gpu"
    if on_gpu:  # the many-chain rows that a GPU is for, against pysbrl (imodels' CPU time does not change)
        ours = {
            "10 chains": ours_timer(table, data.y, antecedents, 10, 5000),
            "1,000 chains on GPU": ours_timer(table, data.y, antecedents, 1000, 2000),
            "10,000 chains on GPU": ours_timer(table, data.y, antecedents, 10000, 1000),
            "1,000 chains on GPU, 4-temperature ladder": ours_timer(table, data.y, antecedents, 1000, 500, n_rungs=4),
        }
        against_pysbrl = list(ours)
        peers, missing = {}, {}
    else:
        ours = {
            "1 chain": ours_timer(table, data.y, antecedents, 1, 200000),
            "4 chains": ours_timer(table, data.y, antecedents, 4, 100000),
            "10 chains": ours_timer(table, data.y, antecedents, 10, 50000),
            "100 chains": ours_timer(table, data.y, antecedents, 100, 5000),
            "10 chains, 4-temperature ladder": ours_timer(table, data.y, antecedents, 10, 10000, n_rungs=4),
            KERNEL_ROW: ours_timer(table, data.y, antecedents, 10, 50000, neighbour_moves=True,
                                   capacity=brl.list_capacity(len(antecedents), DEFAULT_MAX_LENGTH)),
            ENGINE_ROW: engine_timer(table, data.y, antecedents),
            FIT_ROW: FitTimer(items, data.y, antecedents, draws=100_000),  # a difference well above the fits' noise
        }
        against_pysbrl = ["10 chains", KERNEL_ROW, ENGINE_ROW, FIT_ROW]
        imodels = ImodelsTimer(items, data.y)
        peers, missing = {"imodels": imodels}, {}
    try:
        peers["pysbrl"] = PysbrlTimer(table, data.y)
    except PeerUnavailable as error:
        missing["pysbrl"] = str(error)
    rounds = interleaved_rounds({**ours, **peers}, SPEED_ROUNDS)

    def compare(task, peer, notes):
        ours_seconds = median_of(rounds, task)
        if peer in missing:
            return Comparison(f"s / iteration / chain, {task}", ours_seconds, peer, None, missing[peer])
        return Comparison(f"s / iteration / chain, {task}", ours_seconds, peer, median_of(rounds, peer),
                          f"{ratio_range(rounds, task, peer)}; {notes}")

    def pysbrl_notes(task):
        notes = "same antecedents; pysbrl (CPU) runs 10 chains"
        if task != FIT_ROW:
            return notes
        fit = ours[FIT_ROW]
        return (f"{notes}; {FIT_NOTES}; of the last round: the engine (convergence.sample) "
                f"{fit.engine_seconds * 1e6:.1f} us per draw and chain, set-up and result {fit.setup_seconds:.2f} s per fit")

    rows = [compare(task, "pysbrl", pysbrl_notes(task)) for task in against_pysbrl]
    if on_gpu:
        return rows
    notes = f"imodels (3 serial chains) mined {imodels.n_antecedents} antecedents"
    return rows + [compare(task, "imodels", notes) for task in ours]


class PysbrlTimer:
    """Times pysbrl's ``train_sbrl`` (10 chains, the same antecedents, ``iterations`` each), seconds per
    iteration per chain; its input files live as long as the timer."""

    def __init__(self, table, y, iterations=30000):
        self.pysbrl = import_peer("pysbrl", "see the module docstring")
        self.directory = tempfile.TemporaryDirectory()
        self.paths = write_sbrl_files(table, y, self.directory.name)
        self.iterations = iterations

    def __call__(self):
        start = time.perf_counter()
        self.pysbrl.train_sbrl(*self.paths, lambda_=3, eta=1, max_iters=self.iterations, n_chains=10, alpha=1, seed=SEED)
        return (time.perf_counter() - start) / (self.iterations * 10)


class ImodelsTimer:
    """Times imodels' sampler, seconds per iteration per chain: the difference between fits of 11,000
    and 1,000 iterations (3 chains), so that its mining and set-up cancel out."""

    def __init__(self, items, y):
        self.imodels = _imodels()
        self.features, self.y = np.asarray(items), y
        self.n_antecedents = None

    def _fit_seconds(self, iterations):
        model = self.imodels.BayesianRuleListClassifier(max_iter=iterations, n_chains=3, minsupport=0.05, random_state=SEED)
        start = time.perf_counter()
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            model.fit(self.features, self.y)
        self.n_antecedents = len(model.itemsets)
        return time.perf_counter() - start

    def __call__(self):
        return (self._fit_seconds(11000) - self._fit_seconds(1000)) / (10000 * 3)


def _metrics(y, probabilities):
    return float(np.mean((probabilities > 0.5) == y)), float(roc_auc_score(y, probabilities))


def _compare_on_folds(name, X, y, folds, items_for_imodels, min_support=0.1, ours_options=(), imodels_options=()) -> Comparison:
    """Our classifier (BRL-point) and imodels' on the same folds: mean accuracy and AUC, total fit time, and
    how many of our folds' fits converged (worst R-hat and bulk ESS over the folds). Without
    ``items_for_imodels`` only ours runs."""
    imodels = _imodels() if items_for_imodels is not None else None
    ours_time = peer_time = 0.0
    ours_scores, peer_scores, ours_runs = [], [], []
    for train, test in folds:
        start = time.perf_counter()
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            ours = BayesianRuleListClassifier(min_support=min_support, seed=SEED, **{**FIT, **dict(ours_options)})
            ours.fit(X.iloc[train], y[train])
        ours_time += time.perf_counter() - start
        ours_scores.append(_metrics(y[test], ours.predict_proba(X.iloc[test])[:, 1]))
        ours_runs.append(ours.result_.run)
        if imodels is None:
            continue
        peer = imodels.BayesianRuleListClassifier(
            max_iter=IMODELS_ITERATIONS, minsupport=min_support, random_state=SEED, **dict(imodels_options)
        )
        start = time.perf_counter()
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            peer.fit(items_for_imodels[train], y[train])
        peer_time += time.perf_counter() - start
        peer_scores.append(_metrics(y[test], peer.predict_proba(items_for_imodels[test])[:, 1]))
    ours_acc, ours_auc = np.mean(ours_scores, axis=0)
    rhats, esses = zip(*(worst(run.diagnostics) for run in ours_runs))
    convergence = (
        f"ours converged on {sum(run.converged for run in ours_runs)} of {len(folds)} folds "
        f"(worst R-hat {max(rhats):.3f}, worst bulk ESS {min(esses):.0f})"
    )
    if imodels is None:
        notes = f"accuracy {ours_acc:.3f}, AUC {ours_auc:.3f} ({len(folds)} folds); {convergence}"
        return Comparison(name, ours_time, "imodels", None, notes)
    peer_acc, peer_auc = np.mean(peer_scores, axis=0)
    notes = (
        f"accuracy {ours_acc:.3f} vs {peer_acc:.3f}; AUC {ours_auc:.3f} vs {peer_auc:.3f} ({len(folds)} folds); "
        f"{convergence}"
    )
    return Comparison(name, ours_time, "imodels", peer_time, notes)


TICTACTOE_CARDINALITY_3 = {"negations": False, "max_cardinality": 3}
"""SBRL's setting for tic-tac-toe: a win is three in a row, a conjunction of three ``cell=x`` items, so
items without negations and antecedents of up to three items."""


def _cv_folds(y, n_splits=5):
    return list(StratifiedKFold(n_splits=n_splits, shuffle=True, random_state=SEED).split(np.zeros(len(y)), y))


@benchmark(
    "brl_accuracy",
    peers=("imodels",),
    description=(
        "Reproductions: Titanic (Letham's split; the bundled 2201-passenger table, 5-fold), tic-tac-toe (5-fold; "
        "SBRL reaches accuracy 1.0; items with negations and antecedents of at most 2 items, then SBRL's setting: "
        "items c1=x... without negations, antecedents of up to 3 items, both peers alike) and mushroom (5-fold; "
        "imodels not run: its pandas FP-growth over 223 items takes minutes per fold). On tic-tac-toe both peers mine "
        "antecedents at support 0.05 per class; one more row fits SBRL's setting at our default support, 0.1. Ours: BRL-point at the "
        "defaults (8 chains of parallel tempering in two learning groups, run until converged or 60 s); imodels: 3 chains x 10000 "
        "iterations on the same items and folds. Times are whole fits (mining included) summed over folds."
    ),
)
def bench_accuracy() -> list[Comparison]:
    rows = []
    train, test = load_titanic("train"), load_titanic("test")
    X = pd.concat([train.X, test.X], ignore_index=True)
    y = np.concatenate([train.y, test.y])
    encoder = fit_item_encoder(X)
    split = [(np.arange(len(train.y)), np.arange(len(train.y), len(y)))]
    rows.append(_compare_on_folds("Titanic, Letham's split", X, y, split, encoder.transform(X)))
    bundled = load_titanic_table()
    rows.append(
        _compare_on_folds("Titanic, 2201 passengers, 5-fold", bundled.X, bundled.y, _cv_folds(bundled.y), fit_item_encoder(bundled.X).transform(bundled.X))
    )
    tictactoe = load_tictactoe()
    items = fit_item_encoder(tictactoe.X).transform(tictactoe.X)
    rows.append(_compare_on_folds("tic-tac-toe, 5-fold", tictactoe.X, tictactoe.y, _cv_folds(tictactoe.y), items, min_support=0.05))
    positive_items = fit_item_encoder(tictactoe.X, negations=False).transform(tictactoe.X)
    rows.append(
        _compare_on_folds(
            "tic-tac-toe, 5-fold, antecedents of up to 3 items (SBRL's setting)",
            tictactoe.X,
            tictactoe.y,
            _cv_folds(tictactoe.y),
            positive_items,
            min_support=0.05,
            ours_options=TICTACTOE_CARDINALITY_3,
            imodels_options={"maxcardinality": 3},
        )
    )
    rows.append(
        _compare_on_folds(
            "tic-tac-toe, 5-fold, SBRL's setting at our default support 0.1 (imodels not run)",
            tictactoe.X,
            tictactoe.y,
            _cv_folds(tictactoe.y),
            None,
            ours_options=TICTACTOE_CARDINALITY_3,
        )
    )
    mushroom = load_mushroom()
    rows.append(_compare_on_folds("mushroom, 5-fold (imodels not run)", mushroom.X, mushroom.y, _cv_folds(mushroom.y), None, min_support=0.3))
    return rows


@benchmark(
    "brl_adult_scale",
    peers=(),
    description=(
        "Scale: UCI adult (32,561 rows; numeric columns cut at quartiles; antecedents at support 0.1 per class), "
        "one stratified 80/20 split, BRL-point accuracy and AUC at the defaults (until converged or 60 s), whole fit "
        "timed. No peer row: imodels' pure-Python sampler needs hours here."
    ),
)
def bench_adult() -> list[Comparison]:
    adult = load_adult()
    train, test = _cv_folds(adult.y)[0]
    start = time.perf_counter()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        model = BayesianRuleListClassifier(min_support=0.1, seed=SEED, **FIT).fit(adult.X.iloc[train], adult.y[train])
    seconds = time.perf_counter() - start
    accuracy, auc = _metrics(adult.y[test], model.predict_proba(adult.X.iloc[test])[:, 1])
    n_antecedents = len(model.result_.antecedents)
    notes = f"accuracy {accuracy:.3f}, AUC {auc:.3f}, {n_antecedents} antecedents; {model.result_.run.message()}"
    return [Comparison("adult, 80/20 split", seconds, "none", None, notes)]


@benchmark(
    "brl_mining",
    peers=("mlxtend",),
    description=(
        "Antecedent mining per class (itemsets of at most 2 items, no two items from one column) against "
        "mlxtend's fpgrowth on the same item matrices, followed by the same column filter; both must find the "
        "same antecedents. Goal: at least as fast as mlxtend."
    ),
)
def bench_mining() -> list[Comparison]:
    fpgrowth = import_peer("mlxtend.frequent_patterns", "pip install mlxtend").fpgrowth
    rows = []
    for name, data, min_support in (("tic-tac-toe", load_tictactoe(), 0.05), ("mushroom", load_mushroom(), 0.3)):
        encoder = fit_item_encoder(data.X)
        items = encoder.transform(data.X)

        def ours():
            return mine_antecedents(items, data.y, min_support=min_support, max_cardinality=2, item_columns=encoder.item_columns)

        def peer():
            found = set()
            for label in np.unique(data.y):
                frame = pd.DataFrame(items[data.y == label].astype(bool))
                for itemset in fpgrowth(frame, min_support=min_support, max_len=2)["itemsets"]:
                    itemset = tuple(sorted(int(i) for i in itemset))
                    if len(set(encoder.item_columns[list(itemset)])) == len(itemset):
                        found.add(itemset)
            return found

        mined = ours()
        assert set(mined) == peer(), "the miners disagree"
        rows.append(
            Comparison(
                f"{name}: {items.shape[1]} items, support {min_support}",
                time_call(ours, repeat=3),
                "mlxtend fpgrowth",
                time_call(peer, repeat=1, warmup=0),
                f"{len(mined)} antecedents, identical",
            )
        )
    return rows


@benchmark(
    "brl_setup",
    description=(
        "The truth table of a fit and the kernel's bit-packed tables built from it (rule_mining.truth_table, "
        "then brl_mh.make_target's duplicate-sample check and packing, no neighbour tables), antecedent-major "
        "as fit_brl builds them, against the same tables built sample-major (a column per antecedent, "
        "np.packbits over each sample's row for the duplicate check, the table's transpose packed): mushroom "
        "(support 0.3) and adult (support 0.1), both giving the same packed words. Medians of 3 calls."
    ),
)
def bench_setup() -> list[Comparison]:
    rows = []
    for name, data, min_support in (("mushroom", load_mushroom(), 0.3), ("adult", load_adult(), 0.1)):
        encoder = fit_item_encoder(data.X)
        items = encoder.transform(data.X)
        codes = np.unique(np.asarray(data.y), return_inverse=True)[1].astype(np.int32)
        antecedents = mine_antecedents(items, codes, min_support=min_support, item_columns=encoder.item_columns)
        n_words = -(-len(codes) // 32)

        def ours():
            table = truth_table(items, antecedents)
            brl_mh.distinct_samples(table, codes)
            return brl_mh.pack_bits(table.T, n_words)

        def sample_major():
            table = np.ones((items.shape[0], len(antecedents)), dtype=bool)
            for k, antecedent in enumerate(antecedents):
                table[:, k] = items[:, list(antecedent)].astype(bool).all(axis=1)
            label_bytes = codes.astype("<i4").view(np.uint8).reshape(len(codes), 4)
            rows_as_bytes = np.ascontiguousarray(np.concatenate([np.packbits(table, axis=1), label_bytes], axis=1))
            np.unique(rows_as_bytes.view(np.dtype((np.void, rows_as_bytes.shape[1]))).ravel(), return_index=True,
                      return_counts=True)
            return brl_mh.pack_bits(table.T, n_words)

        assert np.array_equal(ours(), sample_major()), "the two layouts pack different words"
        rows.append(Comparison(f"{name}: {items.shape[0]} samples x {len(antecedents)} antecedents",
                               time_call(ours, repeat=3), "sample-major build", time_call(sample_major, repeat=3),
                               "the same packed words"))
    return rows


@benchmark(
    "brl_hyperprior_cost",
    description=(
        "The cost of sampling lam ~ Gamma(3, 1) within the chain (slice sampling given the list, on every "
        "replica of every scan), and of sampling eta ~ Gamma(2, 2) beside it (likewise), and of sampling alpha ~ "
        "Gamma(2, 2) alone (slice sampling given the list's label counts; every MH step then evaluates the "
        "likelihood's log Gamma terms instead of reading a table), against the same fit with lam = 3, eta = 1 and "
        "alpha = 1 fixed (the hyperpriors' means): fit_brl on tic-tac-toe's 1,328 antecedents "
        "(support 0.05 per class, cardinality <= 2), 4 chains x 4 rungs, 10 MH steps per scan, no tuning; "
        "seconds per scan and chain from the difference of fits of 1,024 and 102 scans. All are timed once per "
        "round, in 3 interleaved rounds; the table gives medians. The ratio is the fixed fit's time over the "
        "sampled one's (below 1: the price of the hyperprior)."
    ),
)
def bench_hyperprior_cost() -> list[Comparison]:
    data, items, antecedents = tictactoe_antecedents()
    ladder = dict(num_chains=4, draws=1024, n_temperatures=4, steps_per_scan=STEPS_PER_SCAN)
    lam, eta = dist.Gamma(3.0, 1.0), dist.Gamma(2.0, 2.0)
    priors = {"lam": brl.Priors(lam=lam, eta=1.0), "lam and eta": brl.Priors(lam=lam, eta=eta),
              "alpha": brl.Priors(alpha=dist.Gamma(2.0, 2.0)), "fixed": brl.Priors(lam=3.0, eta=1.0)}
    timers = {name: FitTimer(items, data.y, antecedents, priors=value, **ladder) for name, value in priors.items()}
    return rows_against(timers, "fixed", "the same fit, lam = 3, eta = 1 and alpha = 1 fixed",
                        "s / scan / chain, {} sampled")
