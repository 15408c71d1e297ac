"""BCM public layer: fit_bcm's trace and summaries, explanations, mixture weights, the scikit-learn
wrapper, bad input, and the paper's smiley-face and recipe examples."""

import pickle

import jax
import arviz as az
import numpy as np
import pandas as pd
import pytest
from sklearn.base import clone
from sklearn.metrics import get_scorer
from sklearn.pipeline import make_pipeline

from interpretable_zoo.datasets import load_recipes
from interpretable_zoo.datasets.smiley_faces import SMILEY_SUBSPACES
from interpretable_zoo.diagnostics import summary
from interpretable_zoo.inference import bcm_gibbs, bcm_pcgibbs
from interpretable_zoo.demos.bcm import cli_fit, format_demo, smiley_demo
from interpretable_zoo.inference.bcm import BCMClusterer, _initial_states, corrupt_half_labels, fit_bcm
from interpretable_zoo.models import bcm
from test_bcm_exact import N_CLUSTERS, OTHER_PRIORS, X_TINY, exact_probabilities, gof_of_draws

RNG = np.random.default_rng(0)
X_SMALL = RNG.integers(0, 3, (12, 5))
X_SMALL[0, 4] = 3  # feature 4 takes 4 values, the others 3: padded to V = 4
# Every small fit below has these shapes (12 x 5, V = 4, S = 3, 2 chains of 2 rungs), so they share two compiled
# samplers: one storing z (``small_fit``) and one without.
QUICK = {"num_warmup": 20, "num_samples": 30, "num_chains": 2, "n_temperatures": 2}


@pytest.fixture(scope="module")
def demo():
    return smiley_demo(num_warmup=100, num_samples=200, num_chains=2, n_temperatures=1)


@pytest.fixture(scope="module")
def small_fit():
    return fit_bcm(X_SMALL, 3, seed=5, store_z=True, **QUICK)


def test_trace_holds_the_sites_and_label_free_summaries(small_fit):
    posterior, sites = small_fit.idata.posterior, small_fit.idata.posterior_sites
    assert sites["omega"].shape == (2, 30, 3, 5)
    assert sites["prototype"].shape == (2, 30, 3)
    assert sites["z"].shape == (2, 30, 12, 5)
    assert posterior["sorted_cluster_size"].shape == (2, 30, 3)
    sizes = posterior["sorted_cluster_size"].values
    assert np.all(np.diff(sizes, axis=-1) <= 0) and np.all(sizes.sum(-1) == 12 * 5)
    np.testing.assert_array_equal(posterior["n_subspace_features"].values, sites["omega"].values.sum((-2, -1)))
    np.testing.assert_array_equal(sites["draw"].values, posterior["draw"].values)
    observed = small_fit.idata.observed_data["x"]
    assert observed.dims == ("observation", "feature")
    np.testing.assert_array_equal(observed.values, X_SMALL)
    assert list(observed["feature"].values) == list(sites["feature"].values)
    labels = np.arange(12) % 3
    by_observation, by_token = (small_fit.unsupervised_accuracy(labels, per=per) for per in ("observation", "token"))
    assert by_observation.shape == by_token.shape == (2, 30)
    assert np.all((by_token >= 0) & (by_token <= 1)) and np.all(by_observation * 12 == np.round(by_observation * 12))
    with pytest.raises(ValueError, match="per"):
        small_fit.unsupervised_accuracy(labels, per="pixel")
    table = summary(small_fit)
    assert {"log_joint", "n_subspace_features", "sorted_cluster_size"} == {name.split("[")[0] for name in table.index}
    assert np.all(np.isfinite(table["r_hat"]))
    assert list(az.summary(small_fit.idata).index) == list(table.index)  # ArviZ's default is the label-free rows


def test_same_seed_same_chains_other_seed_other_chains(small_fit):
    again = fit_bcm(X_SMALL, 3, seed=5, **QUICK)
    assert "z" not in again.idata.posterior_sites
    for name in ("omega", "prototype"):
        np.testing.assert_array_equal(again.idata.posterior_sites[name], small_fit.idata.posterior_sites[name])
    np.testing.assert_array_equal(again.idata.posterior["log_joint"], small_fit.idata.posterior["log_joint"])
    # the `izoo fit bcm` path, with another seed
    other = cli_fit(X_SMALL, None, seed=6, n_clusters=3, **QUICK).idata
    assert other.posterior_sites["omega"].shape == small_fit.idata.posterior_sites["omega"].shape
    assert "log_joint" in other.posterior
    assert not np.array_equal(other.posterior_sites["omega"], small_fit.idata.posterior_sites["omega"])


def test_explain_frame_text_and_dict_agree(small_fit):
    """The subspace weights are the posterior inclusion probabilities (>= 1/2 listed); the text shows the
    frame's rows; to_dict round-trips through JSON."""
    import json

    frame = small_fit.explain_frame()
    assert sorted(frame.index) == [0, 1, 2] and (np.diff(frame["share"]) <= 0).all()
    for _, row in frame.iterrows():
        assert len(row["subspace_features"]) == row["n_subspace"] == len(row["subspace_weights"])
        assert all(0.5 <= w <= 1 for w in row["subspace_weights"])
        assert row["subspace"] == ", ".join(f"{f}={v}" for f, v in zip(row["subspace_features"], row["subspace_values"]))
    lines = small_fit.explain().splitlines()
    assert len(lines) == 4 and all(f"prototype {p} " in line for p, line in zip(frame["prototype"], lines[1:]))
    as_dict = json.loads(json.dumps(small_fit.to_dict()))
    assert [c["prototype"] for c in as_dict["clusters"]] == frame["prototype"].tolist()
    assert "<table" in small_fit._repr_html_() and "converged" in small_fit._repr_html_()
    assert str(small_fit).endswith(small_fit.explain()) and "converged: worst R-hat" in str(small_fit)
    n_obs, n_features = small_fit.data.codes.shape
    assert repr(small_fit) == f"<Bayesian Case Model: observations: {n_obs}; features: {n_features}; clusters: 3; kernel: collapsed>"


def test_prototype_images_outline_the_subspace(small_fit):
    import matplotlib

    matplotlib.use("Agg")
    from interpretable_zoo.diagnostics import plot_prototypes

    axes = plot_prototypes(small_fit, (1, 5))
    frame = small_fit.explain_frame()
    assert [ax.get_title() for ax in axes] == list(frame["prototype_name"])
    inclusion = small_fit.subspace_probabilities()
    for ax, (cluster, prototype) in zip(axes, frame["prototype"].items()):
        np.testing.assert_array_equal(ax.images[0].get_array().ravel(), X_SMALL[prototype])
        inside = np.pad(inclusion[cluster] >= 0.5, 1)  # (7,): the outline is the subspace's boundary
        boundary = 2 * inside[1:-1].sum() + np.sum(inside[1:-1] & ~inside[:-2]) + np.sum(inside[1:-1] & ~inside[2:])
        assert len(ax.collections[0].get_segments()) == boundary
    with pytest.raises(ValueError, match="image_shape"):
        plot_prototypes(small_fit, (2, 3))


def test_subspace_heatmap_holds_the_inclusion_probabilities_of_the_shown_features(small_fit):
    import matplotlib

    matplotlib.use("Agg")
    from interpretable_zoo.diagnostics import plot_subspaces, plot_trace

    frame = small_fit.explain_frame()
    inclusion = small_fit.subspace_probabilities()[frame.index]
    ax = plot_subspaces(small_fit, threshold=0.9)
    shown = np.flatnonzero((inclusion >= 0.9).any(0))
    np.testing.assert_allclose(ax.images[0].get_array(), inclusion[:, shown])
    assert [label.get_text() for label in ax.get_xticklabels()] == [f"x{j}" for j in shown]
    in_subspace = inclusion[:, shown] >= 0.5
    assert len(ax.texts) == in_subspace.sum()  # each cell in a subspace shows the prototype's value
    hidden = plot_subspaces(small_fit, threshold=0.9, hide_value="0")  # features where every prototype has 0 go
    kept = shown[(X_SMALL[frame["prototype"].to_numpy()][:, shown] != 0).any(0)]
    assert [label.get_text() for label in hidden.get_xticklabels()] == [f"x{j}" for j in kept]
    with pytest.raises(ValueError, match="threshold"):
        plot_subspaces(small_fit, threshold=0.0)
    axes = plot_trace(small_fit)  # constrained layout; integer histograms with few ticks
    assert axes[0, 0].figure.get_layout_engine().__class__.__name__ == "ConstrainedLayoutEngine"
    assert all(len(ax.get_xticks()) <= 8 for ax in axes[:, 0])


def test_pointwise_log_likelihood_is_the_chain_rule_term():
    """log p(x_i | z_i, rest) = log p(x | z, omega, p) - log p(x_-i | z_-i, omega, p): the collapsed likelihood
    with observation i's tokens taken out of the counts."""
    static, data = bcm_gibbs.make_target(X_SMALL, 3)
    state = bcm_gibbs.init(static, data, jax.random.PRNGKey(3))
    pointwise = np.asarray(bcm_gibbs.pointwise_log_likelihood(static, data, jax.tree.map(lambda a: a[None], state)))[0]
    cells = np.arange(static.n_features) * static.n_values + np.asarray(data.x)  # (N, P)
    log_target_parts = jax.jit(bcm_gibbs.log_target_parts, static_argnums=0)
    for i in range(static.n_obs):
        cell_counts = np.asarray(state.cell_counts).copy()
        np.subtract.at(cell_counts, (cells[i], np.asarray(state.z)[i]), 1)
        row_counts = np.asarray(state.row_counts).copy()
        row_counts[i] = 0
        _, without = log_target_parts(static, data, state.omega, state.prototype, row_counts, cell_counts)
        assert pointwise[i] == pytest.approx(float(state.log_likelihood - without), rel=1e-4, abs=1e-4)


def test_log_likelihood_group_names_every_dim_and_serves_loo(small_fit):
    import arviz as az

    pointwise = small_fit.idata.log_likelihood["x"]
    assert pointwise.dims == ("chain", "draw", "observation") and pointwise.shape == (2, 30, 12)
    assert pointwise.dtype == np.float32
    for group in small_fit.idata.groups():
        assert not [d for d in small_fit.idata[group].dims if "_dim_" in d], group
    assert np.isfinite(az.loo(small_fit.idata).elpd_loo)


def test_diagnostics_table_names_its_rows_as_the_summary_does(small_fit):
    table = small_fit.diagnostics
    assert list(table.index) == list(summary(small_fit).index) == [
        "log_joint", *(f"sorted_cluster_size[{s}]" for s in range(small_fit.n_clusters)), "n_subspace_features"]
    engine = small_fit.run.diagnostics  # the same statistics under the engine's names
    assert table.loc["sorted_cluster_size[1]"].tolist() == list(engine["cluster_size_1"])
    assert list(table.columns) == ["r_hat", "ess_bulk"]


def test_saved_result_loads_to_the_same_answers(small_fit, tmp_path):
    from interpretable_zoo import load_result, save_result

    save_result(small_fit, tmp_path / "bcm.pkl")
    loaded = load_result(tmp_path / "bcm.pkl")
    assert loaded.explain() == small_fit.explain() and loaded.to_dict() == small_fit.to_dict()
    np.testing.assert_array_equal(loaded.transform(), small_fit.transform())
    np.testing.assert_array_equal(loaded.transform(X_SMALL[:4], seed=1), small_fit.transform(X_SMALL[:4], seed=1))


def test_fit_stopped_and_resumed_from_its_checkpoint_has_the_draws_of_one_run(small_fit, tmp_path, monkeypatch):
    """QUICK runs 2 tuning rounds (1 + 2 chunks of 16 scans) and 2 sampling chunks; the fit dies in its
    first sampling chunk and the call with the same checkpoint resumes: the draws of ``small_fit``."""
    from interpretable_zoo.inference import tempering
    from interpretable_zoo.inference.checkpoint import Checkpoint

    calls, run_scans = [], tempering.run_scans

    def dying(*args, **kwargs):
        calls.append(None)
        if len(calls) == 4:
            raise RuntimeError("killed")
        return run_scans(*args, **kwargs)

    monkeypatch.setattr(tempering, "run_scans", dying)
    checkpoint = Checkpoint(tmp_path / "bcm.ckpt", every_seconds=0)
    with pytest.raises(RuntimeError, match="killed"):
        fit_bcm(X_SMALL, 3, seed=5, store_z=True, checkpoint=checkpoint, **QUICK)
    monkeypatch.undo()
    resumed = fit_bcm(X_SMALL, 3, seed=5, store_z=True, checkpoint=checkpoint, **QUICK)
    for name in ("omega", "prototype", "z"):
        np.testing.assert_array_equal(resumed.idata.posterior_sites[name], small_fit.idata.posterior_sites[name])
    assert not (tmp_path / "bcm.ckpt").exists()


def test_feature_names_name_the_explanations_and_the_trace_without_changing_the_draws(small_fit):
    names = ["colour", "size", "shape", "weight", "texture"]
    named = fit_bcm(X_SMALL, 3, seed=5, store_z=True, feature_names=names, **QUICK)
    assert list(named.idata.posterior_sites["feature"].values) == names
    assert list(small_fit.idata.posterior_sites["feature"].values) == [f"x{j}" for j in range(5)]
    np.testing.assert_array_equal(named.idata.posterior_sites["omega"], small_fit.idata.posterior_sites["omega"])
    subspaces = named.explain_frame()["subspace_features"]
    assert any(len(features) for features in subspaces)
    assert all(set(features) <= set(names) for features in subspaces)


def test_ordinal_codes_held_as_floats_in_a_dataframe_are_categories(small_fit):
    """KBinsDiscretizer(encode="ordinal") writes bins as 0.0, 1.0, ...: the same categories as the integer codes."""
    frame = pd.DataFrame(X_SMALL.astype(float), columns=[f"x{j}" for j in range(5)])
    as_floats = fit_bcm(frame, 3, seed=5, store_z=True, **QUICK)
    np.testing.assert_array_equal(as_floats.idata.posterior_sites["omega"], small_fit.idata.posterior_sites["omega"])
    with pytest.raises(ValueError, match=r"column 'x0' holds numbers"):
        fit_bcm(frame.assign(x0=frame["x0"] + 0.5), 3, seed=5, **QUICK)


def test_explain_and_transform_on_a_dataframe():
    frame = pd.DataFrame(X_SMALL, columns=["colour", "size", "a", "b", "c"], index=[f"item{i}" for i in range(12)])
    frame["colour"] = np.array(["red", "blue", "green"])[X_SMALL[:, 0]]
    result = fit_bcm(frame, 3, seed=0, **QUICK)
    table = result.explain_frame()
    assert list(table.columns) == ["share", "prototype", "prototype_name", "n_subspace", "subspace", "subspace_features",
                                   "subspace_values", "subspace_weights"]
    assert len(table) == 3 and np.isclose(table["share"].sum(), 1.0)
    for _, row in table.iterrows():
        assert row["prototype_name"] == f"item{row['prototype']}"
        prototype = frame.iloc[row["prototype"]]
        for item in filter(None, row["subspace"].split(", ")):
            feature, value = item.split("=")
            assert str(prototype[feature]) == value
    weights = result.transform()
    assert weights.shape == (12, 3)
    np.testing.assert_allclose(weights.sum(1), 1.0, rtol=1e-5)
    new_rows = pd.DataFrame({"colour": ["green", "red", "red"], "size": [2, 0, 1], "a": [0, 1, 2], "b": [1, 1, 0],
                             "c": [3, 0, 1]})
    folded = result.transform(new_rows)
    assert folded.shape == (3, 3) and np.all(folded > 0)
    np.testing.assert_allclose(folded.sum(1), 1.0, rtol=1e-5)
    np.testing.assert_array_equal(result.transform(new_rows), folded)  # same seed, same weights
    # a row's weights depend neither on the other rows nor on their order (scikit-learn's sample-order check)
    np.testing.assert_allclose(result.transform(new_rows.iloc[::-1]), folded[::-1], rtol=1e-6)
    np.testing.assert_allclose(result.transform(new_rows.iloc[[1, 1]]), folded[[1, 1]], rtol=1e-6)
    assert not np.allclose(result.transform(new_rows, seed=1), folded)  # negative control: the seed matters
    for bad in (
        new_rows[["size", "colour", "a", "b", "c"]],  # other columns
        new_rows.assign(colour=["green", "purple", "red"]),  # a value not seen when fitting
        np.array([[0, 1, 2]]),  # three features
        np.array([[0, 3, 0, 0, 0]]),  # a code beyond the fitted range
        np.array([[0.5, 1, 0, 0, 0]]),
    ):
        with pytest.raises(ValueError, match="X"):
            result.transform(bad)


def test_clusterer_follows_the_scikit_learn_protocol():
    clusterer = BCMClusterer(n_clusters=2, num_warmup=10, num_samples=20, num_chains=2, seed=3, n_temperatures=2)
    assert clusterer.get_params()["n_clusters"] == 2
    clusterer.set_params(n_clusters=3)
    labels = clusterer.fit_predict(X_SMALL)
    assert labels.shape == (12,) and set(labels) <= {0, 1, 2}
    assert clusterer.transform(X_SMALL).shape == (12, 3)
    np.testing.assert_array_equal(clusterer.predict(X_SMALL[:4]), clusterer.transform(X_SMALL[:4]).argmax(1))
    assert np.isfinite(get_scorer("adjusted_rand_score")(clusterer, X_SMALL, labels))  # scoring reads predict
    frame = make_pipeline(clone(clusterer)).set_output(transform="pandas").fit_transform(X_SMALL)
    assert list(frame.columns) == ["bcmclusterer0", "bcmclusterer1", "bcmclusterer2"] and frame.shape == (12, 3)
    assert len(clusterer.explain().splitlines()) == 4  # a heading and a line per cluster
    assert str(clusterer) == clusterer.explain() and str(clone(clusterer)) == repr(clone(clusterer))
    restored = pickle.loads(pickle.dumps(clusterer))  # with its BCMResult, which once held a local lambda
    np.testing.assert_allclose(restored.transform(X_SMALL), clusterer.transform(X_SMALL))
    pd.testing.assert_frame_equal(restored.result_.explain_frame(), clusterer.result_.explain_frame())
    assert pickle.loads(pickle.dumps(clone(clusterer))).get_params() == clusterer.get_params()


@pytest.mark.parametrize(
    "X, n_clusters, options, name",
    [
        (np.array([[0, 1], [np.nan, 1], [1, 0]]), 2, {}, "X"),
        (np.array([[0, -1], [1, 1], [1, 0]]), 2, {}, "X"),
        (np.array([[0, 0.5], [1, 1], [1, 0]]), 2, {}, "X"),
        (np.zeros((0, 3), int), 1, {}, "X"),
        (np.array([0, 1, 1]), 1, {}, "X"),
        (np.array([["a", "b"], ["c", "d"]]), 1, {}, "X"),
        (pd.DataFrame({"a": ["x", None, "y"]}), 1, {}, "X"),
        (X_SMALL, 0, {}, "n_clusters"),
        (X_SMALL, 13, {}, "n_clusters"),
        (X_SMALL, 2.5, {}, "n_clusters"),
        (X_SMALL, 2, {"init": "kmeans"}, "init"),
        (X_SMALL, 2, {"init": np.zeros(5, int)}, "init"),
        (X_SMALL, 2, {"init": np.full(12, 2)}, "init"),
        (X_SMALL, 2, {"init": np.zeros((3, 12), int)}, "init"),  # one start per chain, but 2 chains
        (X_SMALL, 2, {"n_temperatures": 0}, "n_temperatures"),
        (X_SMALL, 2, {"target_rhat": 0.5}, "target_rhat"),
        (X_SMALL, 2, {"max_seconds": 0}, "max_seconds"),
        (X_SMALL, 2, {"num_chains": 0}, "num_chains"),
        (X_SMALL, 2, {"priors": {"alpha": 1}}, "priors"),
        (X_SMALL, 2, {"num_samples": 0}, "num_samples"),
        (X_SMALL, 2, {"n_values": np.full(5, 2)}, "n_values"),  # codes up to 2 need 3 values
        (X_SMALL, 2, {"n_values": np.full(4, 3)}, "n_values"),
        (pd.DataFrame({"a": ["x", "y", "y"]}), 1, {"n_values": [3]}, "n_values"),
        (X_SMALL, 2, {"feature_names": ["a", "b"]}, "feature_names: has 2 names for 5 columns of X"),
    ],
)
def test_bad_input_gets_a_value_error_naming_the_argument(X, n_clusters, options, name):
    with pytest.raises(ValueError, match=name):
        fit_bcm(X, n_clusters, **{**QUICK, **options})


@pytest.mark.parametrize("field, value", [("alpha", 0.0), ("lam", -1.0), ("q", 1.0), ("c", float("nan"))])
def test_bad_priors_name_the_field(field, value):
    with pytest.raises(ValueError, match=f"priors.{field}"):
        bcm.Priors(**{field: value})


def test_corrupt_half_labels_changes_exactly_half():
    labels = np.repeat(np.arange(10), 7)
    corrupted = corrupt_half_labels(labels, 10, seed=1)
    assert (corrupted != labels).sum() == 35
    assert corrupted.min() >= 0 and corrupted.max() < 10


def test_smiley_faces_planted_subspaces_are_recovered(demo):
    """Sec. 3.1: 240 faces from the model with three planted two-feature subspaces; the found prototypes
    carry the planted prototypes' values on the planted subspaces."""
    faces, result = demo
    assert faces.X.shape == (240, 4)
    table = result.explain_frame()
    found = [frozenset(item.split("=")[0] for item in row.split(", ")) for row in table["subspace"]]
    assert set(found) == {frozenset(subspace) for subspace in SMILEY_SUBSPACES}
    truth = faces.X.iloc[faces.extras["prototype"]]
    for s, subspace in enumerate(SMILEY_SUBSPACES):
        row = table["subspace"].iloc[found.index(frozenset(subspace))]
        assert all(f"{feature}={truth.iloc[s][feature]}" in row for feature in subspace)


def test_transform_folds_in_new_rows_like_the_posterior_of_training_rows(demo):
    """Folding the training faces back in gives nearly their posterior-mean mixture weights, in the same
    clusters. A face the posterior splits between two clusters (no weight above 0.8) is folded in from one
    state, whose clusters hold it on one side or the other, so the argmax is compared on the others."""
    faces, result = demo
    folded, stored = result.transform(faces.X), result.transform()
    assert folded.shape == stored.shape == (240, 3)
    np.testing.assert_allclose(folded.sum(1), 1.0, rtol=1e-5)
    assert np.abs(folded - stored).mean() < 0.05
    decided = stored.max(1) >= 0.8
    assert decided.mean() >= 0.8
    assert np.mean(folded[decided].argmax(1) == stored[decided].argmax(1)) >= 0.95


def test_demo_text_has_the_explanation_and_r_hat(demo):
    text = format_demo(*demo)
    assert "subspace" in text and "r_hat" in text and "log_joint" in text


@pytest.mark.data
def test_recipes_prototypes_and_accuracy(data_home):
    """Fig. 4b: S = 4 on the 56 recipes (24 pasta, 22 chili, 5 brownies, 5 punch). Each recipe gets the
    category of its dominant cluster's prototype; chance (all pasta) is 0.43. A short run with the chains and
    temperatures of the BCM notebook's quick one (so the two share a compiled sampler); the defaults' run is
    the benchmark ``bcm_recipes``."""
    recipes = load_recipes(data_home)
    frame = pd.DataFrame(recipes.X, columns=recipes.feature_names, index=recipes.sample_names)
    result = fit_bcm(frame, 4, num_warmup=8, num_samples=16, num_chains=2, seed=0, n_temperatures=2)
    accuracy = result.unsupervised_accuracy(recipes.y)[result.best_chain].mean()
    table = result.explain_frame(hide_value="0")
    print(f"accuracy via prototype labels: {accuracy:.3f}\n{table.to_string()}")
    assert accuracy >= 0.6
    assert {0, 1} <= {recipes.y[p] for p in table["prototype"]}  # pasta and chili prototypes


def test_the_partially_collapsed_kernel_fits_the_enumerated_posterior():
    """``fit_bcm(kernel="partially_collapsed")`` on a ladder of 4 rungs: the kept draws follow the enumerated
    posterior (negative control: the same draws against a wrong prior's enumeration). The result names its
    kernel, keeps the collapsed log joint in the trace and picks its best draw by it, and ``extend`` runs
    the same kernel."""
    result = fit_bcm(X_TINY, N_CLUSTERS, priors=OTHER_PRIORS, kernel="partially_collapsed", n_temperatures=4,
                     num_chains=8, num_samples=2000, num_warmup=64, store_z=True, seed=3, progress_bar=False)
    draws = {name: result.idata.posterior_sites[name].values for name in ("omega", "prototype", "z")}
    exact = gof_of_draws(draws, *exact_probabilities(OTHER_PRIORS))
    assert exact.passed(alpha=1e-3), exact
    wrong = gof_of_draws(draws, *exact_probabilities(bcm.Priors(alpha=1.0, lam=0.5, c=5.0, q=0.6)))
    assert not wrong.passed(alpha=1e-3), wrong
    collapsed = result.run.summaries["collapsed_log_joint"]
    assert (result.best_chain, result.best_draw) == np.unravel_index(np.argmax(collapsed), collapsed.shape)
    np.testing.assert_array_equal(result.idata.posterior["log_joint"].values, collapsed)
    np.testing.assert_array_equal(result.idata.posterior["explicit_log_joint"].values, result.run.summaries["log_joint"])
    assert result.diagnostics.loc["log_joint"].tolist() == list(result.run.diagnostics["collapsed_log_joint"])
    assert result.to_dict()["kernel"] == "partially_collapsed"
    assert repr(result).endswith("kernel: partially_collapsed>")
    assert result.extend(num_samples=8)._kernel().step is bcm_pcgibbs.step


@pytest.mark.parametrize("kernel, make_target", [("collapsed", bcm_gibbs.make_target),
                                                  ("partially_collapsed", bcm_pcgibbs.make_target)])
def test_each_chain_can_start_from_its_own_labels(kernel, make_target):
    """``init`` with one row per chain: every token of observation i in chain c starts in cluster
    ``starts[c, i]`` (chains from several starts share one compiled sampler)."""
    starts = np.stack([np.arange(12) % 3, np.zeros(12, int)])
    target = make_target(X_SMALL, 3)
    states = _initial_states(target, starts, 2, 0, kernel)
    np.testing.assert_array_equal(states.z, np.broadcast_to(starts[:, :, None], (2, 12, 5)))
    np.testing.assert_array_equal(np.asarray(states.row_counts).argmax(-1), starts)
    result = fit_bcm(X_SMALL, 3, seed=0, init=starts, num_warmup=0, num_samples=4, num_chains=2, n_temperatures=2,
                     kernel=kernel)
    assert result.idata.posterior_sites["omega"].shape == (2, 4, 3, 5)


def test_scalar_n_values_means_every_feature():
    result = fit_bcm(X_SMALL, 3, n_values=4, **QUICK)
    np.testing.assert_array_equal(result.data.n_values, np.full(5, 4))


def compiled_memory(kernel, static, data, n_rungs):
    """XLA's memory analysis of a compiled scan of ``n_rungs`` replicas, and of the ladder's initialisation."""
    from interpretable_zoo.inference import tempering

    ladder = jax.eval_shape(lambda d: tempering.initial_ladder(kernel, static, d, tempering.chain_keys(0, 1), n_rungs),
                            data)
    schedule = jax.numpy.linspace(0.0, 1.0, n_rungs)
    scan = jax.jit(lambda d, l: tempering.ladder_scans(kernel, static, d, l, schedule, 1, 8)).lower(data, ladder)
    init = jax.jit(lambda d: tempering.initial_ladder(kernel, static, d, tempering.chain_keys(0, 1), n_rungs))
    return scan.compile().memory_analysis(), init.lower(data).compile().memory_analysis()


def xla_bytes_per_replica(scan, n_replicas: int) -> float:
    """A compiled scan's arguments, outputs and temporaries per replica."""
    return (scan.temp_size_in_bytes + scan.argument_size_in_bytes + scan.output_size_in_bytes) / n_replicas


@pytest.mark.parametrize("n_obs, n_features, n_clusters, n_values, in_turn",
                         [(60, 6, 2, 2, True), (30, 12, 16, 3, False)])
def test_the_run_estimate_per_replica_covers_what_xla_allocates_for_one(n_obs, n_features, n_clusters, n_values,
                                                                        in_turn):
    """XLA's memory analysis of a compiled scan of 64 replicas (its arguments, outputs and temporaries, per
    replica) stays within the run estimate's bytes per replica (convergence.STATE_COPIES states and the
    step's scratch), and the initialisation's temporaries do not grow with the replicas (they are made one
    after the other). Negative control: the estimate without the step's temporaries (the states and the
    gathers alone) falls short of XLA's figure."""
    from interpretable_zoo.inference import convergence
    from interpretable_zoo.inference.bcm import _kernel

    x = np.random.default_rng(0).integers(0, n_values, (n_obs, n_features))
    static, data = bcm_gibbs.make_target(x, n_clusters, bcm.Priors(), np.full(n_features, n_values),
                                         split_merge_in_turn=in_turn)
    (scan, init), (_, small_init) = (compiled_memory(_kernel(False), static, data, n_rungs) for n_rungs in (64, 8))
    xla_per_replica = xla_bytes_per_replica(scan, 64)
    state = bcm_gibbs.state_bytes(static)
    assert state == convergence._nbytes(jax.eval_shape(lambda d: bcm_gibbs.init(static, d, jax.random.PRNGKey(0)),
                                                       data))
    assert convergence.STATE_COPIES * state + bcm_gibbs.scratch(static)[0] >= xla_per_replica
    assert init.temp_size_in_bytes <= small_init.temp_size_in_bytes + 8 * state
    gathers = bcm_gibbs._step_gather_bytes(n_features, n_values, n_clusters, static.split_merge_clusters)
    assert convergence.STATE_COPIES * state + gathers < xla_per_replica


@pytest.mark.parametrize("n_obs, n_features, n_clusters, n_values", [(60, 6, 2, 2), (200, 64, 10, 7)])
def test_the_partially_collapsed_run_estimate_covers_what_xla_allocates(n_obs, n_features, n_clusters, n_values):
    """The same for ``kernel="partially_collapsed"`` (``bcm_pcgibbs.scratch``). Negative control: the states
    with half the step's temporaries fall short of XLA's figure."""
    from interpretable_zoo.inference import convergence
    from interpretable_zoo.inference.bcm import _kernel

    x = np.random.default_rng(0).integers(0, n_values, (n_obs, n_features))
    static, data = bcm_pcgibbs.make_target(x, n_clusters, bcm.Priors(), np.full(n_features, n_values))
    scan, _ = compiled_memory(_kernel(False, "partially_collapsed"), static, data, 64)
    xla_per_replica = xla_bytes_per_replica(scan, 64)
    state = bcm_pcgibbs.state_bytes(static)
    assert state == convergence._nbytes(jax.eval_shape(lambda d: bcm_pcgibbs.init(static, d, jax.random.PRNGKey(0)),
                                                       data))
    assert convergence.STATE_COPIES * state + bcm_pcgibbs.scratch(static)[0] >= xla_per_replica
    assert (convergence.STATE_COPIES + bcm_pcgibbs.STEP_TEMPORARY_STATES / 2) * state < xla_per_replica
