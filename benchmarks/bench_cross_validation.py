"""Cross-validation as scikit-learn runs it: 5-fold ``cross_val_score`` of each estimator, each in a fresh
process with an empty persistent compilation cache, counting the programs XLA compiles in the first fold
and in the four after it (``time_to_answer_worker.CompileCounter``). Needs the real datasets
(INTERPRETABLE_ZOO_DATA).
"""

from __future__ import annotations

from benchmarks.runner import Comparison, benchmark, fresh_process_record

CASES = {
    "BayesianRuleListClassifier, Titanic (2,201 x 3 categories)": (
        "t = iz.datasets.load_titanic_table(); X, y = t.X, np.asarray(t.y)",
        "iz.BayesianRuleListClassifier(num_samples=500, num_chains=4, n_temperatures=1, progress_bar=False)",
        None,
    ),
    "BCMClusterer, zoo (101 x 16), S = 7": (
        "d = load_zoo(); X, y = d.X, np.asarray(d.y)",
        "iz.BCMClusterer(n_clusters=7, num_samples=200, num_chains=2, n_temperatures=1, progress_bar=False)",
        "adjusted_rand_score",
    ),
    "MGMClusterer, zoo (101 x 16), K = 7": (
        "d = load_zoo(); X, y = d.X, np.asarray(d.y)",
        "iz.MGMClusterer(n_clusters=7)",
        "adjusted_rand_score",
    ),
    "PrototypeClassifier, USPS 1,000 x 256": (
        "d = iz.datasets.load_usps(); X, y = d.X[:1000], np.asarray(d.y[:1000])",
        "iz.PrototypeClassifier()",
        None,
    ),
}

WORKER = """
import json, sys, time
import numpy as np
from benchmarks.time_to_answer_worker import CompileCounter
counter = CompileCounter()
import interpretable_zoo as iz
from interpretable_zoo.datasets import load_zoo
from sklearn.base import clone
from sklearn.model_selection import KFold, cross_val_score
{load}
estimator = {estimator}
folds = list(KFold(5, shuffle=True, random_state=0).split(X))
first = time.perf_counter()
train, test = folds[0]
scorer = None if {scoring!r} is None else __import__("sklearn.metrics").metrics.get_scorer({scoring!r})
rows = (lambda index: X.iloc[index]) if hasattr(X, "iloc") else (lambda index: X[index])
fitted = clone(estimator).fit(rows(train), y[train])
(scorer(fitted, rows(test), y[test]) if scorer else fitted.score(rows(test), y[test]))
first = time.perf_counter() - first
first_fold = counter.snapshot()["programs_compiled"]
rest = time.perf_counter()
cross_val_score(estimator, X, y, cv=folds[1:], scoring={scoring!r})
rest = time.perf_counter() - rest
print(json.dumps({{"first": first, "rest": rest, "first_compiled": first_fold,
                  "rest_compiled": counter.snapshot()["programs_compiled"] - first_fold}}))
"""


@benchmark(
    "cross_validation_compiles",
    description=(
        "5-fold cross_val_score (KFold, shuffled, seed 0) of each estimator, each case in a fresh process with an "
        "empty persistent compilation cache. Ours: the four folds after the first (fit and score), as one "
        "cross_val_score call; peer: the first fold alone (fit and score, compilation included), times four, "
        "what the four would cost if each compiled as the first did. The columns count the programs XLA "
        "compiled in the first fold and in the four after it; the goal is none after the first."
    ),
)
def cross_validation_compiles() -> list[Comparison]:
    rows = []
    for task, (load, estimator, scoring) in CASES.items():
        record = fresh_process_record(WORKER.format(load=load, estimator=estimator, scoring=scoring))
        print(task, record, flush=True)
        rows.append(Comparison(
            f"folds 2-5, {task}", record["rest"], "the first fold, times 4", 4 * record["first"],
            f"first fold {record['first']:.1f} s",
            columns=(("compiled, fold 1", str(record["first_compiled"])),
                     ("compiled, folds 2-5", str(record["rest_compiled"]))),
        ))  # fmt: skip
    return rows
