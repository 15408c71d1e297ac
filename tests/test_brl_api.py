"""BRL public layer: rule mining, fit_brl and its result, the classifier, bad input, reproductions."""

import itertools
import json
import pickle

import arviz as az
import jax
import jax.numpy as jnp
import numpy as np
import pandas as pd
import pytest
from sklearn.base import clone
from sklearn.metrics import roc_auc_score

from interpretable_zoo.datasets import load_titanic
from interpretable_zoo.datasets.planted_rule_lists import planted_rule_lists
from interpretable_zoo.demos.brl import cli_demo
from interpretable_zoo.inference.brl import BayesianRuleListClassifier, fit_brl
from interpretable_zoo.inference import brl_mh
from interpretable_zoo.inference.rule_mining import (
    antecedent_neighbours,
    binary_items,
    fit_item_encoder,
    mine_antecedents,
    neighbour_counts,
)
from interpretable_zoo.models import brl

FAST = {"num_warmup": 300, "num_samples": 600, "num_chains": 2, "n_temperatures": 4}


# ---------------------------------------------------------------- mining


def test_miner_finds_exactly_the_itemsets_frequent_in_some_class():
    rng = np.random.default_rng(0)
    items = (rng.random((120, 7)) < 0.45).astype(np.uint8)
    y = rng.integers(0, 3, 120)
    columns = np.array([0, 0, 1, 2, 3, 4, 5])  # items 0 and 1 come from one column
    mined = set(mine_antecedents(items, y, min_support=0.08, max_cardinality=3, item_columns=columns))
    expected = set()
    for k in (1, 2, 3):
        for itemset in itertools.combinations(range(7), k):
            if len(set(columns[list(itemset)])) < k:
                continue
            covered = items[:, list(itemset)].all(axis=1)
            if any(covered[y == c].mean() >= 0.08 for c in range(3)):
                expected.add(itemset)
    assert mined == expected and any(len(s) == 3 for s in mined)


def test_neighbours_are_the_antecedents_of_as_many_items_that_share_all_but_one():
    antecedents = [(0,), (1,), (0, 1), (0, 2), (2, 1), (3, 4), (0, 1, 2)]
    expected = [
        {b for b in range(len(antecedents)) if b != a and len(antecedents[b]) == len(antecedents[a])
         and len(set(antecedents[a]) & set(antecedents[b])) == len(antecedents[a]) - 1}
        for a in range(len(antecedents))
    ]  # fmt: skip
    found = antecedent_neighbours(antecedents)
    assert [set(row) for row in found] == expected
    np.testing.assert_array_equal(neighbour_counts(antecedents), [len(row) for row in expected])
    assert found[2] == [3, 4] and found[5] == [] and found[6] == []  # (2, 1) is the set {1, 2}
    # the kernel's compressed rows hold each N(a) in order, and take the bytes the memory check counts
    slots = brl_mh.padded_antecedent_count(len(antecedents))
    starts, flat, log_choice = brl_mh.neighbour_tables(found, slots)
    assert [flat[starts[a]:starts[a + 1]].tolist() for a in range(slots)] == found + [[]] * (slots - len(found))
    assert (flat[starts[-1]:] == -1).all() and len(flat) == brl_mh.neighbour_list_size(starts[-1])
    assert starts.nbytes + flat.nbytes == brl_mh.neighbour_table_bytes(neighbour_counts(antecedents))
    np.testing.assert_allclose(np.exp(log_choice[2]), 0.5, rtol=1e-6)  # two neighbours, each drawn with 1/2


@pytest.mark.parametrize("neighbours, message", [
    ([[1], [0]], "one list per antecedent"),
    ([[1], [0], [5]], "other antecedents' indices"),
    ([[0], [], []], "other antecedents' indices"),
    ([[1], [], []], "not symmetric"),
])
def test_a_bad_neighbour_relation_is_named(neighbours, message):
    table = np.array([[1, 0, 1], [0, 1, 1]], bool)
    with pytest.raises(ValueError, match=f"neighbours: .*{message}"):
        brl_mh.make_target(table, np.ones(3, np.int32), 2, np.array([0, 1]), brl.Priors(), 3, neighbours=neighbours)


def test_item_encoder_names_values_negations_and_thresholds():
    frame = pd.DataFrame(
        {"sex": ["male", "female", "male", "female"], "cell": ["x", "o", "b", "x"], "age": [10, 20, 30, 40]}
    )
    encoder = fit_item_encoder(frame, n_bins=2)
    assert encoder.item_names == (
        "sex=female", "sex=male", "cell=b", "cell=o", "cell=x", "cell!=b", "cell!=o", "cell!=x", "age<=25", "age>25",
    )  # fmt: skip
    items = encoder.transform(frame)
    np.testing.assert_array_equal(items[:, -2], [1, 1, 0, 0])
    np.testing.assert_array_equal(items[:, 4] + items[:, 7], 1)
    positive = fit_item_encoder(frame, n_bins=2, negations=False)
    assert positive.item_names == ("sex=female", "sex=male", "cell=b", "cell=o", "cell=x", "age<=25", "age>25")
    np.testing.assert_array_equal(positive.transform(frame), items[:, [0, 1, 2, 3, 4, 8, 9]])
    with pytest.raises(ValueError, match="negations"):
        fit_item_encoder(frame, negations="no")
    items_binary, names, _ = binary_items(np.array([[1, 0], [0, 1]]), ["a", "b"])
    assert names == ("a", "b", "not a", "not b") and items_binary.tolist() == [[1, 0, 0, 1], [0, 1, 1, 0]]


# ---------------------------------------------------------------- bad input


@pytest.mark.parametrize(
    "X, y, options, name",
    [
        (np.array([[0, 2], [1, 0]]), [0, 1], {}, "binary"),
        (np.array([[0.0, np.nan], [1, 0]]), [0, 1], {}, "NaN"),
        (np.array([[0, 1], [1, 0]]), [1, 1], {}, "single class"),
        (np.array([[0, 1], [1, 0]]), [0, 1, 1], {}, "y: must be"),
        (np.array([[0, 1], [1, 0], [0, 1], [1, 0]]), [0, 0, 1, 1], {"min_support": 0.9}, "min_support"),
        (np.array([[0, 1], [1, 0]]), [0, 1], {"antecedents": [(0, 5)]}, "antecedents"),
        (np.array([[0, 1], [1, 0]]), [0, 1], {"antecedents": [(0,)], "priors": brl.Priors(alpha=(1, 1, 1))}, "alpha"),
        (np.ones((2, 2, 2)), [0, 1], {}, "2-D"),
        (np.array([[0, 1], [1, 0]]), [0, 1], {"antecedents": [(0,)], "n_temperatures": 0}, "n_temperatures"),
        (np.array([[0, 1], [1, 0]]), [0, 1], {"antecedents": [(0,)], "n_temperatures": "hot"}, "n_temperatures"),
        (np.array([[0, 1], [1, 0]]), [0, 1], {"antecedents": [(0,)], "target_rhat": 0.9}, "target_rhat"),
        (np.array([[0, 1], [1, 0]]), [0, 1], {"antecedents": [(0,)], "min_ess": -5}, "min_ess"),
        (np.array([[0, 1], [1, 0]]), [0, 1], {"antecedents": [(0,)], "max_seconds": -1}, "max_seconds"),
        (np.array([[0, 1], [1, 0]]), [0, 1], {"antecedents": [(0,)], "num_warmup": -1}, "num_warmup"),
        (np.array([["a", "b"], ["b", "a"]]), [0, 1], {"antecedents": [(0,)]}, "antecedents"),
        (np.array([[0, 1], [1, 0]]), [0, 1], {"antecedents": [(0,)], "seed": 2**70}, r"seed: must be an integer in \[0, 2\*\*32\)"),
        (np.array([[0, 1], [1, 0]]), [0, 1], {"antecedents": [(0,)], "seed": 2**32}, "seed"),
    ],
)
def test_bad_input_gets_a_clear_value_error(X, y, options, name):
    with pytest.raises(ValueError, match=name):
        fit_brl(X, y, **{**FAST, **options})


def test_zero_chains_are_refused():
    with pytest.raises(ValueError, match="num_chains"):
        fit_brl(np.array([[0, 1], [1, 0]]), [0, 1], antecedents=[(0,)], **{**FAST, "num_chains": 0})


def test_bad_priors_name_the_hyperparameter():
    with pytest.raises(ValueError, match="lam"):
        brl.Priors(lam=0)
    with pytest.raises(ValueError, match="alpha"):
        brl.Priors(alpha=(1.0, -2.0))


# ---------------------------------------------------------------- fit and result


@pytest.fixture(scope="module")
def planted():
    data = planted_rule_lists(n_samples=600, n_features=5, priors=brl.Priors(alpha=0.3), seed=3)
    result = fit_brl(data.X, data.y, antecedents=data.extras["antecedents"], max_length=5, seed=1, **FAST)
    return data, result


@pytest.mark.filterwarnings("ignore:max_length")
def test_result_trace_layout_and_reproducibility(planted):
    data, result = planted
    posterior, sites = result.idata.posterior, result.idata.posterior_sites
    assert sites["rules"].shape == (2, 600, 5)
    rules, lengths = sites["rules"].values, posterior["length"].values
    assert ((rules >= 0) == (np.arange(5) < lengths[..., None])).all()
    assert set(posterior.data_vars) == {"length", "mean_cardinality", "log_posterior"}
    assert list(az.summary(result.idata).index) == ["length", "mean_cardinality", "log_posterior"]
    assert sites.attrs["antecedent_names"][-1] == "x3 and x4"
    # rule_in_list: each antecedent in at least 1 % of the draws, named by its text, 1 where the list holds it
    names, in_list = sites.attrs["antecedent_names"], sites["rule_in_list"]
    drawn_share = np.array([(rules == index).any(-1).mean() for index in range(len(names))])
    shown = [names.index(name) for name in in_list["antecedent"].values]
    assert sorted(shown) == list(np.flatnonzero(drawn_share >= 0.01)) and len(shown) < len(names)
    for index, column in zip(shown, np.moveaxis(in_list.values, -1, 0)):
        np.testing.assert_array_equal(column, (rules == index).any(-1))
    table = az.summary(result.idata, group="posterior_sites", var_names=["rule_in_list"])
    np.testing.assert_allclose(table["mean"], drawn_share[shown], atol=0.005)  # summary's two decimals
    observed = result.idata.observed_data
    labels = np.asarray(observed.attrs["classes"])[observed["y"].values]
    assert observed["y"].dims == ("observation",) and list(labels) == [str(label) for label in data.y]
    again = fit_brl(data.X, data.y, antecedents=data.extras["antecedents"], max_length=5, seed=1, **FAST)
    np.testing.assert_array_equal(again.idata.posterior_sites["rules"].values, rules)


@pytest.mark.filterwarnings("ignore:max_length")
def test_a_dataframe_index_names_the_observations_without_changing_the_draws(planted):
    data, result = planted
    frame = pd.DataFrame(data.X, index=[f"passenger{i}" for i in range(len(data.X))])
    named = fit_brl(frame, data.y, antecedents=data.extras["antecedents"], max_length=5, seed=1, **FAST)
    for group in (named.idata.log_likelihood, named.idata.observed_data):
        assert list(group["observation"].values) == list(frame.index)
    assert list(result.idata.observed_data["observation"].values) == list(range(len(data.X)))
    np.testing.assert_array_equal(named.idata.posterior_sites["rules"].values, result.idata.posterior_sites["rules"].values)


@pytest.mark.filterwarnings("ignore:max_length")
def test_planted_list_is_recovered(planted):
    data, result = planted
    rules = data.extras["rules"]
    table = np.stack([data.X[:, list(a)].all(axis=1) for a in data.extras["antecedents"]], axis=1)
    position = np.asarray(brl.capture_index(table, np.array(list(rules) + [-1] * (5 - len(rules))), len(rules)))
    planted_probability = data.extras["theta"][np.minimum(position, len(rules))]
    point = result.predict_proba(data.X)
    assert np.abs(point - planted_probability).mean() < 0.03
    np.testing.assert_allclose(result.predict_proba(data.X, estimate="post").sum(axis=1), 1.0, rtol=1e-5)
    # the best sampled list is at least as probable as the planted one
    best = result.idata.posterior["log_posterior"].values.max()
    counts = result.rule_counts(rules)
    padded = np.array(list(rules) + [-1] * (5 - len(rules)))
    cardinalities = np.array([len(a) for a in data.extras["antecedents"]])
    planted_log_posterior = brl.log_prior(padded, len(rules), cardinalities, result.priors, 5) + (
        brl.log_marginal_likelihood(
            np.vstack([counts[:-1], np.zeros((5 - len(rules), 2))]), counts[-1], len(rules), result.priors.alpha_vector(2)
        )
    )
    assert best >= float(planted_log_posterior) - 1e-3


def test_explanation_lists_rules_with_credible_intervals(planted):
    _, result = planted
    text = result.explain(outcome="positive")
    lines = text.splitlines()
    assert len(lines) == len(result.point_list()) + 1
    assert lines[-1].startswith("else" if len(lines) > 1 else "positive")
    assert all("positive probability" in line and "%-" in line for line in lines)


# ---------------------------------------------------------------- classifier and reproductions


def test_classifier_on_a_mixed_dataframe_is_a_sklearn_estimator():
    rng = np.random.default_rng(2)
    frame = pd.DataFrame({"age": rng.integers(1, 80, 300), "sex": rng.choice(["male", "female"], 300)})
    y = np.where((frame["sex"] == "female") | (frame["age"] < 15), "survived", "died")
    classifier = BayesianRuleListClassifier(n_bins=5, **FAST).fit(frame, y)
    assert classifier.score(frame, y) > 0.97
    assert set(classifier.predict(frame)) <= {"died", "survived"}
    assert clone(classifier).get_params()["n_bins"] == 5
    assert "sex=female" in classifier.explain() or "sex=male" in classifier.explain()


def test_fit_brl_takes_a_table_of_categories_as_the_classifier_does():
    """The same items, antecedents and draws as BayesianRuleListClassifier with the same options; the result
    predicts from the table; an array of strings with feature names gives the same items."""
    from interpretable_zoo.datasets import load_titanic_table

    data = load_titanic_table()
    options = {"min_support": 0.3, "seed": 4, **FAST, "num_samples": 100}
    result = fit_brl(data.X, data.y, **options)
    classifier = BayesianRuleListClassifier(**options).fit(data.X, data.y)
    assert result.item_names == classifier.result_.item_names and "sex=male" in result.item_names
    assert result.antecedents == classifier.result_.antecedents
    np.testing.assert_array_equal(result.run.records["rules"], classifier.result_.run.records["rules"])
    np.testing.assert_array_equal(result.predict_proba(data.X), classifier.predict_proba(data.X))
    strings = data.X.to_numpy().astype(str)
    named = fit_brl(strings, data.y, feature_names=list(data.X.columns), **options)
    assert set(named.item_names) == set(result.item_names)
    np.testing.assert_array_equal(named.predict_proba(strings), named.predict_proba(data.X))  # by position, by name
    unnamed = fit_brl(strings, data.y, **options)
    on_strings = BayesianRuleListClassifier(**options).fit(strings, data.y)
    assert unnamed.item_names == on_strings.result_.item_names and "x2=male" in unnamed.item_names
    np.testing.assert_array_equal(unnamed.predict_proba(strings), on_strings.predict_proba(strings))


def test_fit_brl_bins_a_numeric_table_as_the_classifier_does():
    """A DataFrame with a numeric column that is not 0/1 is a table: fit_brl bins it into the classifier's
    items and draws what the classifier draws; a DataFrame of 0/1 columns stays a matrix whose columns are
    the items."""
    rng = np.random.default_rng(2)
    age, fare = rng.integers(1, 80, 300), rng.gamma(2.0, 20.0, 300)
    y = (age < 15) | (fare > 60)
    table = pd.DataFrame({"age": age, "fare": fare, "male": rng.integers(0, 2, 300)})
    options = {"min_support": 0.1, "seed": 1, **FAST, "num_samples": 50}
    result = fit_brl(table, y, **options)
    classifier = BayesianRuleListClassifier(**options).fit(table, y)
    assert result.item_names == classifier.result_.item_names and "age<=21" in result.item_names
    np.testing.assert_array_equal(result.run.records["rules"], classifier.result_.run.records["rules"])
    np.testing.assert_array_equal(result.predict_proba(table), classifier.predict_proba(table))
    binary = fit_brl(table[["male"]].assign(young=(age < 15).astype(int)), y, **options)
    assert set(binary.item_names) <= {"male", "young", "not male", "not young"}


def test_titanic_letham_split(data_home):
    train, test = load_titanic("train", data_home), load_titanic("test", data_home)
    classifier = BayesianRuleListClassifier(num_warmup=250, num_samples=500, num_chains=2, n_temperatures=4).fit(train.X, train.y)
    accuracy = classifier.score(test.X, test.y)
    auc = roc_auc_score(test.y, classifier.predict_proba(test.X)[:, 1])
    assert accuracy >= 0.77 and auc >= 0.70, (accuracy, auc)  # imodels' BRL: accuracy .82, AUC .73-.78


def test_three_classes_fit_predict_and_explain():
    rng = np.random.default_rng(4)
    X = rng.integers(0, 2, (300, 4))
    y = np.where(X[:, 0] == 1, "a", np.where(X[:, 1] == 1, "b", "c"))
    result = fit_brl(X, y, **FAST)
    assert list(result.classes) == ["a", "b", "c"]
    assert np.mean(result.predict(X) == y) == 1.0
    assert result.predict_proba(X, estimate="post").shape == (300, 3)
    assert "probability" in result.explain() and "y=a" in result.explain()


def test_cli_demo_prints_a_rule_list_and_r_hat():
    text = cli_demo(**FAST)  # the bundled 2201-passenger Titanic table
    assert text.startswith("if ") and "r_hat" in text and "sex=" in text and "survival probability" in text


# ---------------------------------------------------------------- structured explanation and log likelihood


def test_explanation_frame_and_dict_hold_the_numbers_of_the_text(planted):
    """One row per rule of BRL-point (default last): support and captured counts recounted here from the
    truth table, probabilities that sum to one inside their credible intervals, the text's percentages,
    and a JSON round trip of to_dict."""
    data, result = planted
    rules = result.point_list()
    frame = result.explain_frame(level=0.9)
    assert list(frame["antecedent_index"]) == [*rules, -1] and pd.isna(frame["antecedent"].iloc[-1])
    holds = result.train_table[:, list(rules)].astype(bool)
    first = np.where(holds.any(1), holds.argmax(1), len(rules))
    np.testing.assert_array_equal(frame["support"], [*holds.sum(0), len(data.y)])
    np.testing.assert_array_equal(frame["captured"], np.bincount(first, minlength=len(rules) + 1))
    np.testing.assert_array_equal(frame["captured_1"], np.bincount(first, weights=data.y == 1, minlength=len(rules) + 1))
    np.testing.assert_allclose(frame["p_0"] + frame["p_1"], 1.0)
    assert ((frame["p_1_low"] < frame["p_1"]) & (frame["p_1"] < frame["p_1_high"])).all()
    wider = result.explain_frame(level=0.99)
    assert (wider["p_1_high"] - wider["p_1_low"] > frame["p_1_high"] - frame["p_1_low"]).all()
    for line, (_, row) in zip(result.explain(level=0.9).splitlines(), frame.iterrows()):
        assert f"{row['p_1']:.0%} ({row['p_1_low']:.0%}-{row['p_1_high']:.0%})" in line
    as_dict = json.loads(json.dumps(result.to_dict(level=0.9), allow_nan=False))
    assert as_dict["model"] == "BRL" and as_dict["classes"] == [0, 1] and len(as_dict["rules"]) == len(frame)
    assert as_dict["rules"][0]["p_1_high"] == pytest.approx(frame["p_1_high"].iloc[0])
    assert as_dict["rules"][-1]["antecedent"] is None and as_dict["rules"][0]["antecedent"] == frame["antecedent"].iloc[0]
    assert "<table" in result._repr_html_() and "converged" in result._repr_html_()
    assert str(result).endswith(result.explain()) and "converged: worst R-hat" in str(result)
    assert repr(result).startswith("<Bayesian rule list (BRL-point): classes: 0, 1; antecedents: ") and "\n" not in repr(result)
    with pytest.raises(ValueError, match="level"):
        result.explain_frame(level=1.0)


def test_loo_predictive_is_the_chain_rule_term_of_the_collapsed_likelihood():
    """log p(y_n | x_n, d, y_-n) = log p(y | x, d) - log p(y_-n | x_-n, d) for every n (Letham eq. 5)."""
    rng = np.random.default_rng(5)
    table = rng.random((14, 4)) < 0.5
    y = rng.integers(0, 3, 14)
    alpha = np.array([0.5, 1.0, 2.0])
    rules, length = jnp.array([2, 0, -1, -1]), 2
    counts, default = brl.capture_counts(table, y, 3, rules, length)
    everything = np.vstack([counts, default[None]])  # rows: the 4 rule slots, then the default rule
    log_marginal = jax.jit(lambda c: brl.log_marginal_likelihood(c[:-1], c[-1], length, alpha))
    rule = np.asarray(brl.capture_index(table, rules, length))  # 4 for the default rule
    pointwise = np.asarray(brl.loo_log_predictive(table, y, alpha, rules, length))
    expected = []
    for n in range(14):
        without = everything.copy()
        without[rule[n], y[n]] -= 1
        expected.append(float(log_marginal(everything)) - float(log_marginal(without)))
    np.testing.assert_allclose(pointwise, expected, rtol=1e-5)


def test_log_likelihood_group_serves_loo_and_compare(planted):
    """The pointwise group (chain, draw, observation) float32 names every dim; az.loo runs, and az.compare
    prefers the planted prior to one that pins every rule's probability near 1/2 (alpha = 300), on the same data."""
    import arviz as az

    data, result = planted
    pointwise = result.idata.log_likelihood["y"]
    assert pointwise.dims == ("chain", "draw", "observation") and pointwise.dtype == np.float32
    assert pointwise.shape == (2, 600, 600)
    for group in result.idata.groups():
        assert not [d for d in result.idata[group].dims if "_dim_" in d], group
    flat = fit_brl(data.X, data.y, antecedents=data.extras["antecedents"], max_length=5, seed=1,
                   priors=brl.Priors(alpha=300.0), **FAST)
    assert np.isfinite(az.loo(result.idata).elpd_loo)
    ranking = az.compare({"planted prior": result.idata, "alpha = 300": flat.idata})
    assert ranking.index[0] == "planted prior"
    assert ranking.loc["alpha = 300", "elpd_diff"] > 4 * ranking.loc["alpha = 300", "dse"]


def test_saved_result_loads_to_the_same_predictions_explanation_and_continuation(planted, tmp_path):
    from interpretable_zoo import load_result, save_result

    data, result = planted
    save_result(result, tmp_path / "brl.pkl")
    loaded = load_result(tmp_path / "brl.pkl")
    for estimate in ("point", "post"):
        np.testing.assert_array_equal(loaded.predict_proba(data.X, estimate=estimate),
                                      result.predict_proba(data.X, estimate=estimate))
    assert loaded.explain() == result.explain() and loaded.to_dict() == result.to_dict()
    np.testing.assert_array_equal(loaded.extend(num_samples=64).idata.posterior_sites["rules"],
                                  result.extend(num_samples=64).idata.posterior_sites["rules"])


def test_a_saved_result_is_checked_against_its_header_before_it_is_unpickled(planted, tmp_path):
    """Each damaged or foreign file is refused by name, with what is wrong, and none is unpickled: a pickle
    without the header (an earlier version's file), a byte flipped, the file cut short, a header announcing
    16 GiB, another kind of file, another layout, a well-formed file that holds no result, and a folder."""
    from interpretable_zoo import load_result, save_result
    from interpretable_zoo.inference import checkpoint

    _, result = planted
    save_result(result, tmp_path / "brl.pkl")
    whole = (tmp_path / "brl.pkl").read_bytes()
    header, payload = whole.split(b"\n", 1)
    flipped = bytearray(whole)
    flipped[len(header) + 1 + len(payload) // 2] ^= 1
    damaged = {
        "other.pkl": (pickle.dumps({"format": checkpoint.RESULT_FORMAT, "result": result}), "is not a result saved by"),
        "flipped.pkl": (bytes(flipped), "is corrupted: its contents do not match the checksum"),
        "cut.pkl": (whole[: len(whole) // 2], "is truncated: it holds"),
        "huge.pkl": (b"interpretable-zoo result 4 17179869184 " + b"0" * 64 + b"\n" + payload[:100], "is truncated"),
        "longer.pkl": (whole + b"\0", "is corrupted"),
    }
    for name, (contents, message) in damaged.items():
        (tmp_path / name).write_bytes(contents)
        with pytest.raises(ValueError, match=f"^path: .*{name} {message}"):
            load_result(tmp_path / name)
    for name, tag, value, message in [
        ("checkpoint.pkl", checkpoint.CHECKPOINT_FORMAT, {"a": 1}, "is an interpretable-zoo checkpoint file, not a result"),
        ("old.pkl", ("interpretable-zoo result", 1), {"result": result}, "has the layout 1 of another version"),
        ("none.pkl", checkpoint.RESULT_FORMAT, {"version": "0", "result": None}, "holds no fitted result"),
    ]:
        checkpoint._write_atomically(tmp_path / name, tag, value)
        with pytest.raises(ValueError, match=f"^path: .*{name} {message}"):
            load_result(tmp_path / name)
    (tmp_path / "folder.pkl").mkdir()
    with pytest.raises(ValueError, match="^path: .*folder.pkl is a folder, not a result saved by"):
        load_result(tmp_path / "folder.pkl")
    assert load_result(tmp_path / "brl.pkl").explain() == result.explain()


def test_rule_list_and_trace_plots_draw_the_frame_and_the_swap_acceptance(planted):
    import matplotlib

    matplotlib.use("Agg")
    from interpretable_zoo.diagnostics import plot_rule_list, plot_trace

    _, result = planted
    frame = result.explain_frame()
    ax = plot_rule_list(result, outcome="positive")
    labels = [t.get_text() for t in ax.get_yticklabels()]
    assert len(labels) == len(frame) and labels[0] == f"if {frame['antecedent'].iloc[0]}" and labels[-1] == "else"
    means = ax.lines[0].get_xdata()
    np.testing.assert_allclose(means, frame["p_1"])
    axes = plot_trace(result)  # tempered (4 rungs): the label-free summaries and the swap acceptance
    assert axes.shape == (4, 2) and axes[-1, 0].get_title() == "swap_accept"
    assert plot_trace(result, swap_acceptance=False).shape == (3, 2)
    rates = result.move_rates  # a rung per row, prior first, as the trace's attributes hold them
    assert list(rates.index) == list(result.idata.posterior.attrs["inverse_temperatures"]) and len(rates) == 4
    np.testing.assert_allclose(rates["accept_prob"], result.idata.posterior.attrs["move_rate_accept_prob"])
    per_move = [f"{move}_accept_prob" for move in ("insert", "delete", "swap", "replace", "neighbour")]
    assert set(rates.columns) == {"accept_prob", "null_share", *per_move}
    for name in per_move:
        np.testing.assert_allclose(rates[name], result.idata.posterior.attrs[f"move_rate_{name}"])
        assert ((rates[name] >= 0) & (rates[name] <= 1)).all()  # every move was tried on every rung


def test_posterior_predictive_replicates_labels_from_the_posterior_of_theta():
    """Each observation's replicated label is 1 as often as BRL-post predicts it (its expectation over the
    same draws), within 4 standard errors of the replication; the labels from theta's prior (counts left
    out), the control, are not. The group serves az.plot_ppc; a seed fixes the draws."""
    import arviz as az
    import matplotlib

    matplotlib.use("Agg")
    rng = np.random.default_rng(0)
    X = rng.integers(0, 2, (40, 3))
    y = (X[:, 0] & X[:, 1]) ^ (rng.random(40) < 0.2)
    priors = brl.Priors(alpha=(0.3, 3.0))
    result = fit_brl(X, y, antecedents=[(0,), (1,), (2,), (0, 1)], priors=priors, num_samples=2000, num_chains=4,
                     n_temperatures=1, seed=1, progress_bar=False)
    idata = result.add_posterior_predictive(seed=0)
    replicated = idata.posterior_predictive["y"]
    assert replicated.dims == ("chain", "draw", "observation") and replicated.shape == (4, 2000, 40)
    share = (replicated.values == 1).mean((0, 1))
    expected = result.predict_proba(X, estimate="post")[:, 1]
    error = 4 * np.sqrt(expected * (1 - expected) / 8000)
    assert np.all(np.abs(share - expected) <= error), np.abs(share - expected) / error
    from_prior = priors.alpha_vector(2)[1] / priors.alpha_vector(2).sum()
    assert not np.all(np.abs(share - from_prior) <= error)
    again = result.add_posterior_predictive(seed=0).posterior_predictive["y"].values
    other = result.add_posterior_predictive(seed=1).posterior_predictive["y"].values
    assert np.array_equal(again, replicated.values) and not np.array_equal(other, again)
    az.plot_ppc(result.idata, num_pp_samples=20)
