"""Bad and unusual input to prototype selection, Bayesian Sets, Bayesian Rule Lists, Mind the Gap, the
Bayesian Case Model, the dataset loaders and the izoo command.

A catalogue over (entry point x bad input). Each case asserts the exception type and that the message
names the argument, or the data set and the file; command-line cases assert a one-line ``izoo: ...``
message naming the option and a non-zero exit status. Ids are "<group>-<number>-<what>", numbered from
1 without gaps in each group (checked below), so the catalogue only grows: append new cases with the
next number. Corrupt data files are small files written into a temporary data folder.
"""

from __future__ import annotations

import gzip
import itertools
import os
import re
import time
import types
from pathlib import Path

import arviz as az
import h5py
import numpyro.distributions
from isolated import IsolatedCases
import numpy as np
import pandas as pd
import pytest
import scipy.io
import scipy.sparse
import xarray
from sklearn.exceptions import NotFittedError

from interpretable_zoo import cli
from interpretable_zoo import datasets as ds
from interpretable_zoo.inference import memory
from interpretable_zoo.inference.bayesian_sets import BayesianSets, estimate_membership_rate, precision_at_k
from interpretable_zoo.inference.bcm import BCMClusterer, fit_bcm
from interpretable_zoo.inference.brl import BayesianRuleListClassifier, fit_brl
from interpretable_zoo.inference.memory import InsufficientMemoryError
from interpretable_zoo.inference.mgm import MGMClusterer, fit_mgm, fit_mgm_sweep
from interpretable_zoo.inference.prototype_selection import PrototypeClassifier, select_prototypes
from interpretable_zoo.inference.rule_mining import fit_item_encoder
from interpretable_zoo.inference.set_cover import dissimilarity_quantile, dissimilarity_quantiles
from interpretable_zoo.models import bcm, brl, mgm
from interpretable_zoo.models.bayesian_sets import Priors

RNG = np.random.default_rng(0)
X = RNG.normal(size=(12, 3))
Y = np.repeat([0, 1], 6)
D = np.sqrt(((X[:, None] - X[None]) ** 2).sum(axis=2))
BINARY = (RNG.random((14, 7)) < 0.5).astype(np.uint8)
BINARY[0], BINARY[1] = 1, 0


def no_memory(monkeypatch) -> None:
    """Pretend that only 100 bytes of memory are available."""
    monkeypatch.setattr(memory, "available_bytes", lambda: 100)


def memory_runs_out(monkeypatch, after_checks: int) -> None:
    """Plenty of memory for the first ``after_checks`` checks, then only 100 bytes (memory taken meanwhile)."""
    checks = itertools.count()
    monkeypatch.setattr(memory, "available_bytes", lambda: 1 << 40 if next(checks) < after_checks else 100)


def numbered(prefix: str, cases: list) -> list:
    """``cases`` (each its arguments, then its name) as pytest params with ids "<prefix>-<number>-<name>"."""
    return [pytest.param(*case[:-1], id=f"{prefix}-{k:02d}-{case[-1]}") for k, case in enumerate(cases, 1)]


def fitted_selection():
    return select_prototypes(X, Y, eps=1.5)


# ----------------------------------------------------------------------------- prototype selection

PROTOTYPE_SELECTION = [
    (lambda mp: select_prototypes(X, Y, eps=None), ValueError, r"^eps: .*got None", "eps-none"),
    (lambda mp: select_prototypes(X, Y, eps="1"), ValueError, r"^eps: .*got '1'", "eps-string"),
    (lambda mp: select_prototypes(X, Y, eps=True), ValueError, r"^eps: ", "eps-bool"),
    (lambda mp: select_prototypes(X, Y, eps=1.0, lam="0.1"), ValueError, r"^lam: ", "lam-string"),
    (
        lambda mp: select_prototypes(X, np.array(["a", 1] * 6, dtype=object), eps=1.0),
        ValueError,
        r"^y: labels of different types \(int, str\)",
        "y-mixed-str-int",
    ),
    (
        lambda mp: select_prototypes(X, np.array([None, 1] * 6, dtype=object), eps=1.0),
        ValueError,
        r"^y: contains missing labels",
        "y-none",
    ),
    (lambda mp: select_prototypes(X, [[0, 1], [1]] * 6, eps=1.0), ValueError, r"^y: cannot be read", "y-ragged"),
    (
        lambda mp: select_prototypes(np.zeros((12, 0)), Y, eps=1.0),
        ValueError,
        r"^X: needs at least one row and one column",
        "X-no-columns",
    ),
    (
        lambda mp: select_prototypes(np.zeros((0, 3)), Y[:0], eps=1.0),
        ValueError,
        r"^X: needs at least one row",
        "X-no-rows",
    ),
    (lambda mp: select_prototypes(X + 1j, Y, eps=1.0), ValueError, r"^X: expected numbers", "X-complex"),
    (
        lambda mp: select_prototypes(scipy.sparse.csr_matrix(X), Y, eps=1.0),
        ValueError,
        r"^X: sparse matrices",
        "X-sparse",
    ),
    (
        lambda mp: select_prototypes([[0.0, 1.0], [1.0]], [0, 1], eps=1.0),
        ValueError,
        r"^X: cannot be read as a 2-D array",
        "X-ragged",
    ),
    (
        lambda mp: select_prototypes(X * 1e30, Y, eps=1.0),
        ValueError,
        r"^X: values as large as .* overflow",
        "X-overflows-float32",
    ),
    (
        lambda mp: select_prototypes(y=Y, dissimilarity=D - 1.0, eps=1.0),
        ValueError,
        r"^dissimilarity: a dissimilarity is never negative",
        "dissimilarity-negative",
    ),
    (
        lambda mp: select_prototypes(X, Y, eps=1.0, candidates=np.zeros((0, 3))),
        ValueError,
        r"^candidates: needs at least one row",
        "candidates-no-rows",
    ),
    (
        lambda mp: select_prototypes(y=Y, dissimilarity=D, eps=1.0, candidates=5),
        ValueError,
        r"^candidates: expected a sequence",
        "candidates-not-a-sequence",
    ),
    (lambda mp: select_prototypes(X, Y, eps=1.0, method=None), ValueError, r"^method: must be one of", "method-none"),
    (lambda mp: select_prototypes(X, Y, eps=1.0, metric=["l2"]), ValueError, r"^metric: must be one of", "metric-list"),
    (
        lambda mp: select_prototypes(X, Y, eps=1.0, method="lp", seed=-1),
        ValueError,
        r"^seed: must be at least 0",
        "seed-negative",
    ),
    (
        lambda mp: select_prototypes(X, Y, eps=1.0, method="lp", seed="a"),
        ValueError,
        r"^seed: expected an integer",
        "seed-string",
    ),
    (
        lambda mp: PrototypeClassifier(eps_quantiles=[]).fit(X, Y),
        ValueError,
        r"^eps_quantiles: must be a non-empty",
        "classifier-eps-quantiles-empty",
    ),
    (
        lambda mp: PrototypeClassifier(eps_quantiles=[0.5, 2.0]).fit(X, Y),
        ValueError,
        r"^eps_quantiles: quantile levels must lie in \[0, 1\]",
        "classifier-eps-quantiles-above-1",
    ),
    (
        lambda mp: PrototypeClassifier(eps_quantiles=["0.1"]).fit(X, Y),
        ValueError,
        r"^eps_quantiles: must be a non-empty 1-D sequence of numbers",
        "classifier-eps-quantiles-strings",
    ),
    (lambda mp: PrototypeClassifier(cv=1).fit(X, Y), ValueError, r"^cv: must be at least 2", "classifier-cv-1"),
    (lambda mp: PrototypeClassifier(cv=2.5).fit(X, Y), ValueError, r"^cv: expected an integer", "classifier-cv-float"),
    (lambda mp: PrototypeClassifier(eps="1").fit(X, Y), ValueError, r"^eps: ", "classifier-eps-string"),
    (lambda mp: PrototypeClassifier(lam=-1.0).fit(X, Y), ValueError, r"^lam: ", "classifier-lam-negative"),
    (lambda mp: PrototypeClassifier(method="anneal").fit(X, Y), ValueError, r"^method: ", "classifier-method-unknown"),
    (
        lambda mp: PrototypeClassifier().fit(X, np.array(["a", 1] * 6, dtype=object)),
        ValueError,
        r"^y: labels of different types",
        "classifier-y-mixed",
    ),
    (
        lambda mp: PrototypeClassifier(cv=2, eps_quantiles=[0.0, 0.1]).fit(np.repeat(X[:4], 3, axis=0), Y),
        ValueError,
        r"^eps_quantiles: the dissimilarity quantiles .* are all 0",
        "classifier-quantiles-all-zero",
    ),
    (
        lambda mp: PrototypeClassifier(cv=2).fit(np.ones((12, 3)), Y),
        ValueError,
        r"^X: every pair of training points is at dissimilarity 0",
        "classifier-identical-points",
    ),
    (
        lambda mp: PrototypeClassifier(metric="cosine").fit(np.vstack([np.zeros((1, 3)), X[1:]]), Y),
        ValueError,
        r"^X: the cosine dissimilarity",
        "classifier-cosine-zero-row",
    ),
    (
        lambda mp: PrototypeClassifier(eps=1.5).fit(X, Y).predict(np.zeros((2, 0))),
        ValueError,
        r"^X: needs at least one row and one column",
        "classifier-predict-no-columns",
    ),
    (
        lambda mp: fitted_selection().predict(dissimilarity=-np.ones((2, 12))),
        ValueError,
        r"^dissimilarity: a dissimilarity is never negative",
        "predict-dissimilarity-negative",
    ),
    (
        lambda mp: fitted_selection().predict(np.array([["a", "b", "c"]])),
        ValueError,
        r"^X: expected numbers",
        "predict-X-strings",
    ),
    (lambda mp: dissimilarity_quantile(X, "0.5"), ValueError, r"^q: ", "quantile-q-string"),
    (lambda mp: dissimilarity_quantiles(X, [0.1, np.nan]), ValueError, r"^levels: ", "quantiles-levels-nan"),
    (
        lambda mp: (no_memory(mp), select_prototypes(X, Y, eps=1.0)),
        InsufficientMemoryError,
        r"^X: the eps-ball cover of prototype selection \(greedy; 12 points x 12 candidates, about [0-9.]+% of the pairs within "
        r"eps = 1\) needs about .*, more than .* usable \(90% of the memory available\); use a smaller eps",
        "memory-X",
    ),
    (
        lambda mp: (no_memory(mp), select_prototypes(X, Y, eps=1.0, candidates=X[:5])),
        InsufficientMemoryError,
        r"^candidates: the eps-ball cover of prototype selection \(greedy; 12 points x 5 candidates",
        "memory-candidates",
    ),
    (
        lambda mp: (no_memory(mp), select_prototypes(y=Y, dissimilarity=D, eps=1.0, method="lp")),
        InsufficientMemoryError,
        r"^dissimilarity: the eps-ball cover of prototype selection \(lp; 12 points x 12 candidates",
        "memory-dissimilarity-lp",
    ),
    (
        lambda mp: (no_memory(mp), PrototypeClassifier(cv=2, eps_quantiles=[0.3]).fit(X, Y)),
        InsufficientMemoryError,
        r"^X: the eps-ball cover of prototype selection \(greedy; 6 points x 6 candidates",
        "memory-classifier-folds",
    ),
    (
        lambda mp: select_prototypes(np.zeros((2_000_000, 1)), np.arange(2_000_000) % 2, eps=1.0),
        InsufficientMemoryError,
        r"^X: the eps-ball cover of prototype selection \(greedy; 2000000 points x 2000000 candidates, about 100.0% of the "
        r"pairs within eps = 1\) needs about [0-9.]+ TiB, more than",
        "memory-real-estimate",
    ),
    (
        lambda mp: select_prototypes(X, X[:, 0], eps=1.0),
        ValueError,
        r"^y: continuous values such as .*: prototype selection needs discrete class labels",
        "y-continuous",
    ),
    (
        lambda mp: PrototypeClassifier(eps=1.5).fit(X, X[:, 0]),
        ValueError,
        r"^y: continuous values such as",
        "classifier-y-continuous",
    ),
    (lambda mp: PrototypeClassifier(eps=1.5).fit(X, None), ValueError, r"^y: the class labels are required", "classifier-y-none"),
    (
        lambda mp: PrototypeClassifier(eps=1.5).fit(X, Y).predict(X[:, :2]),
        ValueError,
        r"^X has 2 features, but PrototypeClassifier is expecting 3 features",
        "classifier-predict-feature-count",
    ),
    (lambda mp: PrototypeClassifier().predict(X), NotFittedError, r"PrototypeClassifier .* not fitted", "classifier-unfitted"),
    (
        lambda mp: (memory_runs_out(mp, after_checks=1), select_prototypes(X, Y, eps=1.0)),
        InsufficientMemoryError,
        r"^eps: the eps-ball cover \(eps = 1\) stopped fitting while being built \(.*\): assembling the \d+ pairs "
        r"found in the first 12 of 12 rows needs about .* more than the 90 bytes usable \(90% of the memory available\); use a smaller eps",
        "memory-cover-outgrows-its-estimate",
    ),
    (
        lambda mp: PrototypeClassifier(eps=1.0, progress_bar="yes").fit(X, Y),
        ValueError,
        r"^progress_bar: expected True or False, got 'yes'",
        "classifier-progress-bar-string",
    ),
    (lambda mp: select_prototypes(np.ma.masked_array(X, mask=np.eye(*X.shape, dtype=bool) & (np.arange(X.shape[1]) == 0)), Y, eps=1.0), ValueError, r"^X: a masked array \(numpy\.ma\) with 1 masked cells", "X-masked"),
    (lambda mp: PrototypeClassifier(eps=1.0).fit(np.ma.masked_array(X, mask=np.eye(*X.shape, dtype=bool) & (np.arange(X.shape[1]) == 0)), Y), ValueError, r"^X: a masked array \(numpy\.ma\) with 1 masked cells", "classifier-X-masked"),
    (
        lambda mp: select_prototypes(X, Y, eps=1.0, memory_limit=100),
        InsufficientMemoryError,
        r"^X: the eps-ball cover .* needs about .*, more than the 100 bytes of memory_limit; use a smaller eps .*"
        r"\(or set memory_limit",
        "memory-limit-lowered",
    ),
    (lambda mp: select_prototypes(X, Y, eps=1.0, memory_limit=0), ValueError,
     r"^memory_limit: expected None or a positive number of bytes", "memory-limit-zero"),
]

# ----------------------------------------------------------------------------- Bayesian Sets

BAYESIAN_SETS = [
    (
        lambda mp: BayesianSets(BINARY, kappa=5e-324),
        ValueError,
        r"^priors.kappa: 5e-324 times a feature mean underflows to 0",
        "kappa-underflows",
    ),
    (lambda mp: BayesianSets(BINARY, kappa="2"), ValueError, r"^priors.kappa: ", "kappa-string"),
    (lambda mp: BayesianSets(BINARY, kappa=True), ValueError, r"^priors.kappa: ", "kappa-bool"),
    (
        lambda mp: BayesianSets(BINARY, item_names=[f"i{k}" for k in range(14)]).query(
            ["i1", "nobody", "i2", "nothing"]
        ),
        ValueError,
        r"^query: no items named 'nobody', 'nothing' \(4 query items\)",
        "query-unknown-names",
    ),
    (lambda mp: BayesianSets(BINARY).query(None), ValueError, r"^query: expected a sequence", "query-none"),
    (
        lambda mp: BayesianSets(BINARY).query(np.array([0.0, 1.0])),
        ValueError,
        r"^query: items must be integer indices",
        "query-floats",
    ),
    (
        lambda mp: BayesianSets(BINARY).query([[0, 1], [2.5]]),
        ValueError,
        r"^query: items must be integer indices",
        "query-batch-float-item",
    ),
    (
        lambda mp: BayesianSets(BINARY).query([[0, 1], [2]], top_k=None),
        ValueError,
        r"^top_k: a batch of queries needs a number of items per query",
        "query-batch-completed-set",
    ),
    (
        lambda mp: BayesianSets(BINARY).log_scores([[0, 1], []]),
        ValueError,
        r"^query: is empty",
        "log-scores-empty-query-in-batch",
    ),
    (lambda mp: BayesianSets([[0, 1], [1]]), ValueError, r"^X: cannot be read as a 2-D array", "X-ragged"),
    (lambda mp: BayesianSets(BINARY + 1j), ValueError, r"^X: expected numbers", "X-complex"),
    (lambda mp: BayesianSets(np.where(BINARY == 1, np.inf, 0.0)), ValueError, r"^X: must be binary", "X-infinite"),
    (lambda mp: BayesianSets(np.zeros((0, 0))), ValueError, r"^X: needs at least 2 items", "X-empty"),
    (
        lambda mp: BayesianSets(BINARY, item_names=5),
        ValueError,
        r"^item_names: expected a sequence of names, got int",
        "item-names-int",
    ),
    (
        lambda mp: BayesianSets(BINARY, feature_names="abcdefg"),
        ValueError,
        r"^feature_names: expected a sequence of names, got str",
        "feature-names-string",
    ),
    (lambda mp: BayesianSets(BINARY).query([0], top_k=2.5), ValueError, r"^top_k: expected an integer", "top-k-float"),
    (
        lambda mp: BayesianSets(BINARY).query([0], n_reasons=-1),
        ValueError,
        r"^n_reasons: must be at least 0",
        "n-reasons-negative",
    ),
    (
        lambda mp: BayesianSets(BINARY).query([0], include_query="no"),
        ValueError,
        r"^include_query: expected True or False",
        "include-query-string",
    ),
    (
        lambda mp: Priors(alpha=[np.nan] * 7, beta=[1.0] * 7),
        ValueError,
        r"^priors.alpha: every entry must be finite",
        "priors-alpha-nan",
    ),
    (lambda mp: Priors(membership_rate="0.5"), ValueError, r"^priors.membership_rate: ", "membership-rate-string"),
    (
        lambda mp: precision_at_k(BayesianSets(BINARY), [0], np.zeros(3)),
        ValueError,
        r"^relevant: expected shape \(14,\)",
        "precision-relevant-shape",
    ),
    (
        lambda mp: precision_at_k(BayesianSets(BINARY), [0], np.zeros(14), k=0),
        ValueError,
        r"^k: must be at least 1",
        "precision-k-zero",
    ),
    (
        lambda mp: estimate_membership_rate([np.nan]),
        ValueError,
        r"^log_scores: must be finite",
        "membership-rate-nan-scores",
    ),
    (
        lambda mp: (no_memory(mp), BayesianSets(BINARY).log_scores([[0], [1], [2]])),
        InsufficientMemoryError,
        r"^query: scoring a batch of 3 queries over 14 items needs about .*; score fewer queries per call",
        "memory-batch",
    ),
    (
        lambda mp: (no_memory(mp), BayesianSets(BINARY).query([[0], [1], [2]], top_k=3)),
        InsufficientMemoryError,
        r"^query: ranking a batch over 14 items \(a copy of X by columns, kept; .* needs about .*; answer the queries "
        r"one at a time",
        "memory-top-k-batch",
    ),
    (lambda mp: BayesianSets(np.ma.masked_array(BINARY, mask=np.eye(*BINARY.shape, dtype=bool) & (np.arange(BINARY.shape[1]) == 0))), ValueError, r"^X: a masked array \(numpy\.ma\) with 1 masked cells", "X-masked"),
]


# ----------------------------------------------------------------------------- Bayesian Rule Lists

XB = (RNG.random((16, 4)) < 0.5).astype(np.uint8)
XB[0], XB[1] = 1, 0
YB = np.repeat([0, 1], 8)
AGES = pd.DataFrame({"age": [1.0, 2.0, 3.0, 4.0] * 4, "sex": ["f", "m"] * 8})

RULE_LISTS = [
    (lambda mp: fit_brl(XB[:0], YB[:0]), ValueError, r"^X: needs at least 1 observation and 1 feature", "X-no-rows"),
    (lambda mp: fit_brl(XB[:, :0], YB), ValueError, r"^X: needs at least 1 observation and 1 feature", "X-no-columns"),
    (lambda mp: fit_brl(XB * 2, YB), ValueError, r"^X: must be binary \(0/1\)", "X-not-binary"),
    (lambda mp: fit_brl(XB + 1j, YB), ValueError, r"^X: expected numbers", "X-complex"),
    (
        lambda mp: fit_brl(XB, np.array(["a", 1] * 8, dtype=object)),
        ValueError,
        r"^y: labels of different types \(int, str\)",
        "y-mixed-str-int",
    ),
    (lambda mp: fit_brl(XB, np.zeros(16)), ValueError, r"^y: has a single class", "y-single-class"),
    (lambda mp: fit_brl(XB, YB[:5]), ValueError, r"^y: must be 1-D with one label per training point", "y-short"),
    (lambda mp: fit_brl(XB, YB, priors={"lam": 1}), ValueError, r"^priors must be a models.brl.Priors", "priors-dict"),
    (lambda mp: fit_brl(XB, YB, min_support=0), ValueError, r"^min_support must be a fraction", "min-support-zero"),
    (lambda mp: fit_brl(XB, YB, max_cardinality=0), ValueError, r"^max_cardinality must be", "max-cardinality-zero"),
    (lambda mp: fit_brl(XB, YB, max_length=0), ValueError, r"^max_length must be a positive", "max-length-zero"),
    (lambda mp: fit_brl(XB, YB, antecedents=[(7,)]), ValueError, r"^antecedents: \(7,\) is not", "antecedents-range"),
    (lambda mp: fit_brl(XB, YB, feature_names=["a"]), ValueError, r"^feature_names: has 1 names", "names-short"),
    (lambda mp: fit_brl(XB, YB, seed=-1), ValueError, r"^seed: must be an integer in \[0, 2\*\*32\)", "seed-negative"),
    (lambda mp: fit_brl(XB, YB, num_warmup=-1), ValueError, r"^num_warmup: must be at least 0", "num-warmup-negative"),
    (lambda mp: fit_brl(XB, YB, num_samples=0), ValueError, r"^num_samples: must be at least 1", "num-samples-zero"),
    (lambda mp: fit_brl(XB, YB, num_chains=0), ValueError, r"^num_chains: must be at least 1", "num-chains-zero"),
    (
        lambda mp: fit_brl(XB, YB, n_temperatures=float("nan")),
        ValueError,
        r"^n_temperatures: expected an integer, got nan",
        "n-temperatures-nan",
    ),
    (lambda mp: fit_brl(XB, YB, max_seconds=-1), ValueError, r"^max_seconds: must be a positive", "max-seconds-negative"),
    (lambda mp: fit_brl(XB, YB, checkpoint=5), ValueError, r"^checkpoint: expected a file path", "checkpoint-number"),
    (
        lambda mp: BayesianRuleListClassifier().fit(AGES.assign(age=[1.0, 2.0, 3.0, np.inf] * 4), YB),
        ValueError,
        r"^X: column 'age' has infinite values",
        "classifier-X-infinite",
    ),
    (
        lambda mp: BayesianRuleListClassifier().fit(AGES, np.array(["a", 1] * 8, dtype=object)),
        ValueError,
        r"^y: labels of different types",
        "classifier-y-mixed",
    ),
    (lambda mp: BayesianRuleListClassifier(n_bins=1).fit(AGES, YB), ValueError, r"^n_bins must be", "classifier-n-bins"),
    (
        lambda mp: BayesianRuleListClassifier(estimate="mean").fit(AGES, YB),
        ValueError,
        r"^estimate must be 'point' or 'post'",
        "classifier-estimate",
    ),
    (lambda mp: fit_brl(XB, RNG.normal(size=16)), ValueError, r"^y: continuous values such as", "y-continuous"),
    (
        lambda mp: BayesianRuleListClassifier().fit(AGES, np.linspace(0, 1, 16)),
        ValueError,
        r"^y: continuous values such as 0.0666667.*a rule list needs discrete class labels",
        "classifier-y-continuous",
    ),
    (
        lambda mp: BayesianRuleListClassifier().fit(scipy.sparse.csr_matrix(XB), YB),
        ValueError,
        r"^X: sparse matrices are not supported",
        "classifier-X-sparse",
    ),
    (
        lambda mp: BayesianRuleListClassifier().predict(AGES),
        NotFittedError,
        r"BayesianRuleListClassifier .* not fitted",
        "classifier-unfitted",
    ),
    (
        lambda mp: (no_memory(mp), fit_brl(XB, YB)),
        InsufficientMemoryError,
        r"^antecedents: the truth table of 16 samples x \d+ antecedents needs about .* more than the 90 bytes "
        r"usable \(90% of the memory available\); raise min_support",
        "memory-truth-table",
    ),
    (
        lambda mp: (memory_runs_out(mp, 1), fit_brl(XB, YB)),
        InsufficientMemoryError,
        r"^antecedents: the neighbour move's table of \d+ antecedents \(\d+ neighbours in all\) needs about .* "
        r"more than the 90 bytes usable \(90% of the memory available\); raise min_support",
        "memory-neighbour-table",
    ),
    (
        lambda mp: (no_memory(mp), BayesianRuleListClassifier().fit(XB, YB)),
        InsufficientMemoryError,
        r"^antecedents: the truth table .*; raise min_support or lower max_cardinality",
        "memory-truth-table-classifier",
    ),
    (
        lambda mp: BayesianRuleListClassifier(checkpoint=5).fit(XB, YB),
        ValueError,
        r"^checkpoint: expected a file path",
        "classifier-checkpoint-number",
    ),
    (lambda mp: fit_brl(np.ma.masked_array(XB, mask=np.eye(*XB.shape, dtype=bool) & (np.arange(XB.shape[1]) == 0)), YB), ValueError, r"^X: a masked array \(numpy\.ma\) with 1 masked cells", "X-masked"),
    (lambda mp: BayesianRuleListClassifier().fit(np.ma.masked_array(XB, mask=np.eye(*XB.shape, dtype=bool) & (np.arange(XB.shape[1]) == 0)), YB), ValueError, r"^X: a masked array \(numpy\.ma\) with 1 masked cells", "classifier-X-masked"),
    (
        lambda mp: brl.Priors(lam=1e300),
        ValueError,
        r"^priors.lam: 1e\+300 lies outside "
        r"\[1.18e-38, 3.4e\+38\], the positive range of float32",
        "lam-overflows-float32",
    ),
    (
        lambda mp: brl.Priors(eta=1e-300),
        ValueError,
        r"^priors.eta: 1e-300 lies outside "
        r"\[1.18e-38, 3.4e\+38\], the positive range of float32",
        "eta-underflows-float32",
    ),
    (
        lambda mp: brl.Priors(alpha=(1.0, 1e-40)),
        ValueError,
        r"^priors.alpha: 1e-40 lies outside "
        r"\[1.18e-38, 3.4e\+38\], the positive range of float32",
        "alpha-underflows-float32",
    ),
    (lambda mp: fit_brl(XB, YB, feature_names=["a", "b", "a", "c"]), ValueError,
     r"^feature_names: 'a' names 2 of the columns of X; give each a name of its own", "names-repeated"),
    (
        lambda mp: fit_brl(XB, YB, num_chains=10**7),
        InsufficientMemoryError,
        r"^num_chains: the proposal tables of 10000000 chains \(each chain learns its own\) needs about .*, "
        r"more than the .* usable \(90% of the memory available\); lower num_chains",
        "num-chains-beyond-memory",
    ),
    (
        lambda mp: fit_brl(XB, YB, num_chains=10**4, memory_limit=300 << 20),
        InsufficientMemoryError,
        r"^num_chains, n_temperatures: 10000 chains x 32 rungs \(the most that n_temperatures=\"auto\" may "
        r"choose\) = 320000 replicas of .* needs about .*, more than the 300 MiB of memory_limit; lower num_chains, "
        r"n_temperatures or num_samples",
        "replicas-beyond-memory-limit",
    ),
    (
        lambda mp: fit_brl(XB, YB, steps_per_scan=10**9),
        InsufficientMemoryError,
        r"^num_chains, n_temperatures, steps_per_scan: .* \(with the uniforms of 1000000000 steps per scan\).*"
        r"lower num_chains, n_temperatures, steps_per_scan or num_samples",
        "steps-per-scan-beyond-memory",
    ),
    (
        lambda mp: fit_brl(XB, YB, num_samples=10**12),
        InsufficientMemoryError,
        r"^num_chains, n_temperatures: .* and the records of 1000000000000 scans of every chain needs about",
        "num-samples-beyond-memory",
    ),
    (
        lambda mp: fit_brl(XB, YB, num_chains=64, n_temperatures=4, memory_limit=10**5),
        InsufficientMemoryError,
        r"^num_chains, n_temperatures: 64 chains x 4 rungs .* more than the 97.7 KiB of memory_limit",
        "memory-limit-lowered",
    ),
    (lambda mp: fit_brl(XB, YB, memory_limit="8GB"), ValueError,
     r"^memory_limit: expected None or a positive number of bytes .* got '8GB'", "memory-limit-string"),
]

# ----------------------------------------------------------------------------- Mind the Gap

MIND_THE_GAP = [
    (lambda mp: fit_mgm(XB[:0], 2), ValueError, r"^X: needs at least 1 observation and 1 feature", "X-no-rows"),
    (lambda mp: fit_mgm(XB[:, :0], 2), ValueError, r"^X: needs at least 1 observation and 1 feature", "X-no-columns"),
    (lambda mp: fit_mgm(np.where(XB == 1, np.nan, 0), 2), ValueError, r"^X: contains NaN", "X-nan"),
    (lambda mp: fit_mgm(XB * 2, 2), ValueError, r"^X: must be binary", "X-not-binary"),
    (lambda mp: fit_mgm(XB, 20), ValueError, r"^n_clusters: 20 clusters for only 16 observations", "n-clusters-above-rows"),
    (lambda mp: fit_mgm(XB, 2.5), ValueError, r"^n_clusters: expected an integer", "n-clusters-float"),
    (lambda mp: fit_mgm(XB, 3, max_clusters=2), ValueError, r"^max_clusters: 2 is below", "max-clusters-below"),
    (lambda mp: fit_mgm(XB, 2, seed=-1), ValueError, r"^seed: must be an integer in \[0, 2\*\*32\)", "seed-negative"),
    (lambda mp: fit_mgm(XB, 2, seed="a"), ValueError, r"^seed: ", "seed-string"),
    (
        lambda mp: fit_mgm(XB, 2, priors={"alpha_l": 1.0}),
        ValueError,
        r"^priors: must be an interpretable_zoo.models.mgm.Priors \(e.g. Priors\(\*\*values\)\), got dict",
        "priors-dict",
    ),
    (lambda mp: mgm.Priors(alpha_l=np.inf), ValueError, r"^priors.alpha_l: must be positive and finite", "alpha-l-inf"),
    (lambda mp: mgm.Priors(alpha_l=np.nan), ValueError, r"^priors.alpha_l: must be positive and finite", "alpha-l-nan"),
    (lambda mp: mgm.Priors(alpha_l="1"), ValueError, r"^priors.alpha_l: must be positive and finite", "alpha-l-str"),
    (lambda mp: mgm.Priors(alpha_f="ab"), ValueError, r"^priors.alpha_f: must be two positive", "alpha-f-string"),
    (lambda mp: mgm.Priors(alpha_f=(1, 1, 1)), ValueError, r"^priors.alpha_f: must be two positive", "alpha-f-three"),
    (lambda mp: mgm.Priors(rho=1.0), ValueError, r"^priors.rho: must lie strictly between 0 and 1", "rho-one"),
    (lambda mp: mgm.Priors(s=None), ValueError, r"^priors.s: must lie strictly between 0 and 1", "s-none"),
    (lambda mp: fit_mgm(XB, 2, rel_tol="a"), ValueError, r"^rel_tol: expected a finite number", "rel-tol-string"),
    (lambda mp: fit_mgm(XB, 2, rel_tol=1.0), ValueError, r"^rel_tol: must lie in \[0, 1\)", "rel-tol-one"),
    (lambda mp: fit_mgm(XB, 2, exact_or="yes"), ValueError, r"^exact_or: expected True or False", "exact-or-string"),
    (lambda mp: fit_mgm(XB, 2, restarts=0), ValueError, r"^restarts: must be at least 1", "restarts-zero"),
    (lambda mp: fit_mgm(XB, 2, feature_names=["a"]), ValueError, r"^feature_names: has 1 names", "names-short"),
    (lambda mp: fit_mgm_sweep(XB, 3), ValueError, r"^n_clusters: expected a sequence of cluster numbers", "sweep-int"),
    (lambda mp: fit_mgm_sweep(XB, []), ValueError, r"^n_clusters: the sweep needs at least one", "sweep-empty"),
    (
        lambda mp: fit_mgm_sweep(XB, [2, 3], clusters_per_batch=0),
        ValueError,
        r"^clusters_per_batch: must be at least 1",
        "sweep-clusters-per-batch-zero",
    ),
    (lambda mp: MGMClusterer(2).fit(XB * 2), ValueError, r"^X: must be binary \(0/1\)", "clusterer-X-not-binary"),
    (lambda mp: MGMClusterer(2, binarize="0").fit(XB), ValueError, r"^binarize: expected a finite number", "clusterer-binarize"),
    (lambda mp: MGMClusterer(2).predict(XB), NotFittedError, r"MGMClusterer .* not fitted", "clusterer-unfitted"),
    (
        lambda mp: fit_mgm_sweep(XB, [2, 3], progress_bar=1),
        ValueError,
        r"^progress_bar: expected True or False, got 1",
        "sweep-progress-bar-number",
    ),
    (lambda mp: fit_mgm(np.ma.masked_array(XB, mask=np.eye(*XB.shape, dtype=bool) & (np.arange(XB.shape[1]) == 0)), 2), ValueError, r"^X: a masked array \(numpy\.ma\) with 1 masked cells", "X-masked"),
    (lambda mp: MGMClusterer(2).fit(np.ma.masked_array(XB, mask=np.eye(*XB.shape, dtype=bool) & (np.arange(XB.shape[1]) == 0))), ValueError, r"^X: a masked array \(numpy\.ma\) with 1 masked cells", "clusterer-X-masked"),
    (
        lambda mp: fit_mgm(XB, 2, max_iter=10**10),
        InsufficientMemoryError,
        r"^restarts, n_proposals, max_iter: 5 searches run at once .* an ELBO trace of max_iter = 10000000000 "
        r"iterations needs about .*; lower restarts, n_proposals or max_iter",
        "max-iter-beyond-memory",
    ),
    (
        lambda mp: fit_mgm(XB, 2, restarts=1000, memory_limit=10**6),
        InsufficientMemoryError,
        r"^restarts, n_proposals, max_iter: 64 searches run at once \(1000 restarts\).* of memory_limit",
        "memory-limit-restarts",
    ),
    (
        lambda mp: fit_mgm_sweep(XB, [2, 3], clusters_per_batch=2, max_iter=10**10),
        InsufficientMemoryError,
        r"^restarts, n_proposals, max_iter: 10 searches run at once \(5 restarts x 2 numbers of clusters\), each "
        r"with 20 merge proposals .* max_iter = 10000000000 iterations .*or clusters_per_batch",
        "sweep-iterations-beyond-memory",
    ),
    (
        lambda mp: fit_mgm_sweep(XB, [2, 3], n_proposals=10**6),
        ValueError,
        r"^n_proposals: 1000000 merge proposals per iteration for 4 dimensions, whose groups form at most 6 pairs; .* "
        r"at most 24$",
        "sweep-proposals-beyond-pairs",
    ),
    (
        lambda mp: fit_mgm(XB, 2, n_proposals=25),
        ValueError,
        r"^n_proposals: 25 merge proposals per iteration for 4 dimensions, .* at most 24$",
        "proposals-just-beyond-pairs",
    ),
]

# ----------------------------------------------------------------------------- Bayesian Case Model

XC = RNG.integers(0, 3, (20, 5))


def one_large_code(code: int) -> np.ndarray:
    """The 20 x 5 codes of a 3-value table with one entry ``code``: padded tables would grow with code^2."""
    codes = XC.copy()
    codes[0, 0] = code
    return codes


CASE_MODEL = [
    (lambda mp: fit_bcm(XC, 2, checkpoint=["a"]), ValueError, r"^checkpoint: expected a file path", "checkpoint-list"),
    (lambda mp: fit_bcm(XC + 1j, 2), ValueError, r"^X: expected integer category codes .*complex", "X-complex"),
    (
        lambda mp: fit_bcm(pd.DataFrame({"height": RNG.normal(size=20), "colour": ["r", "g"] * 10}), 2),
        ValueError,
        r"^X: column 'height' holds numbers \(float64, 20 distinct values\), not categories; bin it first",
        "X-float-column",
    ),
    (
        lambda mp: fit_bcm(pd.DataFrame({"id": np.arange(40) * 7, "colour": ["r", "g"] * 20}), 2),
        ValueError,
        r"^X: column 'id' holds numbers \(int64, 40 distinct values\)",
        "X-integer-column-many-values",
    ),
    (
        lambda mp: fit_bcm(pd.DataFrame({"x": np.array([0.5, 1.5] * 10, dtype=object)}), 2),
        ValueError,
        r"^X: column 'x' holds numbers \(object",
        "X-object-column-of-floats",
    ),
    (
        lambda mp: fit_bcm(one_large_code(1_000), 2),
        ValueError,
        r"^X: column 0 has codes up to 1000, so 1001 categories, more than the 20 observations \(4 distinct",
        "X-code-1000",
    ),
    (lambda mp: fit_bcm(one_large_code(30_000), 2), ValueError, r"^X: column 0 .* 30001 categories", "X-code-30000"),
    (lambda mp: fit_bcm(one_large_code(100_000), 2), ValueError, r"^X: column 0 .* 100001 categories", "X-code-100000"),
    (lambda mp: fit_bcm(one_large_code(200_000), 2), ValueError, r"^X: column 0 .* 200001 categories", "X-code-200000"),
    (
        lambda mp: fit_bcm(one_large_code(30_000), 2, n_values=30_001),
        ValueError,
        r"^X: feature 'x0' has 30001 categories, .* needing at least [0-9.]+ TiB, more than the .* usable \(90% of the memory available\)",
        "memory-n-values-30001",
    ),
    (
        lambda mp: fit_bcm(pd.DataFrame({"city": pd.Categorical([0, 1] * 10, categories=range(30_000))}), 2),
        ValueError,
        r"^X: feature 'city' has 30000 categories",
        "memory-declared-categories",
    ),
    (
        lambda mp: (no_memory(mp), fit_bcm(XC, 2)),
        ValueError,
        r"^X: feature 'x0' has 3 categories, .* more than the 90 bytes usable \(90% of the memory available\); merge or bin",
        "memory-available",
    ),
    (lambda mp: fit_bcm([[0, 1], [1]], 1), ValueError, r"^X: cannot be read as a 2-D array", "X-ragged"),
    (lambda mp: fit_bcm(np.array([["a", "b"], ["b", "a"]]), 1), ValueError, r"^X: expected integer codes", "X-strings"),
    (lambda mp: fit_bcm(XC[:0], 2), ValueError, r"^X: empty", "X-no-rows"),
    (lambda mp: fit_bcm(XC - 1, 2), ValueError, r"^X: category codes must be non-negative", "X-negative"),
    (lambda mp: fit_bcm(XC + 0.5, 2), ValueError, r"^X: expected integer category codes", "X-fractional"),
    (lambda mp: fit_bcm(np.where(XC == 0, np.nan, XC), 2), ValueError, r"^X: contains NaN", "X-nan"),
    (lambda mp: fit_bcm(XC, 21), ValueError, r"^n_clusters: 21 clusters for only 20 observations", "n-clusters"),
    (lambda mp: fit_bcm(XC, 2, kernel="gibbs"), ValueError, r"^kernel: expected one of 'collapsed', 'partially_collapsed'",
     "kernel-unknown"),
    (
        lambda mp: fit_bcm(XC, 2, priors=bcm.Priors(q=numpyro.distributions.Beta(2.0, 2.0)), kernel="partially_collapsed"),
        ValueError,
        r"^priors\.q: fit_bcm\(kernel='partially_collapsed'\) takes a number, not a hyperprior \(Beta\); kernel='collapsed'",
        "kernel-partially-collapsed-hyperprior",
    ),
    (lambda mp: fit_bcm(XC, 2, store_z="yes"), ValueError, r"^store_z: expected True or False", "store-z-string"),
    (lambda mp: fit_bcm(XC, 2, priors={"alpha": 1}), ValueError, r"^priors: expected .*bcm.Priors", "priors-dict"),
    (lambda mp: fit_bcm(XC, 2, seed=-1), ValueError, r"^seed: must be an integer in \[0, 2\*\*32\)", "seed-negative"),
    (lambda mp: fit_bcm(XC, 2, num_samples=0), ValueError, r"^num_samples: must be at least 1", "num-samples-zero"),
    (lambda mp: fit_bcm(XC, 2, num_warmup=-1), ValueError, r"^num_warmup: must be at least 0", "num-warmup-negative"),
    (lambda mp: fit_bcm(XC, 2, n_temperatures=0), ValueError, r"^n_temperatures: must be at least 1", "n-temps-zero"),
    (lambda mp: fit_bcm(XC, 2, init="kmeans"), ValueError, r"^init: expected 'random'", "init-string"),
    (lambda mp: fit_bcm(XC, 2, n_values=[2, 2]), ValueError, r"^n_values: expected one integer, or 5", "n-values-short"),
    (
        lambda mp: BCMClusterer(2).fit(XC + 1j),
        ValueError,
        r"^X: expected numbers .*; Complex data not supported",
        "clusterer-X-complex",
    ),
    (lambda mp: BCMClusterer(2).transform(XC), NotFittedError, r"BCMClusterer .* not fitted", "clusterer-unfitted"),
    (
        lambda mp: BCMClusterer(2, checkpoint=["a"]).fit(XC),
        ValueError,
        r"^checkpoint: expected a file path",
        "clusterer-checkpoint-list",
    ),
    (
        lambda mp: BCMClusterer(2).fit(np.where(XC == 0, np.inf, XC)),
        ValueError,
        r"^X: contains infinity",
        "clusterer-X-infinite",
    ),
    (lambda mp: fit_bcm(XC[:1], 1), ValueError, r"^X: one sample \(n_samples=1\)", "X-one-row"),
    (lambda mp: fit_bcm(np.ma.masked_array(XC, mask=np.eye(*XC.shape, dtype=bool) & (np.arange(XC.shape[1]) == 0)), 2), ValueError, r"^X: a masked array \(numpy\.ma\) with 1 masked cells", "X-masked"),
    (lambda mp: BCMClusterer(2).fit(np.ma.masked_array(XC, mask=np.eye(*XC.shape, dtype=bool) & (np.arange(XC.shape[1]) == 0))), ValueError, r"^X: a masked array \(numpy\.ma\) with 1 masked cells", "clusterer-X-masked"),
    (
        lambda mp: bcm.Priors(alpha=1e-300),
        ValueError,
        r"^priors.alpha: 1e-300 lies outside "
        r"\[1.18e-38, 3.4e\+38\], the positive range of float32",
        "alpha-underflows-float32",
    ),
    (
        lambda mp: bcm.Priors(lam=1e300),
        ValueError,
        r"^priors.lam: 1e\+300 lies outside "
        r"\[1.18e-38, 3.4e\+38\], the positive range of float32",
        "lam-overflows-float32",
    ),
    (
        lambda mp: bcm.Priors(c=1e39),
        ValueError,
        r"^priors.c: 1e\+39 lies outside "
        r"\[1.18e-38, 3.4e\+38\], the positive range of float32",
        "c-overflows-float32",
    ),
    (
        lambda mp: fit_bcm(XC, 2, n_temperatures=10**6),
        InsufficientMemoryError,
        r"^num_chains, n_temperatures: 4 chains x 1000000 rungs = 4000000 replicas of .*; lower num_chains, "
        r"n_temperatures or num_samples",
        "n-temperatures-beyond-memory",
    ),
    (
        lambda mp: fit_bcm(XC, 2, num_chains=10**9),
        InsufficientMemoryError,
        r"^num_chains, n_temperatures: 1000000000 chains x 32 rungs",
        "num-chains-beyond-memory",
    ),
    (
        lambda mp: fit_bcm(XC, 2, num_chains=10**5, memory_limit=2 * 10**8),
        InsufficientMemoryError,
        r"^num_chains, n_temperatures: 100000 chains x 32 rungs .* = 3200000 replicas of \S+ KiB each \(with the "
        r"step's work over 5 features x 3 values\), and the records of "
        r"\d+ scans of every chain needs about .* GiB, more than the 191 MiB of memory_limit",
        "num-chains-beyond-memory-limit",
    ),
]


ENTRY_POINTS = {"ps": PROTOTYPE_SELECTION, "bs": BAYESIAN_SETS, "brl": RULE_LISTS, "mgm": MIND_THE_GAP,
                "bcm": CASE_MODEL}


def entry_point_cases() -> dict[str, tuple]:
    """{case id: (call, error, message)} of every entry point's catalogue."""
    return {case.id: case.values for prefix, cases in ENTRY_POINTS.items() for case in numbered(prefix, cases)}


CASE_MEMORY_BYTES = 6 << 30
CASE_SECONDS = 240


@pytest.fixture(scope="module")
def isolated_cases():
    runner = IsolatedCases("test_bad_input", "entry_point_cases", memory_bytes=CASE_MEMORY_BYTES, seconds=CASE_SECONDS)
    yield runner
    runner.close()


@pytest.mark.parametrize("case_id", list(entry_point_cases()))
def test_entry_point_rejects_bad_input(case_id, isolated_cases):
    """Each case in a worker process limited to 6 GiB of address space and 240 s: it must raise its error with
    its message; a crash, a memory exhaustion or a hang fails this case only."""
    failure = isolated_cases.run(case_id)
    assert failure is None, failure


def test_an_isolated_case_that_crashes_hangs_or_raises_otherwise_fails_alone():
    """The worker's negative controls: a case that kills its process, one that outlasts the time limit and one
    that raises another error each fail with what happened, and the next case runs in a new worker."""
    runner = IsolatedCases("test_bad_input", "control_cases", memory_bytes=CASE_MEMORY_BYTES, seconds=5)
    try:
        assert runner.run("other-error") == "raised ValueError: not the one expected"
        assert runner.run("nothing") == "raised nothing"
        assert runner.run("memory").startswith("raised MemoryError")  # 8 GiB asked of a 6 GiB address space
        assert runner.run("crash") == "the worker died with exit status 70"
        assert runner.run("refused") is None  # in a new worker
        assert runner.run("hang") == "still running after 5 s, killed"
    finally:
        runner.close()


def control_cases() -> dict[str, tuple]:
    def other_error(mp):
        raise ValueError("not the one expected")

    return {
        "crash": (lambda mp: os._exit(70), ValueError, ""),  # a process ending without a word, as a segfault
        "refused": (lambda mp: fit_brl(XB, YB, num_chains=0), ValueError, r"^num_chains: must be at least 1"),
        "hang": (lambda mp: time.sleep(3600), ValueError, ""),
        "other-error": (other_error, TypeError, ""),
        "nothing": (lambda mp: None, ValueError, ""),
        "memory": (lambda mp: np.ones(8 << 30, np.uint8), ValueError, ""),
    }


def test_a_masked_array_without_masked_cells_is_read_as_its_data():
    unmasked = np.ma.masked_array(X, mask=np.zeros(X.shape, bool))
    assert select_prototypes(unmasked, Y, eps=1.0).prototypes.tolist() == select_prototypes(X, Y, eps=1.0).prototypes.tolist()


def test_rule_list_items_warn_of_categories_unseen_in_fit():
    """The classifier's predict encodes new rows with the fitted item encoder: a category it never saw
    matches no ``column=value`` item, and the encoder says so, naming the column."""
    encoder = fit_item_encoder(AGES)
    with pytest.warns(UserWarning, match=r"^X: column 'sex' has values not seen in fit \(x, y\)"):
        items = encoder.transform(AGES.assign(sex=["f", "x", "y", "m"] * 4))
    sex = [k for k, name in enumerate(encoder.item_names) if name.startswith("sex=")]
    np.testing.assert_array_equal(items[:, sex].sum(1), [1, 0, 0, 1] * 4)


# ----------------------------------------------------------------------------- dataset loaders


def write(path: Path, content: bytes | str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(content if isinstance(content, bytes) else content.encode())


def hdf5(path: Path, n_rows: int = 7291, truncate: bool = False, splits=("train", "test")) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    with h5py.File(path, "w") as file:
        for split in splits:
            file[f"{split}/data"] = np.zeros((n_rows, 256), np.float32)
            file[f"{split}/target"] = np.zeros(n_rows, np.int64)
    if truncate:
        path.write_bytes(path.read_bytes()[:3000])


def table(n_rows: int, n_columns: int, separator: str = " ") -> str:
    return "".join(separator.join(["0"] * n_columns) + "\n" for _ in range(n_rows))


ZOO_ROW = "aardvark,1,0,0,1,0,0,1,1,1,1,0,0,4,0,0,1,1\n"
TICTACTOE_HEADER = "c1,c2,c3,c4,c5,c6,c7,c8,c9,label\n"


def movielens_ratings(n_ratings: int = 100000) -> str:
    k = np.arange(n_ratings)
    return "".join(f"{k % 943 + 1}\t{k % 1682 + 1}\t4\t881250949\n" for k in k.tolist())


def nell_matrix(path: Path, shape=(5548, 229897)) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    scipy.io.savemat(path, {"X": scipy.sparse.csc_matrix(shape)})


LOADERS = [
    (
        lambda home: hdf5(home / "usps/usps.h5", truncate=True),
        lambda home: ds.load_usps("train", home),
        r"^usps: cannot read .*usps\.h5 \(OSError",
        "usps-truncated-hdf5",
    ),
    (
        lambda home: write(home / "usps/usps.h5", "not hdf5"),
        lambda home: ds.load_usps("train", home),
        r"^usps: cannot read .*usps\.h5",
        "usps-not-hdf5",
    ),
    (
        lambda home: hdf5(home / "usps/usps.h5", splits=("train",)),
        lambda home: ds.load_usps("test", home),
        r"^usps: .*usps\.h5 lacks the arrays \[.test/data., .test/target.\]",
        "usps-split-missing",
    ),
    (
        lambda home: hdf5(home / "usps/usps.h5", n_rows=10),
        lambda home: ds.load_usps("train", home),
        r"^usps: .*usps\.h5 train/data has shape \(10, 256\), expected \(7291, 256\)",
        "usps-wrong-shape",
    ),
    (
        lambda home: write(home / "recipes/ingredlist", "0, 1\n0, 1, 0\n"),
        lambda home: ds.load_recipes(home),
        r"^recipes: cannot read .*ingredlist",
        "recipes-ragged",
    ),
    (
        lambda home: write(home / "recipes/ingredlist", table(3, 147, ", ")),
        lambda home: ds.load_recipes(home),
        r"^recipes: .*ingredlist holds a 3 x 147 table, expected 56 x 147",
        "recipes-truncated",
    ),
    (
        lambda home: write(home / "recipes/ingredlist", table(56, 147, ", ").replace("0", "2", 1)),
        lambda home: ds.load_recipes(home),
        r"^recipes: .*ingredlist has values other than 0 and 1",
        "recipes-not-binary",
    ),
    (
        lambda home: (
            write(home / "recipes/ingredlist", table(56, 147, ", ")),
            write(home / "recipes/ingrednames", "zest\n"),
        ),
        lambda home: ds.load_recipes(home),
        r"^recipes: .*ingrednames has 1 lines, expected 147 names",
        "recipes-names-count",
    ),
    (
        lambda home: (
            write(home / "recipes/ingredlist", table(56, 147, ", ")),
            write(home / "recipes/ingrednames", b"\xff\xfe\x00\x81"),
        ),
        lambda home: ds.load_recipes(home),
        r"^recipes: cannot read .*ingrednames \(UnicodeDecodeError",
        "recipes-names-binary",
    ),
    (
        lambda home: write(home / "zoo/zoo.data", bytes(range(256)) * 4),
        lambda home: ds.load_zoo(home),
        r"^zoo: (cannot read )?.*zoo\.data",
        "zoo-garbage",
    ),
    (
        lambda home: write(home / "zoo/zoo.data", "garbage\nmore garbage\n"),
        lambda home: ds.load_zoo(home, binary=False),
        r"^zoo: .*zoo\.data has 1 columns, expected 18",
        "zoo-garbage-counts",
    ),
    (
        lambda home: write(home / "zoo/zoo.data", ZOO_ROW + ZOO_ROW[:20]),
        lambda home: ds.load_zoo(home),
        r"^zoo: .*zoo\.data has 2 animals, expected 101",
        "zoo-truncated",
    ),
    (
        lambda home: write(home / "zoo/zoo.data", ZOO_ROW.replace(",4,", ",9,") * 101),
        lambda home: ds.load_zoo(home),
        r"^zoo: .*zoo\.data column 'legs' has values that are not integers in 0\.\.8",
        "zoo-legs-out-of-range",
    ),
    (
        lambda home: write(home / "zoo/zoo.data", ZOO_ROW.replace(",4,", ",four,") * 101),
        lambda home: ds.load_zoo(home),
        r"^zoo: cannot read .*zoo\.data \(ValueError",
        "zoo-legs-not-a-number",
    ),
    (
        lambda home: write(home / "animals50/predicate-matrix-binary.txt", "0 1 x\n"),
        lambda home: ds.load_animals50(home),
        r"^animals50: cannot read .*predicate-matrix-binary\.txt",
        "animals50-garbage",
    ),
    (
        lambda home: (
            write(home / "animals50/predicate-matrix-binary.txt", table(50, 85)),
            write(home / "animals50/predicates.txt", "black\n" * 85),
        ),
        lambda home: ds.load_animals50(home),
        r"^animals50: .*predicates\.txt has lines that are not <number><tab><name>",
        "animals50-names-without-number",
    ),
    (
        lambda home: write(home / "titanic/titanic_train.tab", "crew adult male\ncrew adu"),
        lambda home: ds.load_titanic("train", home),
        r"^titanic_train: .*titanic_train\.tab has 2 passengers, expected 1761",
        "titanic-truncated",
    ),
    (
        lambda home: write(home / "titanic/titanic_train.tab", "crew adult robot\n" * 1761),
        lambda home: ds.load_titanic("train", home),
        r"^titanic_train: .*titanic_train\.tab has values outside",
        "titanic-unknown-level",
    ),
    (
        lambda home: (
            write(home / "titanic/titanic_test.tab", "crew adult male\n" * 440),
            write(home / "titanic/titanic_test.Y", "1 0\n" * 5),
        ),
        lambda home: ds.load_titanic("test", home),
        r"^titanic_test: .*titanic_test\.Y holds a 5 x 2 table, expected 440 x 2",
        "titanic-labels-mismatch",
    ),
    (
        lambda home: write(
            home / "tictactoe/tictactoe.txt.gz",
            gzip.compress((TICTACTOE_HEADER + "x,o,b,x,o,b,x,o,b,1\n" * 958).encode())[:40],
        ),
        lambda home: ds.load_tictactoe(home),
        r"^tictactoe: cannot read .*tictactoe\.txt\.gz",
        "tictactoe-truncated-gzip",
    ),
    (
        lambda home: write(home / "tictactoe/tictactoe.txt.gz", b"PK\x03\x04 not gzip at all"),
        lambda home: ds.load_tictactoe(home),
        r"^tictactoe: cannot read .*tictactoe\.txt\.gz",
        "tictactoe-not-gzip",
    ),
    (
        lambda home: write(home / "tictactoe/tictactoe.txt.gz", gzip.compress(b"a,b\n1,2\n")),
        lambda home: ds.load_tictactoe(home),
        r"^tictactoe: .*tictactoe\.txt\.gz lacks the columns \['c1'",
        "tictactoe-missing-columns",
    ),
    (
        lambda home: write(
            home / "tictactoe/tictactoe.txt.gz",
            gzip.compress((TICTACTOE_HEADER + "x,o,b,x,o,b,x,o,z,1\n" * 958).encode()),
        ),
        lambda home: ds.load_tictactoe(home),
        r"^tictactoe: .*tictactoe\.txt\.gz has cells other than x, o and b",
        "tictactoe-bad-cell",
    ),
    (
        lambda home: write(home / "mushroom/agaricus-lepiota.data", b"\x00\x01garbage"),
        lambda home: ds.load_mushroom(home),
        r"^mushroom: .*agaricus-lepiota\.data",
        "mushroom-garbage",
    ),
    (
        lambda home: write(
            home / "mushroom/agaricus-lepiota.data",
            "edibility," + ",".join(f"a{k}" for k in range(22)) + "\np" + ",x" * 22 + "\ne,x",
        ),
        lambda home: ds.load_mushroom(home),
        r"^mushroom: .*agaricus-lepiota\.data has missing values",
        "mushroom-truncated",
    ),
    (
        lambda home: write(home / "adult/adult.data", "a,b\n1,2\n"),
        lambda home: ds.load_adult(home),
        r"^adult: .*adult\.data has columns \['a', 'b'\]",
        "adult-wrong-header",
    ),
    (
        lambda home: write(
            home / "adult/adult.data", ",".join(ds.real.ADULT_COLUMNS) + "\nold,x,1,x,1,x,x,x,x,x,0,0,40,x,<=50K\n"
        ),
        lambda home: ds.load_adult(home),
        r"^adult: .*adult\.data column .age. has values that are not integers >= 0",
        "adult-age-not-integer",
    ),
    (
        lambda home: write(home / "movielens-100k/u.data", movielens_ratings(10)),
        lambda home: ds.load_movielens(home),
        r"^movielens: .*u\.data has 10 ratings, expected 100000",
        "movielens-truncated-ratings",
    ),
    (
        lambda home: write(home / "movielens-100k/u.data", b"\x89PNG\r\n\x1a\n\x00\x00"),
        lambda home: ds.load_movielens(home),
        r"^movielens: .*u\.data",
        "movielens-garbage-ratings",
    ),
    (
        lambda home: (
            write(home / "movielens-100k/u.data", movielens_ratings()),
            write(
                home / "movielens-100k/u.item",
                "1|Toy Story (1995)|01-Jan-1995||http://x|0|0|1|1|1|0|0|0|0|0|0|0|0|0|0|0|0|0|0\n",
            ),
        ),
        lambda home: ds.load_movielens(home),
        r"^movielens: .*u\.item has 1 movies, expected 1682",
        "movielens-truncated-movies",
    ),
    (
        lambda home: write(home / "nell/nell_exp_X_transpose.mat", b"MATLAB 5.0 garbage" * 20),
        lambda home: ds.load_nell(home),
        r"^nell: cannot read .*nell_exp_X_transpose\.mat",
        "nell-garbage-matrix",
    ),
    (
        lambda home: (
            nell_matrix(home / "nell/nell_exp_X_transpose.mat"),
            write(home / "nell/nell_exp_X_transpose.mat", (home / "nell/nell_exp_X_transpose.mat").read_bytes()[:300]),
        ),
        lambda home: ds.load_nell(home),
        r"^nell: cannot read .*nell_exp_X_transpose\.mat",
        "nell-truncated-matrix",
    ),
    (
        lambda home: nell_matrix(home / "nell/nell_exp_X_transpose.mat", (5, 7)),
        lambda home: ds.load_nell(home),
        r"^nell: .*nell_exp_X_transpose\.mat holds X of shape \(5, 7\), expected \(5548, 229897\)",
        "nell-wrong-shape",
    ),
    (
        lambda home: (
            nell_matrix(home / "nell/nell_exp_X_transpose.mat"),
            write(home / "nell/all_set_elements.csv", "india\nchina\n"),
        ),
        lambda home: ds.load_nell(home),
        r"^nell: .*all_set_elements\.csv has 2 phrases, expected 229897",
        "nell-phrases-count",
    ),
]


@pytest.mark.parametrize("corrupt, load, message", numbered("ds", LOADERS))
def test_loader_names_data_set_and_file_of_a_corrupt_file(corrupt, load, message, tmp_path):
    corrupt(tmp_path)
    with pytest.raises(ds.DataFileError, match=message) as raised:
        load(tmp_path)
    assert isinstance(raised.value, ValueError) and str(tmp_path) in str(raised.value)


# ----------------------------------------------------------------------------- the izoo command


@pytest.fixture
def fake_model(monkeypatch):
    """A fitting model named 'fake' whose cli_fit records its calls and raises what ``fake.raises`` holds."""
    module = types.ModuleType("fake_izoo_model")
    module.calls, module.raises = [], None

    def cli_fit(X, y, **options):
        module.calls.append(options)
        raise module.raises

    module.cli_fit = cli_fit
    monkeypatch.setitem(cli.MODELS, "fake", cli.ModelEntry("a fake model", module, fits=True, trace=True))
    return module


def fit_argv(home: Path, data: str, *extra: str) -> list[str]:
    return ["fit", "fake", "--data", str(home / data), "--out", str(home / "run.nc"), *extra]


def data_files(home: Path) -> None:
    az.from_dict(posterior={"length": np.zeros((1, 4)), "log_posterior": np.ones((1, 4))}).to_netcdf(home / "tiny.nc")
    write(home / "ragged.csv", "a,b\n0,1\n0,1,1\n")
    write(home / "empty.csv", "")
    write(home / "header.csv", "a,b\n")
    write(home / "binary.csv", bytes(range(255, 0, -1)))
    np.save(home / "object.npy", np.array([{"a": 1}, None], dtype=object), allow_pickle=True)
    write(home / "corrupt.npy", b"\x93NUMPY\x01\x00garbage")
    with open(home / "oversized.npy", "wb") as file:  # a header claiming 16 GiB before 16 bytes of data
        np.lib.format.write_array_header_1_0(file, {"descr": "<f8", "fortran_order": False, "shape": (2**30, 2)})
        file.write(bytes(16))
    write(home / "corrupt.npz", b"PK\x03\x04garbage")
    write(home / "good.csv", "a,b\n0,1\n1,0\n")
    write(home / "corrupt.parquet", b"PAR1garbage")
    write(home / "not.nc", "not a NetCDF file")
    scipy.io.savemat(home / "matlab.nc", {"a": np.zeros(2)})
    xarray.Dataset({"a": ("x", np.zeros(2))}).to_netcdf(home / "plain.nc")


def raise_in_fit(error):
    def argv(home, fake):
        fake.raises = error
        return fit_argv(home, "good.csv")

    return argv


COMMANDS = [
    (
        lambda home, fake: fit_argv(home, "ragged.csv"),
        2,
        r"--data: cannot read ragged\.csv as a CSV table .*Expected 2 fields in line 3",
        "fit-csv-ragged",
    ),
    (
        lambda home, fake: fit_argv(home, "empty.csv"),
        2,
        r"--data: cannot read empty\.csv as a CSV table",
        "fit-csv-empty",
    ),
    (
        lambda home, fake: fit_argv(home, "header.csv"),
        2,
        r"--data: header\.csv has no data rows",
        "fit-csv-header-only",
    ),
    (
        lambda home, fake: fit_argv(home, "binary.csv"),
        2,
        r"--data: cannot read binary\.csv as a CSV table",
        "fit-csv-binary",
    ),
    (
        lambda home, fake: fit_argv(home, "object.npy"),
        2,
        r"--data: cannot read object\.npy as a NumPy \.npy file of numeric arrays \(Object arrays",
        "fit-npy-object",
    ),
    (lambda home, fake: fit_argv(home, "corrupt.npy"), 2, r"--data: cannot read corrupt\.npy", "fit-npy-corrupt"),
    (
        lambda home, fake: fit_argv(home, "oversized.npy"),
        2,
        r"--data: oversized\.npy claims an array of shape \(1073741824, 2\) \(float64, 17,179,869,184 bytes\) but "
        r"holds 16 bytes",
        "fit-npy-oversized-header",
    ),
    (lambda home, fake: fit_argv(home, "corrupt.npz"), 2, r"--data: cannot read corrupt\.npz", "fit-npz-corrupt"),
    (
        lambda home, fake: ["summary", str(home / "not.nc")],
        2,
        r"run: .*not\.nc is not a NetCDF file written by `izoo fit`",
        "summary-not-netcdf",
    ),
    (
        lambda home, fake: ["summary", str(home / "tiny.nc"), "--var-names", "length", "bogus"],
        2,
        r"--var-names: no variable 'bogus' in the posterior of tiny\.nc; it holds length, log_posterior",
        "summary-unknown-variable",
    ),
    (
        lambda home, fake: ["summary", str(home / "matlab.nc")],
        2,
        r"run: .*matlab\.nc is not a NetCDF file",
        "summary-matlab-file",
    ),
    (
        lambda home, fake: [
            "fit",
            "fake",
            "--data",
            str(home / "good.csv"),
            "--out",
            str(home / "no/such/folder/run.nc"),
        ],
        2,
        r"--out: the folder .*folder does not exist",
        "fit-out-folder-missing",
    ),
    (
        lambda home, fake: ["fit", "fake", "--data", str(home / "good.csv"), "--out", str(home)],
        2,
        r"--out: .* is a folder",
        "fit-out-is-a-folder",
    ),
    (
        raise_in_fit(ValueError("n_clusters: expected an integer,\ngot None")),
        1,
        r"n_clusters: expected an integer, got None$",
        "fit-library-value-error",
    ),
    (
        raise_in_fit(InsufficientMemoryError("X: the cover needs about 9 GiB")),
        1,
        r"X: the cover needs about 9 GiB$",
        "fit-library-memory-error",
    ),
    (
        lambda home, fake: ["fit", "brl", "--data", str(home / "good.csv"), "--out", str(home / "b.nc")],
        1,
        r"y: .*--target",
        "fit-brl-without-target",
    ),
    (
        lambda home, fake: ["summary", str(home / "plain.nc")],
        2,
        r"run: .*plain\.nc has no posterior group; give a file written by `izoo fit`",
        "summary-netcdf-without-posterior",
    ),
    (
        lambda home, fake: ["fit", "fake", "--data", str(home / "good.csv"), "--out", str(home / "run.txt")],
        2,
        r"--out: fake writes \.json, \.pkl, \.nc files .*not 'run\.txt'",
        "fit-out-unknown-suffix",
    ),
    (
        lambda home, fake: ["fit", "mgm", "--data", str(home / "good.csv"), "--out", str(home / "run.nc")],
        2,
        r"--out: mgm writes \.json, \.pkl files \(.*\), not 'run\.nc'",
        "fit-out-netcdf-without-trace",
    ),
    (
        lambda home, fake: [*fit_argv(home, "good.csv"), "--num-samples", "10"],
        2,
        r"--num-samples: not an option of izoo fit fake$",
        "fit-option-of-another-model",
    ),
    (lambda home, fake: fit_argv(home, "corrupt.parquet"), 2, r"--data: cannot read corrupt\.parquet", "fit-parquet-corrupt"),
]


@pytest.mark.parametrize("argv, status, message", numbered("cli", COMMANDS))
def test_command_prints_one_line_naming_the_option(argv, status, message, tmp_path, fake_model, capsys):
    data_files(tmp_path)
    arguments = argv(tmp_path, fake_model)
    assert cli.main(arguments) == status
    err = capsys.readouterr().err
    assert err.startswith("izoo: ") and err.count("\n") == 1 and "Traceback" not in err, err
    assert re.search(message, err), err
    if "--out:" in message:
        assert fake_model.calls == [] and not (tmp_path / "run.nc").exists()  # refused before fitting


CATALOGUE_SIZE = {"ps": 53, "bs": 25, "brl": 44, "mgm": 34, "bcm": 40, "ds": 34, "cli": 21}
"""Cases per group when the catalogue was written; a group may grow past these, never shrink below."""


@pytest.mark.parametrize("separator", [";", "\t", "|"])
def test_a_csv_with_another_separator_is_read_with_its_columns(separator, tmp_path):
    write(tmp_path / "table.csv", separator.join("abc") + "\n" + "\n".join(separator.join("010") for _ in range(3)))
    frame = cli._read_frame(tmp_path / "table.csv")
    assert list(frame.columns) == ["a", "b", "c"] and frame.shape == (3, 3)
    write(tmp_path / "commas.csv", "a;b,c\n0,1\n")  # a comma-separated table keeps its commas
    assert list(cli._read_frame(tmp_path / "commas.csv").columns) == ["a;b", "c"]


def test_catalogue_only_grows():
    for prefix, cases in {**ENTRY_POINTS, "ds": LOADERS, "cli": COMMANDS}.items():
        names = [case[-1] for case in cases]
        assert len(set(names)) == len(names), prefix
        assert len(cases) >= CATALOGUE_SIZE[prefix], prefix


def test_available_memory_is_the_smaller_of_the_system_the_cgroup_and_the_address_space_limit(tmp_path, monkeypatch):
    meminfo, limit, usage = tmp_path / "meminfo", tmp_path / "memory.max", tmp_path / "memory.current"
    meminfo.write_text("MemTotal:       33554432 kB\nMemAvailable:    8388608 kB\n")
    monkeypatch.setattr(memory, "_MEMINFO", meminfo)
    monkeypatch.setattr(memory, "_CGROUP_FILES", ((limit, usage),))
    status = tmp_path / "status"
    status.write_text("Name:\tpython\nVmSize:\t 3145728 kB\n")  # 3 GiB of address space in use
    monkeypatch.setattr(memory, "_STATUS", status)
    address_space = [memory.resource.RLIM_INFINITY]
    monkeypatch.setattr(memory.resource, "getrlimit", lambda which: (address_space[0], memory.resource.RLIM_INFINITY))
    assert memory.available_bytes() == 8 << 30  # no address-space limit (ulimit -v unlimited)
    address_space[0] = 7 << 30
    assert memory.available_bytes() == 4 << 30  # the limit less the process's virtual size
    address_space[0] = memory.resource.RLIM_INFINITY
    assert memory.available_bytes() == 8 << 30  # no cgroup files: the system's MemAvailable
    limit.write_text("max\n")
    usage.write_text(str(1 << 30))
    assert memory.available_bytes() == 8 << 30  # a cgroup without a limit
    limit.write_text(str(3 << 30))
    assert memory.available_bytes() == 2 << 30  # the limit less what the cgroup uses
    with pytest.raises(InsufficientMemoryError, match=r"^thing needs about 3 GiB, more than the 1.8 GiB usable \(90% "
                                                      r"of the memory available\); less"):
        memory.check_memory(3 << 30, "thing", "less")
    memory.check_memory(1 << 30, "thing", "less")
    with pytest.raises(InsufficientMemoryError):  # within the available memory, but not within the usable share
        memory.check_memory(1.9 * (1 << 30), "thing", "less")
    with memory.limit(2 << 30):  # a memory_limit is taken whole
        memory.check_memory(1.9 * (1 << 30), "thing", "less")
