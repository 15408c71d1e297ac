"""Fitting the Bayesian Case Model: ``fit_bcm``, its result (ArviZ trace, explanations, mixture weights),
the scikit-learn ``BCMClusterer`` and the ``izoo`` hooks.

Clusters are labelled arbitrarily in each chain (label switching), so label-bound quantities
(explanations, mixture weights) come from one chain: the one holding the draw with the highest log
joint. Label-free summaries (log joint, sorted cluster sizes, number of subspace features) are in the
trace for R-hat and ESS over all chains.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from functools import partial

import arviz as az
import jax
import jax.numpy as jnp
import numpy as np
import pandas as pd
from jax.scipy.special import logsumexp
from sklearn.base import BaseEstimator, ClusterMixin, TransformerMixin

from interpretable_zoo.diagnostics import summary, to_inference_data
from interpretable_zoo.inference.bcm_gibbs import BCMGibbs
from interpretable_zoo.inference.mcmc import check_positive_int, default_chain_method, run_mcmc
from interpretable_zoo.models import bcm

SUMMARY_VARS = ("log_joint", "sorted_cluster_size", "n_subspace_features")
FOLD_IN_SWEEPS = 200
"""Gibbs sweeps of :func:`fold_in_mixture_weights` per call; the second half is averaged."""


@dataclass(frozen=True)
class CategoricalData:
    """A categorical matrix as integer codes, with the names that explain them."""

    codes: np.ndarray  # (N, P) int32
    n_values: np.ndarray  # (P,)
    feature_names: tuple[str, ...]
    value_names: tuple[tuple[str, ...], ...]  # value_names[j][v] names code v of feature j
    sample_names: tuple[str, ...]


def encode_categorical(X, name: str = "X") -> CategoricalData:
    """Integer codes of a DataFrame (each column's values, in category or sorted order) or of an array of
    non-negative integer codes; ValueError naming ``name`` on empty, NaN, negative or non-integer input."""
    if isinstance(X, pd.DataFrame):
        if X.shape[0] == 0 or X.shape[1] == 0:
            raise ValueError(f"{name}: empty, shape {X.shape}")
        if X.isna().any().any():
            raise ValueError(f"{name}: contains missing values (NaN) in columns {list(X.columns[X.isna().any()])}")
        codes, value_names = [], []
        for column in X.columns:
            categorical = X[column] if isinstance(X[column].dtype, pd.CategoricalDtype) else X[column].astype("category")
            codes.append(categorical.cat.codes.to_numpy())
            value_names.append(tuple(str(level) for level in categorical.cat.categories))
        codes = np.column_stack(codes).astype(np.int32)
        n_values = np.array([len(levels) for levels in value_names])
        return CategoricalData(codes, n_values, tuple(map(str, X.columns)), tuple(value_names), tuple(map(str, X.index)))
    array = np.asarray(X)
    if array.ndim != 2:
        raise ValueError(f"{name}: expected a 2-D matrix (observations x features), got shape {array.shape}")
    if array.size == 0:
        raise ValueError(f"{name}: empty, shape {array.shape}")
    if array.dtype == bool:
        array = array.astype(np.int32)
    if not np.issubdtype(array.dtype, np.number):
        raise ValueError(f"{name}: expected integer codes or a DataFrame, got dtype {array.dtype}")
    if np.issubdtype(array.dtype, np.floating):
        if np.isnan(array).any():
            raise ValueError(f"{name}: contains NaN")
        if not np.all(np.isfinite(array)) or np.any(array != np.round(array)):
            raise ValueError(f"{name}: expected integer category codes, found non-integer values")
    if array.min() < 0:
        raise ValueError(f"{name}: category codes must be non-negative, found {array.min()}")
    codes = array.astype(np.int32)
    n_values = np.maximum(codes.max(0) + 1, 2)
    value_names = tuple(tuple(str(v) for v in range(n)) for n in n_values)
    return CategoricalData(
        codes, n_values, tuple(f"x{j}" for j in range(codes.shape[1])), value_names, tuple(str(i) for i in range(len(codes)))
    )


def _check_n_clusters(n_clusters, n_obs: int) -> int:
    n_clusters = check_positive_int(n_clusters, "n_clusters")
    if n_clusters > n_obs:
        raise ValueError(f"n_clusters: {n_clusters} clusters for only {n_obs} observations")
    return n_clusters


def _with_n_values(data: CategoricalData, n_values, from_frame: bool) -> CategoricalData:
    """``data`` with the given numbers of values per feature (integer codes only), checked against the codes."""
    if n_values is None:
        return data
    if from_frame:
        raise ValueError("n_values: only for integer codes; a DataFrame's columns bring their own categories")
    n_values = np.asarray(n_values)
    if n_values.shape != data.n_values.shape or not np.issubdtype(n_values.dtype, np.integer):
        raise ValueError(f"n_values: expected {len(data.n_values)} integers, one per feature, got {n_values!r}")
    if np.any(n_values < np.maximum(data.codes.max(0) + 1, 2)):
        raise ValueError("n_values: every feature needs at least 2 values and more than its largest code")
    value_names = tuple(tuple(str(v) for v in range(n)) for n in n_values)
    return replace(data, n_values=n_values.astype(np.int64), value_names=value_names)


def encode_like(X, data: CategoricalData) -> np.ndarray:
    """Codes (M, P) of new observations in the coding of the fitted ``data``: a DataFrame's values are
    looked up among the fitted value names of its columns, an array's codes must lie in the fitted ranges.
    ValueError naming ``X`` on a wrong number of features, unknown values or codes out of range."""
    n_features = len(data.feature_names)
    if isinstance(X, pd.DataFrame):
        if list(map(str, X.columns)) != list(data.feature_names):
            raise ValueError(f"X: expected the fitted columns {list(data.feature_names)[:5]}..., got {list(X.columns)[:5]}")
        if X.shape[0] == 0 or X.isna().any().any():
            raise ValueError("X: empty or contains missing values")
        codes = np.empty(X.shape, np.int32)
        for j, column in enumerate(X.columns):
            lookup = {name: code for code, name in enumerate(data.value_names[j])}
            values = X[column].astype(str)
            unknown = sorted(set(values) - lookup.keys())
            if unknown:
                raise ValueError(f"X: column {column!r} has values not seen when fitting: {unknown[:5]}")
            codes[:, j] = values.map(lookup).to_numpy()
        return codes
    codes = encode_categorical(X, "X").codes
    if codes.shape[1] != n_features:
        raise ValueError(f"X: expected {n_features} features as when fitting, got {codes.shape[1]}")
    out_of_range = np.flatnonzero((codes >= data.n_values).any(0))
    if out_of_range.size:
        raise ValueError(f"X: codes beyond the fitted ranges in features {out_of_range[:5].tolist()}")
    return codes


@partial(jax.jit, static_argnames="num_sweeps")
def fold_in_mixture_weights(key, token_log_likelihood, alpha_s, num_sweeps: int = FOLD_IN_SWEEPS):
    """Posterior-mean pi of new observations given fixed cluster distributions phi (the fold-in of LDA).

    ``token_log_likelihood`` (M, P, S): log phi_s,j(x_mj). Blocked Gibbs over pi_m ~ Dirichlet(alpha/S +
    n_m) (drawn in log space, so alpha/S far below 1 stays accurate) and the tokens z_mj | pi_m,
    independent given pi_m with p(z_mj = s) proportional to pi_ms phi_s,j(x_mj); tokens start from their
    cluster posteriors under a uniform pi. Returns the average of E[pi_m | z_m] = (alpha/S + n_ms) /
    (alpha + P) over the second half of the sweeps, (M, S).
    """
    n_features, n_clusters = token_log_likelihood.shape[1:]

    def counts(z):
        return jax.nn.one_hot(z, n_clusters, dtype=token_log_likelihood.dtype).sum(1)

    def step(z, key):
        key_pi, key_z = jax.random.split(key)
        log_gamma = jax.random.loggamma(key_pi, alpha_s + counts(z))
        log_pi = log_gamma - logsumexp(log_gamma, -1, keepdims=True)
        z = jax.random.categorical(key_z, log_pi[:, None, :] + token_log_likelihood)
        return z, (alpha_s + counts(z)) / (n_clusters * alpha_s + n_features)

    key_init, key_sweeps = jax.random.split(key)
    z = jax.random.categorical(key_init, token_log_likelihood)
    _, weights = jax.lax.scan(step, z, jax.random.split(key_sweeps, num_sweeps))
    return weights[num_sweeps // 2 :].mean(0)


def corrupt_half_labels(labels, n_clusters: int, seed: int = 0) -> np.ndarray:
    """The paper's initialisation for the digits (sec. 4.1, "one half of the labels were incorrect and
    randomly mixed"): a random half of the labels replaced by a different, uniformly chosen cluster; the
    other half kept. Used as ``init`` of :func:`fit_bcm`, every token of an observation starts in its
    label's cluster. (The paper does not say whether the wrong half is wrong per observation or per
    token; the authors' public code has a disabled variant that redraws every token of every other
    observation uniformly.)"""
    labels = np.asarray(labels, np.int64)
    if labels.ndim != 1 or labels.min(initial=0) < 0 or labels.max(initial=0) >= n_clusters:
        raise ValueError(f"labels: expected a 1-D array of codes in 0..{n_clusters - 1}")
    rng = np.random.default_rng(seed)
    wrong = rng.permutation(len(labels))[: len(labels) // 2]
    shifted = labels.copy()
    shifted[wrong] = (labels[wrong] + rng.integers(1, n_clusters, len(wrong))) % n_clusters
    return shifted


class BCMResult:
    """A fitted BCM: ``idata`` (posterior ``omega`` (chain, draw, S, P), ``prototype`` (chain, draw, S),
    ``z`` (chain, draw, N, P) unless ``store_z=False``, and the label-free summaries), ``explain()``,
    ``transform()`` and ``unsupervised_accuracy(y)``."""

    def __init__(
        self,
        mcmc,
        data: CategoricalData,
        n_clusters: int,
        priors: bcm.Priors,
        idata: az.InferenceData,
        row_counts,
        final_cell_counts,
    ):
        self.mcmc = mcmc
        self.data = data
        self.n_clusters = n_clusters
        self.priors = priors
        self.idata = idata
        self._row_counts = row_counts  # (chain, draw, N, S)
        self._final_cell_counts = final_cell_counts  # (chain, P * V, S), the counts of each chain's last draw
        log_joint = idata.posterior["log_joint"].values
        self.best_chain, self.best_draw = np.unravel_index(np.argmax(log_joint), log_joint.shape)

    def _draw(self, name):
        return self.idata.posterior[name].values[self.best_chain, self.best_draw]

    def explain(self, hide_value: str | None = None) -> pd.DataFrame:
        """Per cluster of the highest-log-joint draw: its share of tokens, the prototype (index and name)
        and the subspace features with the prototype's values (as in the paper's fig. 4b).

        ``hide_value`` leaves out of the listing the subspace features where the prototype has that value
        (e.g. "0" for ingredient lists, to show the defining ingredients present); ``n_subspace`` counts all.
        """
        omega, prototype = self._draw("omega"), self._draw("prototype")
        sizes = self._row_counts[self.best_chain, self.best_draw].sum(0)
        rows = []
        for s in np.argsort(-sizes):
            values = self.data.codes[prototype[s]]
            subspace = [
                f"{self.data.feature_names[j]}={self.data.value_names[j][values[j]]}"
                for j in np.flatnonzero(omega[s])
                if self.data.value_names[j][values[j]] != hide_value
            ]
            rows.append(
                {
                    "cluster": int(s),
                    "share": sizes[s] / sizes.sum(),
                    "prototype": int(prototype[s]),
                    "prototype_name": self.data.sample_names[prototype[s]],
                    "n_subspace": int(omega[s].sum()),
                    "subspace": ", ".join(subspace),
                }
            )
        return pd.DataFrame(rows).set_index("cluster")

    def transform(self, X=None, seed: int = 0) -> np.ndarray:
        """Posterior-mean mixture weights pi (the features the paper feeds to an SVM), in the labels of the
        best chain (the one holding the highest-log-joint draw).

        ``X=None``: the training observations, E[pi_i | z] = (alpha/S + n_is) / (alpha + P) averaged over
        the best chain's draws, (N, S). ``X`` given (any observations with the fitted features and values,
        see :func:`encode_like`): each row folded in, (M, S): phi fixed at its posterior mean given the
        best chain's last draw, phi_sj(v) = (g_sj(v) + n_{s,.,j,v}) / (sum_v g_sj(v) + n_{s,.,j,.}) with
        that draw's prototypes and omega in g, and pi_m from :func:`fold_in_mixture_weights` (``seed``).
        """
        alpha_s = bcm.z_concentration(self.priors, self.n_clusters)
        if X is None:
            counts = self._row_counts[self.best_chain]
            return ((alpha_s + counts) / (self.priors.alpha + self.data.codes.shape[1])).mean(0)
        codes = encode_like(X, self.data)
        posterior = self.idata.posterior
        omega = posterior["omega"].values[self.best_chain, -1]
        prototype = posterior["prototype"].values[self.best_chain, -1]
        n_features, mask = len(self.data.n_values), bcm.value_mask(self.data.n_values)
        cells = self._final_cell_counts[self.best_chain].T.reshape(self.n_clusters, n_features, -1)
        concentration = bcm.concentration_table(self.data.codes[prototype], omega, self.data.n_values, self.priors)
        phi = np.where(mask, concentration + cells, 0.0)
        log_phi = np.log(np.where(mask, phi, 1.0)) - np.log(phi.sum(-1, keepdims=True))  # (S, P, V)
        token_log_likelihood = log_phi.transpose(1, 2, 0)[np.arange(n_features), codes]  # (M, P, S)
        weights = fold_in_mixture_weights(jax.random.PRNGKey(seed), jnp.asarray(token_log_likelihood, jnp.float32), alpha_s)
        return np.asarray(weights)

    def dominant_cluster(self) -> np.ndarray:
        """(chain, draw, N): the cluster holding most of each observation's tokens."""
        return self._row_counts.argmax(-1)

    def unsupervised_accuracy(self, y, per: str = "observation") -> np.ndarray:
        """(chain, draw) accuracy of labelling by prototypes (paper fig. 2b): ``per="observation"`` labels
        each observation by the label of its dominant cluster's prototype (the paper's text);
        ``per="token"`` labels each token by its cluster's prototype and counts the tokens carrying their
        observation's label (the measure of the authors' public code)."""
        y = np.asarray(y)
        if y.shape != (self.data.codes.shape[0],):
            raise ValueError(f"y: expected shape ({self.data.codes.shape[0]},), got {y.shape}")
        prototype_label = y[self.idata.posterior["prototype"].values]  # (C, D, S)
        if per == "observation":
            predicted = np.take_along_axis(prototype_label, self.dominant_cluster(), axis=-1)
            return (predicted == y).mean(-1)
        if per == "token":
            agrees = prototype_label[:, :, None, :] == y[:, None]  # (C, D, N, S)
            return (self._row_counts * agrees).sum((-2, -1)) / self._row_counts.sum((-2, -1))
        raise ValueError(f"per: expected 'observation' or 'token', got {per!r}")

    def summary(self):
        """ArviZ summary (R-hat, ESS) of the label-free quantities."""
        return summary(self.idata)


def fit_bcm(
    X,
    n_clusters: int,
    *,
    priors: bcm.Priors | None = None,
    num_warmup: int = 200,
    num_samples: int = 500,
    num_chains: int = 4,
    seed: int = 0,
    store_z: bool = True,
    init="random",
    n_values=None,
    chain_method: str | None = None,
    progress_bar: bool = False,
) -> BCMResult:
    """Fit BCM to a categorical matrix (integer codes, or a DataFrame whose values are mapped to codes)
    with the exact collapsed Gibbs sampler.

    ``init``: "random" (uniform cluster indices), or an (N,) array of initial clusters, one per
    observation (see :func:`corrupt_half_labels` for the paper's digits scheme), or a (num_chains, N)
    array, one start per chain (vectorized chains only), e.g. to compare starts in one compiled run.
    ``n_values``: for integer codes, the number of values V_j of each feature (P,), e.g. 7 for every pixel
    of 7-bin digits; by default 1 + the largest code seen (at least 2).
    """
    data = _with_n_values(encode_categorical(X), n_values, isinstance(X, pd.DataFrame))
    n_obs = data.codes.shape[0]
    n_clusters = _check_n_clusters(n_clusters, n_obs)
    if priors is not None and not isinstance(priors, bcm.Priors):
        raise ValueError(f"priors: expected interpretable_zoo.models.bcm.Priors, got {type(priors).__name__}")
    priors = priors or bcm.Priors()
    if isinstance(init, str):
        if init != "random":
            raise ValueError(f"init: expected 'random' or an array of initial clusters, got {init!r}")
        init_labels = None
    else:
        init_labels = np.asarray(init)
        shapes = [(n_obs,), (num_chains, n_obs)]
        if init_labels.shape not in shapes or not np.issubdtype(init_labels.dtype, np.integer):
            raise ValueError(f"init: expected 'random' or integer clusters of shape {shapes}, got {init_labels.shape}")
        if init_labels.ndim == 2 and (chain_method or default_chain_method(num_chains)) != "vectorized":
            raise ValueError("init: one start per chain needs chain_method='vectorized'")
        if init_labels.min() < 0 or init_labels.max() >= n_clusters:
            raise ValueError(f"init: initial clusters must lie in 0..{n_clusters - 1}")
    extra = ("potential_energy", "row_counts", "sorted_cluster_size")
    mcmc = run_mcmc(
        BCMGibbs(init_labels=init_labels),
        num_warmup=num_warmup,
        num_samples=num_samples,
        num_chains=num_chains,
        seed=seed,
        model_args=(data.codes, n_clusters),
        model_kwargs={"priors": priors, "n_values": data.n_values},
        chain_method=chain_method,
        progress_bar=progress_bar,
        extra_fields=extra + (() if store_z else ("~params.z",)),
    )
    fields = mcmc.get_extra_fields(group_by_chain=True)
    omega = np.asarray(mcmc.get_samples(group_by_chain=True)["omega"])
    derived = {
        "log_joint": -np.asarray(fields["potential_energy"]),
        "sorted_cluster_size": np.asarray(fields["sorted_cluster_size"]),
        "n_subspace_features": omega.sum((-2, -1)),
    }
    dims = {
        "omega": ["cluster", "feature"],
        "prototype": ["cluster"],
        "z": ["observation", "feature"],
        "sorted_cluster_size": ["rank"],
    }
    idata = to_inference_data(
        mcmc,
        derived=derived,
        summary_var_names=SUMMARY_VARS,
        coords={"feature": list(data.feature_names), "observation": list(data.sample_names)},
        dims=dims,
    )
    final_cell_counts = np.asarray(mcmc.last_state.cell_counts).reshape(num_chains, -1, n_clusters)
    return BCMResult(mcmc, data, n_clusters, priors, idata, np.asarray(fields["row_counts"]), final_cell_counts)


class BCMClusterer(ClusterMixin, TransformerMixin, BaseEstimator):
    """scikit-learn wrapper of :func:`fit_bcm`: ``labels_`` is each observation's dominant cluster in the
    best draw's chain (argmax of the posterior-mean pi), ``transform`` the posterior-mean pi,
    ``result_`` the :class:`BCMResult`."""

    def __init__(self, n_clusters=3, *, priors=None, num_warmup=200, num_samples=500, num_chains=4, seed=0):
        self.n_clusters = n_clusters
        self.priors = priors
        self.num_warmup = num_warmup
        self.num_samples = num_samples
        self.num_chains = num_chains
        self.seed = seed

    def fit(self, X, y=None):
        self.result_ = fit_bcm(
            X,
            self.n_clusters,
            priors=self.priors,
            num_warmup=self.num_warmup,
            num_samples=self.num_samples,
            num_chains=self.num_chains,
            seed=self.seed,
            store_z=False,
        )
        self.labels_ = self.result_.transform().argmax(1)
        return self

    def transform(self, X):
        """Posterior-mean mixture weights pi of the observations ``X`` (folded in, see :meth:`BCMResult.transform`)."""
        return self.result_.transform(X, seed=self.seed)

    def explain(self) -> pd.DataFrame:
        return self.result_.explain()


def smiley_demo() -> tuple:
    """The sec. 3.1 example: 240 smiley faces drawn from the model, fitted with three clusters.
    Returns (faces Dataset, BCMResult)."""
    from interpretable_zoo.datasets.smiley_faces import SMILEY_PRIORS, make_smiley_faces

    faces = make_smiley_faces()
    result = fit_bcm(faces.X, 3, priors=SMILEY_PRIORS, num_warmup=100, num_samples=200, num_chains=2, seed=0, store_z=False)
    return faces, result


def format_demo(faces, result) -> str:
    """The demo's printout: planted and found subspaces, and the R-hat table."""
    from interpretable_zoo.datasets.smiley_faces import SMILEY_SUBSPACES

    planted = "\n".join(f"  cluster {s}: {', '.join(features)}" for s, features in enumerate(SMILEY_SUBSPACES))
    with pd.option_context("display.width", 160, "display.max_columns", 20, "display.max_colwidth", 60):
        return (
            f"BCM on {len(faces.X)} smiley faces (3 clusters)\nplanted subspaces:\n"
            f"{planted}\nprototypes and subspaces found:\n{result.explain()}\n\n{result.summary()}"
        )


def cli_demo(data_home=None) -> str:
    """Quick run on the bundled smiley faces (sec. 3.1): planted vs found subspaces, and the R-hat table."""
    return format_demo(*smiley_demo())


def cli_fit(X, y, args) -> az.InferenceData:
    """``izoo fit bcm``: fit with the command's options and return the InferenceData."""
    result = fit_bcm(
        X,
        args.n_clusters,
        num_warmup=args.num_warmup,
        num_samples=args.num_samples,
        num_chains=args.num_chains,
        seed=args.seed,
    )
    return result.idata
