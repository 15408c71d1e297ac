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
import numpy as np
import pandas as pd
from sklearn.metrics import roc_auc_score
from sklearn.model_selection import StratifiedKFold

from benchmarks.runner import Comparison, PeerUnavailable, benchmark, import_peer, time_call
from interpretable_zoo.datasets import load_adult, load_mushroom, load_tictactoe, load_titanic, load_titanic_table
from interpretable_zoo.diagnostics import summary
from interpretable_zoo.inference import brl_mh
from interpretable_zoo.inference.brl import TEMPERED_LADDER, BayesianRuleListClassifier
from interpretable_zoo.inference.rule_mining import fit_item_encoder, mine_antecedents, truth_table
from interpretable_zoo.models import brl

SEED = 0
FIT = {"num_warmup": 2000, "num_samples": 5000, "num_chains": 4}
IMODELS_ITERATIONS = 10000  # per chain, 3 chains (its default chain count)


def _imodels():
    return import_peer("imodels", "pip install imodels six")


def tictactoe_antecedents(min_support=0.05):
    data = load_tictactoe()
    encoder = fit_item_encoder(data.X)
    items = encoder.transform(data.X)
    antecedents = mine_antecedents(items, data.y, min_support=min_support, max_cardinality=2, item_columns=encoder.item_columns)
    return data, items, antecedents


def ours_seconds_per_iteration(table, y, antecedents, num_chains, num_iterations, capacity=20, ladder=(1.0,), block=100):
    """Seconds per iteration per chain of the compiled kernel (``BRLMetropolisHastings.sample`` with
    ``block`` iterations per call, vectorized chains, no trace kept). An iteration is one MH step of
    every copy of the ``ladder`` plus the swaps: one MH step with the plain kernel."""
    kernel = brl_mh.BRLMetropolisHastings(inverse_temperatures=ladder, steps_per_sample=block)
    cardinalities = np.array([len(a) for a in antecedents])
    keys = jax.random.split(jax.random.PRNGKey(SEED), num_chains)
    states = kernel.init(keys, 0, None, (table, cardinalities, 2, y), {"priors": brl.Priors(), "max_length": capacity})
    run = jax.jit(lambda states: jax.lax.fori_loop(0, num_iterations // block, lambda _, s: kernel.sample(s, (), {}), states))
    return time_call(lambda: jax.block_until_ready(run(states)), repeat=3) / (num_iterations // block * block * num_chains)


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


@benchmark(
    "brl_mh_speed",
    peers=("imodels", "pysbrl"),
    description=(
        "Tic-tac-toe (958 boards; 1,328 antecedents mined per class at support 0.05, cardinality <= 2). Time per "
        "Metropolis-Hastings iteration per chain. Goals: at least 100x imodels' pure-Python BRL (which mines its "
        "own antecedents from the same items); at least 1x pysbrl (same antecedents, 10 chains; pysbrl keeps only "
        "MAP lists, ours a posterior) with 10 vectorized chains on CPU; on a GPU, 1,000 vectorized chains. Ours: "
        "lists of at most 20 rules, the kernel's compiled sample step (100 iterations per call, uniforms drawn "
        "once per call) without trace collection; plain Metropolis-Hastings (fit_brl's default) unless the row "
        "names the 4-temperature ladder TEMPERED_LADDER (4 MH steps and a swap per iteration)."
    ),
)
def bench_speed() -> list[Comparison]:
    data, items, antecedents = tictactoe_antecedents()
    table = truth_table(items, antecedents)
    rows = []
    ours_10 = ours_seconds_per_iteration(table, data.y, antecedents, 10, 20000)
    ours_1 = ours_seconds_per_iteration(table, data.y, antecedents, 1, 20000)
    try:
        pysbrl = import_peer("pysbrl", "see the module docstring")
        with tempfile.TemporaryDirectory() as directory:
            data_path, label_path = write_sbrl_files(table, data.y, directory)
            iterations = 30000
            peer = time_call(
                lambda: pysbrl.train_sbrl(data_path, label_path, lambda_=3, eta=1, max_iters=iterations, n_chains=10, alpha=1, seed=SEED),
                repeat=3,
            )
        rows.append(Comparison("s / iteration / chain, 10 chains", ours_10, "pysbrl", peer / (iterations * 10), "same antecedents"))
    except PeerUnavailable as error:
        rows.append(Comparison("s / iteration / chain, 10 chains", ours_10, "pysbrl", None, str(error)))
    imodels = _imodels()
    features = np.asarray(items)
    timings = {}
    for iterations in (1000, 11000):
        model = imodels.BayesianRuleListClassifier(max_iter=iterations, n_chains=3, minsupport=0.05, random_state=SEED)
        start = time.perf_counter()
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            model.fit(features, data.y)
        timings[iterations] = time.perf_counter() - start
    peer = (timings[11000] - timings[1000]) / (10000 * 3)
    notes = f"imodels mined {len(model.itemsets)} antecedents"
    rows.append(Comparison("s / iteration / chain, 1 chain (imodels: 3 serial)", ours_1, "imodels", peer, notes))
    ours_4 = ours_seconds_per_iteration(table, data.y, antecedents, 4, 20000)
    rows.append(Comparison("s / iteration / chain, 4 chains (fit_brl's default)", ours_4, "imodels", peer, notes))
    rows.append(Comparison("s / iteration / chain, 10 chains", ours_10, "imodels", peer, notes))
    ours_100 = ours_seconds_per_iteration(table, data.y, antecedents, 100, 5000)
    rows.append(Comparison("s / iteration / chain, 100 chains", ours_100, "imodels", peer, notes))
    ours_ladder = ours_seconds_per_iteration(table, data.y, antecedents, 10, 5000, ladder=TEMPERED_LADDER)
    rows.append(Comparison("s / iteration / chain, 10 chains, 4-temperature ladder", ours_ladder, "imodels", peer, notes))
    if jax.default_backend() == "gpu":
        ours_gpu = ours_seconds_per_iteration(table, data.y, antecedents, 1000, 2000)
        rows.append(Comparison("s / iteration / chain, 1,000 chains on GPU", ours_gpu, "pysbrl (CPU, 10 chains)", rows[0].peer_seconds, ""))
    return rows


def _metrics(y, probabilities):
    return float(np.mean((probabilities > 0.5) == y)), float(roc_auc_score(y, probabilities))


def _compare_on_folds(name, X, y, folds, items_for_imodels, min_support=0.1, ours_options=(), imodels_options=()) -> Comparison:
    """Our classifier (BRL-point) and imodels' on the same folds: mean accuracy and AUC, total fit time.
    Without ``items_for_imodels`` only ours runs."""
    imodels = _imodels() if items_for_imodels is not None else None
    ours_time = peer_time = 0.0
    ours_scores, peer_scores = [], []
    for train, test in folds:
        start = time.perf_counter()
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            ours = BayesianRuleListClassifier(min_support=min_support, seed=SEED, **{**FIT, **dict(ours_options)})
            ours.fit(X.iloc[train], y[train])
        ours_time += time.perf_counter() - start
        ours_scores.append(_metrics(y[test], ours.predict_proba(X.iloc[test])[:, 1]))
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
    if imodels is None:
        return Comparison(name, ours_time, "imodels", None, f"accuracy {ours_acc:.3f}, AUC {ours_auc:.3f} ({len(folds)} folds)")
    peer_acc, peer_auc = np.mean(peer_scores, axis=0)
    notes = f"accuracy {ours_acc:.3f} vs {peer_acc:.3f}; AUC {ours_auc:.3f} vs {peer_auc:.3f} ({len(folds)} folds)"
    return Comparison(name, ours_time, "imodels", peer_time, notes)


TICTACTOE_CARDINALITY_3 = {"negations": False, "max_cardinality": 3, "num_warmup": 1000, "num_samples": 2000, "steps_per_sample": 10}
"""SBRL's setting for tic-tac-toe: a win is three in a row, a conjunction of three ``cell=x`` items, so
items without negations and antecedents of up to three items; 30,000 iterations per chain, every 10th kept."""


def _cv_folds(y, n_splits=5):
    return list(StratifiedKFold(n_splits=n_splits, shuffle=True, random_state=SEED).split(np.zeros(len(y)), y))


@benchmark(
    "brl_accuracy",
    peers=("imodels",),
    description=(
        "Reproductions: Titanic (Letham's split; the bundled 2201-passenger table, 5-fold), tic-tac-toe (5-fold; "
        "SBRL reaches accuracy 1.0; items with negations and antecedents of at most 2 items, then SBRL's setting: "
        "items c1=x... without negations, antecedents of up to 3 items, both peers alike; once more with 16 chains, "
        "as the posterior there has modes that 4 chains do not all reach) and mushroom (5-fold; imodels not "
        "run: its pandas FP-growth over 223 items takes minutes per fold). Ours: BRL-point, 4 chains x (2000 + "
        "5000) iterations of plain Metropolis-Hastings (cardinality-3 rows: 4 or 16 chains x 30000 iterations, "
        "every 10th kept); imodels: 3 chains x 10000 iterations on the same items and folds. Times "
        "are whole fits (mining included) summed over folds."
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
    sbrl_setting = (
        ("tic-tac-toe, 5-fold, antecedents of up to 3 items (SBRL's setting)", 4, positive_items),
        ("tic-tac-toe, 5-fold, SBRL's setting, 16 chains (imodels not run)", 16, None),
    )
    for name, num_chains, items_for_imodels in sbrl_setting:
        rows.append(
            _compare_on_folds(
                name,
                tictactoe.X,
                tictactoe.y,
                _cv_folds(tictactoe.y),
                items_for_imodels,
                min_support=0.05,
                ours_options={**TICTACTOE_CARDINALITY_3, "num_chains": num_chains},
                imodels_options={"maxcardinality": 3},
            )
        )
    mushroom = load_mushroom()
    rows.append(_compare_on_folds("mushroom, 5-fold (imodels not run)", mushroom.X, mushroom.y, _cv_folds(mushroom.y), None, min_support=0.3))
    return rows


def _mixing(classifier, X, y):
    """Fit time and the R-hat and bulk ESS of list length and log posterior over the chains."""
    start = time.perf_counter()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        classifier.fit(X, y)
    seconds = time.perf_counter() - start
    table = summary(classifier.result_)
    stats = {name: (table.loc[name, "r_hat"], table.loc[name, "ess_bulk"]) for name in ("length", "log_posterior")}
    return seconds, ", ".join(f"{name} R-hat {r_hat:.2f} ESS {ess:.0f}" for name, (r_hat, ess) in stats.items())


@benchmark(
    "brl_mixing",
    peers=(),
    description=(
        "Mixing of parallel tempering (TEMPERED_LADDER: 4 inverse temperatures 1, 0.46, 0.22, 0.1 per chain; "
        "swaps between neighbours) against plain Metropolis-Hastings (the default), same seed, chains and iterations: "
        "R-hat and bulk ESS of the list length and log posterior over 4 chains. Peer column: the plain sampler; "
        "times are whole fits (mining and compilation included)."
    ),
)
def bench_mixing() -> list[Comparison]:
    train = load_titanic("train")
    bundled = load_titanic_table()
    tictactoe = load_tictactoe()
    cases = (
        ("Titanic, Letham's training split, 4 x (2000 + 5000)", train.X, train.y, FIT),
        ("Titanic, 2201 passengers, 4 x (2000 + 5000)", bundled.X, bundled.y, FIT),
        ("Titanic, 2201 passengers, 4 x (1000 + 2000)", bundled.X, bundled.y, {**FIT, "num_warmup": 1000, "num_samples": 2000}),
        ("tic-tac-toe, antecedents of up to 3 items, 4 x (10000 + 20000), every 10th kept", tictactoe.X, tictactoe.y,
         {**FIT, **TICTACTOE_CARDINALITY_3, "min_support": 0.05}),
    )  # fmt: skip
    rows = []
    for name, X, y, options in cases:
        ladder = BayesianRuleListClassifier(seed=SEED, inverse_temperatures=TEMPERED_LADDER, **options)
        tempered_seconds, tempered = _mixing(ladder, X, y)
        plain_seconds, untempered = _mixing(BayesianRuleListClassifier(seed=SEED, **options), X, y)
        rows.append(Comparison(name, tempered_seconds, "plain MH", plain_seconds, f"ladder: {tempered}; plain: {untempered}"))
    return rows


@benchmark(
    "brl_adult_scale",
    peers=(),
    description=(
        "Scale: UCI adult (32,561 rows; numeric columns cut at quartiles; antecedents at support 0.1 per class), "
        "one stratified 80/20 split, BRL-point accuracy and AUC, 4 chains x (2000 + 5000) iterations, whole fit "
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
    return [Comparison("adult, 80/20 split", seconds, "none", None, f"accuracy {accuracy:.3f}, AUC {auc:.3f}, {n_antecedents} antecedents")]


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
