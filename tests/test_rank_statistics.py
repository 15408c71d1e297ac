"""``diagnostics.rank_statistics`` computes ArviZ's rank-normalised split R-hat and bulk ESS (without
importing ArviZ), and BRL and BCM fits and their answers need no ArviZ at all."""

import json
import subprocess
import sys
import warnings

import arviz as az
import numpy as np
import pytest

from scipy.special import ndtri
from scipy.stats import rankdata

from interpretable_zoo.diagnostics import rank_statistics
from interpretable_zoo.diagnostics.rank_statistics import bulk_ess, rank_rhat, rank_rhat_and_bulk_ess


def chains(seed: int) -> np.ndarray:
    """(chains, draws) AR(1) chains with random length, correlation (antithetic included), chain offsets
    and, for some seeds, ties (rounded or few-valued draws)."""
    rng = np.random.default_rng(seed)
    n_chains, n_draws = int(rng.integers(1, 6)), int(rng.integers(4, 300))
    phi = rng.choice([0.0, 0.5, 0.9, 0.99, -0.7])
    noise = rng.normal(size=(n_chains, n_draws))
    draws = np.zeros_like(noise)
    for t in range(n_draws):
        draws[:, t] = (phi * draws[:, t - 1] if t else 0.0) + noise[:, t]
    draws += rng.normal(size=(n_chains, 1)) * rng.choice([0.0, 0.1, 3.0])
    if seed % 7 == 0:
        draws = np.round(draws)
    if seed % 11 == 0:
        draws = rng.integers(0, 3, size=draws.shape).astype(float)
    return draws


def arviz_values(draws, rhat_method="rank"):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return float(az.rhat(draws, method=rhat_method)), float(az.ess(draws, method="bulk"))


SEEDS = range(200)


def ours_separately(draws, statistic):
    return rank_rhat(draws) if statistic == "rhat" else bulk_ess(draws)


def ours_together(draws, statistic):
    return rank_rhat_and_bulk_ess(draws)[0 if statistic == "rhat" else 1]


@pytest.mark.parametrize("ours_fn", [ours_separately, ours_together], ids=["separately", "together"])
@pytest.mark.parametrize("statistic", ["rhat", "ess"])
def test_equal_to_arviz_on_correlated_tied_and_short_chains(statistic, ours_fn):
    ours = np.array([ours_fn(chains(s), statistic) for s in SEEDS])
    theirs = np.array([arviz_values(chains(s))[0 if statistic == "rhat" else 1] for s in SEEDS])
    assert np.array_equal(np.isnan(ours), np.isnan(theirs))  # one chain: no R-hat
    finite = ~np.isnan(theirs)
    assert finite.sum() > 150
    np.testing.assert_allclose(ours[finite], theirs[finite], rtol=1e-10)


def test_negative_control_a_different_rhat_is_told_apart():
    # the comparison has power: ArviZ's split R-hat without rank normalisation and folding differs
    theirs = np.array([arviz_values(chains(s), rhat_method="split")[0] for s in SEEDS])
    ours = np.array([rank_rhat(chains(s)) for s in SEEDS])
    finite = ~np.isnan(theirs)
    assert not np.allclose(ours[finite], theirs[finite], rtol=1e-10)


@pytest.mark.parametrize("values", ["continuous", "few distinct"])
def test_normal_scores_are_blom_scores_of_average_ranks_by_either_path(values, monkeypatch):
    rng = np.random.default_rng(3)
    draws = rng.normal(size=(4, 5000)) if values == "continuous" else rng.integers(0, 20, (4, 5000)).astype(float)
    blom = ndtri((rankdata(draws, method="average") - 3 / 8) / (draws.size + 1 / 4)).reshape(draws.shape)
    for few_distinct in (1, draws.size + 1):  # every array counts as few-valued (looked up); none does (sorted)
        monkeypatch.setattr(rank_statistics, "FEW_DISTINCT_VALUES", few_distinct)
        assert np.array_equal(rank_statistics._normal_scores(draws), blom)
    if values == "few distinct":  # the comparison has power: ties ranked in turn instead of averaged differ
        in_turn = ndtri((rankdata(draws, method="ordinal") - 3 / 8) / (draws.size + 1 / 4)).reshape(draws.shape)
        assert not np.array_equal(in_turn, blom)


@pytest.mark.parametrize("values", ["continuous", "few distinct", "few distinct, folded ties"])
def test_folded_scores_are_blom_scores_of_the_folded_draws_by_either_path(values, monkeypatch):
    """The folded draws' scores, which with few distinct values come from the draws' own groups, equal Blom's
    scores of |x - median(x)| ranked afresh, ties across the median included (values 0..20 about 10)."""
    rng = np.random.default_rng(4)
    draws = {"continuous": rng.normal(size=(4, 5001)), "few distinct": rng.poisson(3.0, (4, 5000)).astype(float),
             "few distinct, folded ties": rng.integers(0, 21, (4, 5000)).astype(float)}[values]
    folded = np.abs(draws - np.median(draws))

    def blom(x):
        return ndtri((rankdata(x, method="average") - 3 / 8) / (x.size + 1 / 4)).reshape(x.shape)

    for few_distinct in (1, draws.size + 1):
        monkeypatch.setattr(rank_statistics, "FEW_DISTINCT_VALUES", few_distinct)
        scores, folded_scores = rank_statistics._scores_and_folded_scores(draws)
        assert np.array_equal(scores, blom(draws)) and np.array_equal(folded_scores, blom(folded))
    if values == "few distinct, folded ties":  # the comparison has power: ties across the median kept apart differ
        assert not np.array_equal(folded_scores, blom(folded + 1e-9 * (draws > np.median(draws))))


def test_edge_cases():
    constant = np.full((4, 50), 2.5)
    assert np.isnan(rank_rhat(constant))  # no variance within chains
    assert bulk_ess(constant) == 200.0
    assert np.isnan(bulk_ess(np.zeros((2, 3)) + [[0, 1, 2]])) and np.isnan(rank_rhat(np.ones((1, 100))))
    assert np.isnan(bulk_ess(np.array([[0.0, 1.0, np.nan, 2.0, 3.0]])))
    stuck = np.concatenate([np.random.default_rng(0).normal(size=(2, 500)), 5 + np.random.default_rng(1).normal(size=(2, 500))])
    assert rank_rhat(stuck) > 1.5 and bulk_ess(stuck) < 100  # chains in two places disagree
    with pytest.raises(ValueError, match="draws"):
        rank_rhat(np.zeros(10))


FIT_AND_PREDICT = """
import json, sys
import numpy as np
import interpretable_zoo as iz
rng = np.random.default_rng(0)
X = rng.integers(0, 2, size=(60, 3))
y = X[:, 0] ^ (rng.random(60) < 0.1)
clf = iz.BayesianRuleListClassifier(num_samples=200, num_warmup=50, num_chains=2, n_temperatures=2,
                                    min_support=0.1, progress_bar=False, seed=0).fit(X, y)
clf.predict(X), clf.result_.explain_frame()
bcm = iz.fit_bcm(np.repeat([[0, 0, 1], [1, 1, 0]], 6, axis=0), 2, num_samples=30, num_warmup=0, num_chains=2,
                 n_temperatures=1, progress_bar=False)
bcm.explain(), bcm.transform(), bcm.subspace_probabilities(), bcm.unsupervised_accuracy(np.arange(12) % 2)
during = "arviz" in sys.modules
shapes = [list(clf.result_.idata.posterior["length"].shape), list(bcm.idata.posterior_sites["omega"].shape)]
print(json.dumps([during, "arviz" in sys.modules, shapes, clf.result_.converged in (True, False)]))
"""


def test_brl_and_bcm_fits_and_their_answers_do_not_import_arviz():
    out = subprocess.run([sys.executable, "-c", FIT_AND_PREDICT], capture_output=True, text=True, check=True)
    during, after, shapes, has_diagnostics = json.loads(out.stdout.strip().splitlines()[-1])
    assert not during and after and has_diagnostics
    assert shapes == [[2, 200], [2, 30, 2, 3]]  # idata built on first use
