"""Fitting the Bayesian Case Model: ``fit_bcm``, its result (ArviZ trace, explanations, mixture weights)
and the scikit-learn ``BCMClusterer``.

Clusters are labelled arbitrarily in each chain (label switching), so label-bound quantities
(explanations, mixture weights) come from one chain: the one holding the draw with the highest log
joint. Label-free summaries (log joint, sorted cluster sizes, number of subspace features) are in the
trace for R-hat and ESS over all chains.
"""

from __future__ import annotations

import zlib
from dataclasses import replace
from functools import cached_property, partial
from typing import TYPE_CHECKING

import jax
import jax.numpy as jnp
import numpy as np
import pandas as pd
from jax.scipy.special import logsumexp
from sklearn.base import BaseEstimator, ClassNamePrefixFeaturesOutMixin, ClusterMixin, TransformerMixin
from sklearn.utils.validation import check_is_fitted

from interpretable_zoo import compiled_hooks
from interpretable_zoo.datasets.preprocessing import CategoricalData, encode_categorical, encode_like
from interpretable_zoo.diagnostics.inference_data import log_likelihood_fits, summary, tempered_inference_data
from interpretable_zoo.inference import bcm_gibbs, bcm_pcgibbs, convergence, hyperpriors, memory, target_check, tempering
from interpretable_zoo.inference.checkpoint import as_checkpoint
from interpretable_zoo.inference.explanation import ExplainedResultMixin, mcmc_facts, mcmc_status, plain, records
from interpretable_zoo.inference.estimators import ExplainedEstimatorMixin, atomic_fit
from interpretable_zoo.inference.names import resolve_names
from interpretable_zoo.inference.shapes import size_bucket
from interpretable_zoo.inference.tempering import TargetKernel
from interpretable_zoo.inference.validation import (
    check_categorical_table,
    check_category_memory,
    check_estimator_input,
    check_flag,
    check_n_clusters,
    check_positive_int,
    check_sampling_options,
    check_seed,
)
from interpretable_zoo.models import bcm

if TYPE_CHECKING:
    import arviz as az

SUMMARY_VARS = ("log_joint", "sorted_cluster_size", "n_subspace_features")
EXPLICIT_SUMMARY_NAMES = {"collapsed_log_joint": "log_joint", "log_joint": "explicit_log_joint"}
"""The partially collapsed kernel's summaries as ``BCMResult`` names them: ``log_joint`` is log p(omega, p, z, x)
with phi and pi integrated out under both kernels, and that kernel's sampled state's log joint, phi
included, is ``explicit_log_joint``."""
SCANS_PER_CHUNK = 16
"""Tempering scans per compiled call (each a sweep of every replica and a swap round)."""
MAX_DRAWS = 500
"""Draws kept per chain (a draw holds the (N, S) row counts)."""
FOLD_IN_SWEEPS = 200
"""Gibbs sweeps of ``fold_in_mixture_weights`` per call; the second half is averaged."""
NUM_PARTICLES = 512
"""Particles of ``left_to_right_log_likelihood`` by default: on the recipes (56 x 147, S = 4) a row's log estimate
varies by about 0.03 between seeds (at most 0.15), the mean over the rows by 0.005."""
PREDICTIVE_ELEMENTS = 2**24
"""Token-value logits per batch of draws in ``BCMResult.add_posterior_predictive`` (draws x N x P x V)."""
ROW_BUCKETS_PER_DOUBLING = 8
"""``fit_bcm`` pads the observations with inert rows to ``shapes.size_bucket(N, 8)`` (``bcm_gibbs.make_target``'s
``padded_rows``; the target over the observations is unchanged), and the fold-in of new rows pads them
likewise, so that fits and predictions of nearby sizes (cross-validation folds, scikit-learn's estimator
checks) share their compiled programs, several seconds each. A sweep's cost grows with the rows, so 8 buckets
per doubling bound the padding's cost at 1/8 more rows while sizes a few rows apart mostly share a bucket
(measured on the 2-core CPU: a sweep of 700 x 256 codes padded to 768 rows took 9 % longer, to 704 no longer)."""
MIN_FOLD_IN_ROWS = 64
"""New rows folded in (``BCMResult.transform``) are padded to at least this many, so that all small
predictions share one program (a row's fold-in costs a fraction of a millisecond)."""
KERNELS = ("collapsed", "partially_collapsed")
"""``fit_bcm``'s samplers: the collapsed Gibbs kernel (``inference.bcm_gibbs``: phi and pi integrated out,
eqs. (1) and (2), the observation re-split and cluster split-merge moves) and the partially collapsed one
(``inference.bcm_pcgibbs``: phi explicit, every observation's tokens at once). Both are exact for the same
posterior; they temper it along different paths. The collapsed kernel is the default: its chains cross
between modes, where the partially collapsed kernel's stay in the modes they settle in, though within a
mode the latter has the higher ESS per second; and it alone samples hyperpriors
(docs/decisions/bcm-sampler.md)."""
ROW_RECORDS = ("row_counts", "log_likelihood", "z")
"""The records with an observation axis (after chain and draw), sliced to the observations on the host."""


def _with_n_values(data: CategoricalData, n_values, from_frame: bool) -> CategoricalData:
    """``data`` with the given numbers of values per feature (integer codes only), checked against the codes."""
    if n_values is None:
        return data
    if from_frame:
        raise ValueError("n_values: only for integer codes; a DataFrame's columns bring their own categories")
    n_values = np.asarray(n_values)
    if n_values.ndim == 0:  # one number for every feature
        n_values = np.full(data.n_values.shape, n_values)
    if n_values.shape != data.n_values.shape or not np.issubdtype(n_values.dtype, np.integer):
        raise ValueError(f"n_values: expected one integer, or {len(data.n_values)}, one per feature, got {n_values!r}")
    if np.any(n_values < np.maximum(data.codes.max(0) + 1, 2)):
        raise ValueError("n_values: every feature needs at least 2 values and more than its largest code")
    value_names = tuple(tuple(str(v) for v in range(n)) for n in n_values)
    return replace(data, n_values=n_values.astype(np.int64), value_names=value_names)


@partial(jax.jit, static_argnames="num_sweeps")
def fold_in_mixture_weights(keys, token_log_likelihood, alpha_s, num_sweeps: int = FOLD_IN_SWEEPS):
    """Posterior-mean pi of new observations given fixed cluster distributions phi (the fold-in of LDA).

    ``token_log_likelihood`` (M, P, S): log phi_s,j(x_mj); ``keys`` (M,): one PRNG key per observation, so
    that an observation's weights depend on neither the other observations nor their order. Blocked Gibbs
    over pi_m ~ Dirichlet(alpha/S + n_m) (drawn in log space, so alpha/S far below 1 stays accurate) and
    the tokens z_mj | pi_m, independent given pi_m with p(z_mj = s) proportional to pi_ms phi_s,j(x_mj);
    tokens start from their cluster posteriors under a uniform pi. Returns the average of E[pi_m | z_m] =
    (alpha/S + n_ms) / (alpha + P) over the second half of the sweeps, (M, S).
    """
    n_features, n_clusters = token_log_likelihood.shape[1:]

    def observation(key, log_likelihood):  # (P, S)
        def counts(z):
            return jax.nn.one_hot(z, n_clusters, dtype=log_likelihood.dtype).sum(0)

        def step(z, key):
            key_pi, key_z = jax.random.split(key)
            log_gamma = jax.random.loggamma(key_pi, alpha_s + counts(z))
            z = jax.random.categorical(key_z, log_gamma - logsumexp(log_gamma) + log_likelihood)
            return z, (alpha_s + counts(z)) / (jnp.sum(alpha_s) + n_features)

        key_init, key_sweeps = jax.random.split(key)
        z = jax.random.categorical(key_init, log_likelihood)
        _, weights = jax.lax.scan(step, z, jax.random.split(key_sweeps, num_sweeps))
        return weights[num_sweeps // 2 :].mean(0)

    return jax.vmap(observation)(keys, token_log_likelihood)


@partial(jax.jit, static_argnames="num_particles")
def left_to_right_log_likelihood(keys, token_log_likelihood, alpha_s, num_particles: int = NUM_PARTICLES):
    """log of an unbiased estimate of p(x_m) = E_pi[prod_j sum_s pi_s phi_s,j(x_mj)], pi ~ Dirichlet(alpha_s),
    for each observation, (M,): LDA's held-out document likelihood, by the left-to-right sequential estimator
    of Wallach, Murray, Salakhutdinov & Mimno (2009, "Evaluation methods for topic models") in its unbiased
    particle-filter form.

    ``token_log_likelihood`` (M, P, S): log phi_s,j(x_mj); ``keys`` (M,): one PRNG key per observation.
    Derivation: with pi integrated out the tokens' clusters follow the Polya urn
    p(z_n = s | z_<n) = (a_s + c_s) / (A + n - 1), c_s the earlier tokens in s and A = sum_s a_s, so
    p(x) = prod_n p(x_n | x_<n), and given a particle's z_<n, p(x_n | z_<n) = p_n = sum_s w_s with
    w_s = phi_s(x_n) (a_s + c_s) / (A + n - 1). R particles start empty; at token n the estimate takes the
    factor (1/R) sum_r p_n^r, then R new particles are drawn among the pairs (particle r, z_n = s) in
    proportion to w_rs: particle r in proportion to p_n^r (resampling) and z_n from its conditional
    w_rs / p_n^r (the fully adapted filter). The product prod_n (1/R sum_r p_n^r) is then the particle
    filter's estimate of a normalising constant, unbiased whenever each pair is drawn R w_rs / sum w times in
    expectation (Pitt, Silva, Giordani & Kohn 2012): here by stratified sampling over the pairs ordered
    cluster first, so that the number of particles taking each z_n stays within 2 of its expectation. (Multiplying the per-token averages
    of particles that are not resampled would bias it.) The log of the estimate is biased low, by about half
    its relative variance, which falls as 1/R.
    """
    n_features, n_clusters = token_log_likelihood.shape[1:]
    alpha_total = jnp.sum(alpha_s)

    def observation(key, log_likelihood):  # (P, S)
        def token(counts, inputs):  # counts (R, S): each particle's c(<n)
            n, key, log_phi = inputs
            log_joint = log_phi + jnp.log(alpha_s + counts)  # (R, S)
            log_predictive = logsumexp(log_joint, -1) - jnp.log(alpha_total + n)  # (R,): log p_n^r
            strata = (jnp.arange(num_particles) + jax.random.uniform(key, (num_particles,))) / num_particles
            cumulative = jnp.cumsum(jax.nn.softmax(log_joint.T.ravel()))  # cluster-major pairs (z_n, particle)
            pairs = jnp.minimum(jnp.searchsorted(cumulative, strata), n_clusters * num_particles - 1)
            z, ancestors = jnp.divmod(pairs, num_particles)
            counts = counts[ancestors] + jax.nn.one_hot(z, n_clusters, dtype=counts.dtype)
            return counts, logsumexp(log_predictive) - jnp.log(num_particles)

        counts = jnp.zeros((num_particles, n_clusters), log_likelihood.dtype)
        inputs = (jnp.arange(n_features), jax.random.split(key, n_features), log_likelihood)
        return jax.lax.scan(token, counts, inputs)[1].sum()

    return jax.vmap(observation)(keys, token_log_likelihood)


def observation_keys(seed: int, codes: np.ndarray):
    """One PRNG key per row of ``codes`` (M, P), drawn from ``seed`` and the row's values (CRC-32), so that
    equal rows get equal keys wherever they stand."""
    rows = np.ascontiguousarray(codes, dtype=np.int64)
    digests = np.array([zlib.crc32(row.tobytes()) for row in rows], dtype=np.uint32)
    return jax.vmap(jax.random.fold_in, in_axes=(None, 0))(jax.random.PRNGKey(seed), jnp.asarray(digests))


def corrupt_half_labels(labels, n_clusters: int, seed: int = 0) -> np.ndarray:
    """The paper's initialisation for the digits (sec. 4.1, "one half of the labels were incorrect and
    randomly mixed"): a random half of the labels replaced by a different, uniformly chosen cluster; the
    other half kept. Used as ``init`` of :func:`~interpretable_zoo.inference.bcm.fit_bcm`, every token of an observation starts in its
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


class BCMResult(ExplainedResultMixin, convergence.TemperedResult):
    """A fitted BCM: ``idata`` (``posterior``: the label-free summaries ``log_joint`` (log p(omega, p, z, x),
    phi and pi integrated out), ``sorted_cluster_size`` and ``n_subspace_features``, with
    ``kernel="partially_collapsed"`` ``explicit_log_joint`` (its sampled state's, phi included), and any
    sampled hyperparameter, so that ``az.summary(idata)`` means something; ``posterior_sites``: ``omega`` (chain, draw, S, P), ``prototype`` (chain, draw, S) and, with
    ``store_z=True``, ``z`` (chain, draw, N, P), whose cluster labels switch; ``sample_stats`` with the
    swap acceptance; ``log_likelihood``; ``observed_data`` ``x``, the category codes; the tempering facts in
    ``idata.posterior.attrs``), ``explain()``, ``transform()``, ``score_samples(X)`` (log predictive
    density), ``add_posterior_predictive()`` (replicated data, with ``store_z=True``),
    ``unsupervised_accuracy(y)``, ``converged``, ``diagnostics``, ``log_evidence`` and :meth:`~interpretable_zoo.inference.convergence.TemperedResult.extend`.
    ``idata`` is built on first use (the other methods read the run's draws). The sampler runs on the
    observations padded with inert rows (``ROW_BUCKETS_PER_DOUBLING``): ``run``'s records are kept
    sliced to the observations, and the chains' last states (``_final``) are sliced where read."""

    def __init__(self, run, target, data: CategoricalData, n_clusters: int, priors: bcm.Priors, store_z: bool,
                 kernel: str):
        n_obs = data.codes.shape[0]
        self.run = replace(run, records={name: values[:, :, :n_obs] if name in ROW_RECORDS else values
                                         for name, values in run.records.items()})
        self.target = target  # (static, data) of the kernel, for extend()
        self.data = data
        self.n_clusters = n_clusters
        self.priors = priors
        self.store_z = store_z
        self.kernel = kernel
        self._row_counts = self.run.records["row_counts"]  # (chain, draw, N, S)
        self._final = tempering.posterior_states(run.ladder)  # each chain's last state
        log_joint = run.summaries[self._engine_name("log_joint")]
        self.best_chain, self.best_draw = np.unravel_index(np.argmax(log_joint), log_joint.shape)
        self._labels = _alignment(self._row_counts, self._row_counts[self.best_chain, self.best_draw])

    def _kernel(self) -> TargetKernel:
        return hyperpriors.kernel_for(self.target[0], _kernel(self.store_z, self.kernel))

    def _with_run(self, run) -> BCMResult:
        return BCMResult(run, self.target, self.data, self.n_clusters, self.priors, self.store_z, self.kernel)

    def _posterior_name(self, name: str) -> str:
        if name.startswith("cluster_size_"):
            return f"sorted_cluster_size[{name.removeprefix('cluster_size_')}]"
        return EXPLICIT_SUMMARY_NAMES.get(name, name) if self.kernel == "partially_collapsed" else name

    def _engine_name(self, name: str) -> str:
        """The run's summary that ``idata.posterior`` holds as ``name`` (the inverse of ``_posterior_name``)."""
        renamed = {posterior: engine for engine, posterior in EXPLICIT_SUMMARY_NAMES.items()}
        return renamed.get(name, name) if self.kernel == "partially_collapsed" else name

    def _summary_var_names(self) -> tuple[str, ...]:
        explicit = ("explicit_log_joint",) if self.kernel == "partially_collapsed" else ()
        return SUMMARY_VARS + explicit + hyperpriors.sampled_hyperparameters(bcm.Priors, self.run.summaries)

    @cached_property
    def idata(self) -> az.InferenceData:
        return _inference_data(self.run, self.data, self._summary_var_names(), self._engine_name)

    def _draw(self, name):
        return self.run.records[name][self.best_chain, self.best_draw]

    def _aligned(self, draws):
        """(chain, draw, S, ...) per-cluster draws relabelled to the best draw's clusters."""
        return np.take_along_axis(draws, self._labels.reshape(self._labels.shape + (1,) * (draws.ndim - 3)), axis=2)

    def subspace_probabilities(self) -> np.ndarray:
        """(S, P): the posterior probability that feature j is in cluster s's subspace (omega_sj = 1), over
        every draw of every chain, clusters matched to the best draw's by shared tokens."""
        return self._aligned(self.run.records["omega"]).mean((0, 1))

    def explain_frame(self, hide_value: str | None = None) -> pd.DataFrame:
        """Per cluster of the highest-log-joint draw, largest first: its share of tokens, the prototype (index
        and name) and its subspace with the prototype's values (as in the paper's fig. 4b). The subspace
        lists the features in the cluster's subspace in at least half of the draws of every chain (the
        median-probability model), the draws' clusters matched to the best draw's by shared tokens.

        Columns: ``share``, ``prototype``, ``prototype_name``, ``n_subspace`` (subspace size), ``subspace``
        (``feature=value`` of the prototype, comma separated), and as lists ``subspace_features``,
        ``subspace_values`` and ``subspace_weights`` (posterior probability that omega_sj = 1).
        ``hide_value`` leaves out of the listing the subspace features where the prototype has that value
        (e.g. "0" for ingredient lists, to show the defining ingredients present); ``n_subspace`` counts all.
        """
        prototype = self._draw("prototype")
        inclusion = self.subspace_probabilities()
        sizes = self._row_counts[self.best_chain, self.best_draw].sum(0)
        rows = []
        for s in np.argsort(-sizes, kind="stable"):
            values = self.data.codes[prototype[s]]
            features = np.flatnonzero(inclusion[s] >= 0.5)
            shown = [j for j in features if self.data.value_names[j][values[j]] != hide_value]
            names = [self.data.feature_names[j] for j in shown]
            value_names = [self.data.value_names[j][values[j]] for j in shown]
            rows.append(
                {
                    "cluster": int(s),
                    "share": sizes[s] / sizes.sum(),
                    "prototype": int(prototype[s]),
                    "prototype_name": self.data.sample_names[prototype[s]],
                    "n_subspace": int(features.size),
                    "subspace": ", ".join(f"{n}={v}" for n, v in zip(names, value_names)),
                    "subspace_features": names,
                    "subspace_values": value_names,
                    "subspace_weights": [float(inclusion[s, j]) for j in shown],
                }
            )
        return pd.DataFrame(rows).set_index("cluster")

    def explain(self, hide_value: str | None = None) -> str:
        """:meth:`explain_frame` as text: per cluster its share, prototype and subspace (``feature=value``
        with the posterior probability of the feature being in the subspace)."""
        lines = [f"BCM: {self.n_clusters} clusters, each a prototype and its subspace (highest-log-joint draw)"]
        for s, row in self.explain_frame(hide_value).iterrows():
            listed = ", ".join(f"{f}={v} ({w:.2f})" for f, v, w in
                               zip(row["subspace_features"], row["subspace_values"], row["subspace_weights"]))
            hidden = row["n_subspace"] - len(row["subspace_features"])
            lines.append(f"cluster {s} ({row['share']:.0%} of tokens): prototype {row['prototype']} "
                         f"({row['prototype_name']}); subspace of {row['n_subspace']}: {listed or '-'}"
                         + (f" (+{hidden} with value {hide_value})" if hidden else ""))
        return "\n".join(lines)

    def to_dict(self, hide_value: str | None = None) -> dict:
        """:meth:`explain_frame`'s clusters (``clusters``) with the fit's facts, JSON-ready."""
        return {
            "model": "BCM",
            "n_clusters": self.n_clusters,
            "kernel": self.kernel,
            "features": plain(self.data.feature_names),
            **mcmc_facts(self),
            "clusters": records(self.explain_frame(hide_value)),
        }

    def _card(self):
        frame = self.explain_frame().drop(columns=["subspace_features", "subspace_values", "subspace_weights"])
        facts = {"observations": self.data.codes.shape[0], "features": self.data.codes.shape[1],
                 "clusters": self.n_clusters, "kernel": self.kernel}
        return "Bayesian Case Model", facts, frame, mcmc_status(self)

    def transform(self, X=None, seed: int = 0) -> np.ndarray:
        """Posterior-mean mixture weights pi (the features the paper feeds to an SVM), in the clusters of the
        highest-log-joint draw.

        ``X=None``: the training observations, E[pi_i | z] = (a_s + n_is) / (sum_s a_s + P) averaged over
        every draw of every chain, each draw's clusters matched to the best draw's by shared tokens (N, S).
        ``X`` given (any observations with the fitted features and values, see :func:`~interpretable_zoo.datasets.preprocessing.encode_like`): each
        row folded in, (M, S): phi fixed at its posterior mean given the best chain's last state,
        phi_sj(v) = (g_sj(v) + n_{s,.,j,v}) / (sum_v g_sj(v) + n_{s,.,j,.}) with that state's prototypes
        and omega in g, and pi_m from ``fold_in_mixture_weights`` (``seed`` and each row's values draw its
        key, so a row's weights do not depend on the other rows or their order), that state's clusters
        matched to the best draw's by shared tokens (tempering swaps and split-merge moves may relabel them
        between the two).
        """
        if X is None:
            counts = np.swapaxes(self._aligned(np.swapaxes(self._row_counts, -1, -2)), -1, -2)  # (C, D, N, S)
            if "alpha" in hyperpriors.hyperpriors_of(self.priors):  # (C, D, S): each draw's alpha
                alpha_s = _pi_concentrations(self.priors, self.run.summaries["alpha"], self.n_clusters)[..., None, :]
            else:
                alpha_s = np.asarray(self.target[1].pi_concentration)  # (S,), from the model file
            return ((alpha_s + counts) / (alpha_s.sum(-1, keepdims=True) + self.data.codes.shape[1])).mean((0, 1))
        codes = encode_like(X, self.data)
        padded = _in_row_bucket(codes)  # rows added for the shared program, their weights dropped
        token_log_likelihood, alpha_s = self._final_token_log_likelihood(padded)
        weights = fold_in_mixture_weights(observation_keys(seed, padded), token_log_likelihood, alpha_s)
        final_counts = self._final.row_counts[self.best_chain][None, None, : self.data.codes.shape[0]]
        order = _alignment(final_counts, self._row_counts[self.best_chain, self.best_draw])[0, 0]
        return np.asarray(weights)[: len(codes), order]

    def _final_token_log_likelihood(self, codes):
        """(M, P, S) float32 log phi_s,j(x_mj) of the rows ``codes`` (M, P), phi the posterior mean given the
        best chain's last state (:meth:`transform`), and pi's concentration alpha_s (S,) at that state."""
        omega, prototype = self._final.omega[self.best_chain], self._final.prototype[self.best_chain]
        n_features, mask = len(self.data.n_values), bcm.value_mask(self.data.n_values)
        cells = self._final.cell_counts[self.best_chain].T.reshape(self.n_clusters, n_features, -1)
        priors = self._priors_of_final_state()
        alpha_s = np.asarray(bcm.z_concentration(priors, self.n_clusters))
        concentration = bcm.concentration_table(self.data.codes[prototype], omega, self.data.n_values, priors)
        phi = np.where(mask, concentration + cells, 0.0)
        log_phi = np.log(np.where(mask, phi, 1.0)) - np.log(phi.sum(-1, keepdims=True))  # (S, P, V)
        return jnp.asarray(log_phi.transpose(1, 2, 0)[np.arange(n_features), codes], jnp.float32), alpha_s

    def score_samples(self, X, seed: int = 0, num_particles: int = NUM_PARTICLES) -> np.ndarray:
        """(M,) log predictive density log p(x_m) of each row of ``X`` (encoded as in :meth:`transform`), as
        scikit-learn's ``GaussianMixture.score_samples``: p(x) = E_pi[prod_j sum_s pi_s phi_s,j(x_j)] with
        pi ~ Dirichlet(alpha / S) (eq. (1)'s prior) and phi the posterior mean given the best chain's last
        state, as :meth:`transform` folds rows in. The expectation over pi is estimated by
        ``left_to_right_log_likelihood`` with ``num_particles`` particles, unbiased for p(x_m); ``seed``
        and each row's values draw its key, so a row's score does not depend on the other rows."""
        seed = check_seed(seed)
        num_particles = check_positive_int(num_particles, "num_particles")
        codes = encode_like(X, self.data)
        padded = _in_row_bucket(codes)  # rows added for the shared program, their scores dropped
        token_log_likelihood, alpha_s = self._final_token_log_likelihood(padded)
        scores = left_to_right_log_likelihood(observation_keys(seed, padded), token_log_likelihood, alpha_s, num_particles)
        return np.asarray(scores, np.float64)[: len(codes)]

    def _priors_of_final_state(self) -> bcm.Priors:
        """The priors with each hyperparameter sampled within the chain at its value in the best chain's last
        state."""
        sampled = hyperpriors.hyperpriors_of(self.priors)
        return replace(self.priors, **{name: float(self._final.values[name][self.best_chain])
                                      for name in sampled}) if sampled else self.priors

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
        prototype_label = y[self.run.records["prototype"]]  # (C, D, S)
        if per == "observation":
            predicted = np.take_along_axis(prototype_label, self.dominant_cluster(), axis=-1)
            return (predicted == y).mean(-1)
        if per == "token":
            agrees = prototype_label[:, :, None, :] == y[:, None]  # (C, D, N, S)
            return (self._row_counts * agrees).sum((-2, -1)) / self._row_counts.sum((-2, -1))
        raise ValueError(f"per: expected 'observation' or 'token', got {per!r}")

    def add_posterior_predictive(self, seed: int = 0):
        """``idata`` with a ``posterior_predictive`` group (replaced on a second call), returned: ``x`` (chain,
        draw, observation, feature), replicated category codes, for ``az.plot_ppc``. For each draw's z,
        omega, prototypes (and sampled hyperparameters): pi_i ~ Dirichlet(alpha / S + n_i) with n_i the
        observation's tokens per cluster (eq. (1)'s prior updated), z_rep_ij ~ Categorical(pi_i),
        phi_sj ~ Dirichlet(g_sj + n_{s,.,j,.}) with g of sec. 3 at the draw's prototype and omega and the
        cell counts of z and x (eq. (2)'s ratio), then x_rep_ij ~ Categorical(phi_{z_rep_ij, j}). Needs the
        draws' z (``fit_bcm(..., store_z=True)``); ``seed`` fixes the draws."""
        import arviz as az
        import xarray as xr

        seed = check_seed(seed)
        if not self.store_z:
            raise ValueError("store_z: the posterior predictive needs every draw's token assignments z; "
                             "fit with fit_bcm(..., store_z=True)")
        records = self.run.records
        shape = records["z"].shape[:2]
        n_draws = int(np.prod(shape))
        n_obs, n_features = self.data.codes.shape
        batch = max(1, min(n_draws, PREDICTIVE_ELEMENTS // (n_obs * n_features * int(self.data.n_values.max()))))
        padded = -(-n_draws // batch) * batch

        def per_draw(values):  # (chain, draw, ...) -> (padded, ...), the last draw repeated
            values = np.asarray(values).reshape(n_draws, *np.shape(values)[2:])
            return np.pad(values, [(0, padded - n_draws)] + [(0, 0)] * (values.ndim - 1), mode="edge")

        sampled = hyperpriors.hyperpriors_of(self.priors)
        values = {name: self.run.summaries[name] if name in sampled else np.full(shape, value)
                  for name, value in compiled_hooks.prior_values(self.priors).items()}  # fmt: skip
        keys = np.asarray(jax.random.split(jax.random.PRNGKey(seed), n_draws)).reshape(*shape, -1)
        draws = (per_draw(keys), per_draw(records["z"]),
                 per_draw(records["row_counts"]), per_draw(records["omega"]), per_draw(records["prototype"]),
                 {name: per_draw(value).astype(np.float32) for name, value in values.items()})  # fmt: skip
        codes, n_values = jnp.asarray(self.data.codes, jnp.int32), tuple(int(v) for v in self.data.n_values)
        replicated = np.concatenate([
            np.asarray(_replicated_codes(codes, n_values, *jax.tree.map(lambda a: a[start : start + batch], draws)))
            for start in range(0, padded, batch)
        ])[:n_draws]  # fmt: skip
        idata = self.idata
        predictive = xr.Dataset({"x": (["chain", "draw", "observation", "feature"], replicated.reshape(*shape, n_obs, -1))},
                                coords={"chain": idata.posterior.chain, "draw": idata.posterior.draw,
                                        "observation": idata.observed_data.observation,
                                        "feature": idata.observed_data.feature})  # fmt: skip
        idata.extend(az.InferenceData(posterior_predictive=predictive), join="right")
        return idata

    def summary(self):
        """ArviZ summary (R-hat, ESS) of the label-free quantities."""
        return summary(self.idata)


def _pi_concentrations(priors: bcm.Priors, alphas, n_clusters: int) -> np.ndarray:
    """(..., S): pi's concentration (``models.bcm.z_concentration``) at each of the alpha draws (...)."""
    values = compiled_hooks.prior_values(priors)

    def at(alpha):
        return jnp.asarray(bcm.z_concentration(compiled_hooks.priors_with(bcm.Priors, {**values, "alpha": alpha}),
                                               n_clusters))

    alphas = np.asarray(alphas)
    return np.asarray(jax.jit(jax.vmap(at))(alphas.ravel())).reshape(alphas.shape + (n_clusters,))


@partial(jax.jit, static_argnames="n_values")
def _replicated_codes(codes, n_values: tuple, keys, z, row_counts, omega, prototype, values):
    """(B, N, P) replicated codes of a batch of B draws (:meth:`BCMResult.add_posterior_predictive`);
    ``values``: each prior field's value per draw, (B,) each."""
    mask = bcm.value_mask(n_values)
    n_obs, n_features = codes.shape
    features = jnp.arange(n_features)

    def draw(key, z, row_counts, omega, prototype, values):
        priors = compiled_hooks.priors_with(bcm.Priors, values)
        key_phi, key_pi, key_z, key_x = jax.random.split(key, 4)
        concentration = bcm.concentration_table(codes[prototype], omega, n_values, priors)  # (S, P, V)
        cells = jnp.zeros(concentration.shape).at[z, features, codes].add(1.0)
        log_phi = jnp.where(mask, jax.random.loggamma(key_phi, jnp.where(mask, concentration + cells, 1.0)), -jnp.inf)
        log_pi = jax.random.loggamma(key_pi, bcm.z_concentration(priors, omega.shape[0]) + row_counts)  # (N, S)
        z_rep = jax.random.categorical(key_z, log_pi[:, None, :], shape=(n_obs, n_features))
        return jax.random.categorical(key_x, log_phi[z_rep, features])

    return jax.vmap(draw)(keys, z, row_counts, omega, prototype, values)


def _in_row_bucket(rows: np.ndarray) -> np.ndarray:
    """``rows`` (M, ...) with zero rows appended up to ``shapes.size_bucket(M, ROW_BUCKETS_PER_DOUBLING)``, at
    least :data:`MIN_FOLD_IN_ROWS`."""
    n_rows = len(rows)
    padded = size_bucket(max(n_rows, MIN_FOLD_IN_ROWS), ROW_BUCKETS_PER_DOUBLING)
    return np.pad(rows, ((0, padded - n_rows),) + ((0, 0),) * (rows.ndim - 1))


def _alignment(row_counts, reference) -> np.ndarray:
    """(chain, draw, S): for each draw, the draw's cluster that matches each cluster of ``reference`` (N, S),
    the assignment maximising the tokens they share row by row (Hungarian algorithm). Tempering swaps
    and split-merge moves relabel clusters within a chain, so per-cluster averages need it."""
    from scipy.optimize import linear_sum_assignment

    shared = np.einsum("cdns,nt->cdts", row_counts.astype(np.float64), reference.astype(np.float64))
    labels = np.empty(shared.shape[:3], np.int64)
    for index in np.ndindex(*shared.shape[:2]):
        _, labels[index] = linear_sum_assignment(shared[index], maximize=True)
    return labels


def _record_without_z(static, data, states):
    """What a kept draw stores: omega, the prototypes, the row counts (for mixture weights) and the pointwise
    log likelihood (N float32 values, :func:`~interpretable_zoo.inference.bcm_gibbs.pointwise_log_likelihood`)."""
    return {"omega": states.omega, "prototype": states.prototype, "row_counts": states.row_counts,
            "log_likelihood": bcm_gibbs.pointwise_log_likelihood(static, data, states)}


def _record_with_z(static, data, states):
    return {**_record_without_z(static, data, states), "z": states.z}


def _kernel(store_z: bool, kernel: str = "collapsed") -> TargetKernel:
    """The ``kernel`` of :data:`KERNELS` as the tempering engine runs it, keeping z in the draws or not."""
    record = _record_with_z if store_z else _record_without_z
    if kernel == "partially_collapsed":
        return TargetKernel(bcm_pcgibbs.init, bcm_pcgibbs.step, bcm_pcgibbs.summaries, record,
                            scratch=bcm_pcgibbs.scratch)
    return TargetKernel(bcm_gibbs.init, bcm_gibbs.step, bcm_gibbs.summaries, record, bcm_gibbs.learn_split_merge_rungs,
                        bcm_gibbs.with_split_merge_rungs, scratch=bcm_gibbs.scratch)


def _inference_data(run, data: CategoricalData, summary_var_names, engine_name) -> az.InferenceData:
    """The trace; ``engine_name`` maps a posterior variable to the run's summary (``BCMResult._engine_name``)."""
    records, summaries = run.records, run.summaries
    n_clusters = records["prototype"].shape[-1]
    sizes = np.stack([summaries[f"cluster_size_{s}"] for s in range(n_clusters)], axis=-1)
    posterior = {name: sizes if name == "sorted_cluster_size" else summaries[engine_name(name)]
                 for name in summary_var_names}
    sites = {name: records[name] for name in ("omega", "prototype", "z") if name in records}
    pointwise = {"x": records["log_likelihood"]} if log_likelihood_fits(*records["log_likelihood"].shape, "BCM") else None
    return tempered_inference_data(
        run,
        posterior,
        sites=sites,
        summary_var_names=summary_var_names,
        coords={"feature": list(data.feature_names), "observation": list(data.sample_names)},
        dims={"omega": ["cluster", "feature"], "prototype": ["cluster"], "z": ["observation", "feature"],
              "sorted_cluster_size": ["rank"]},
        log_likelihood=pointwise,
        observed_data={"x": (data.codes, ["observation", "feature"])},
    )


def _initial_states(target, init_labels: np.ndarray, num_chains: int, seed: int, kernel: str):
    """One start per chain of ``kernel`` with every token of observation i in cluster ``init_labels[i]``
    (the same labels for every chain, or one row per chain; padding rows in cluster 0, which counts none of
    their tokens) and omega and the prototypes drawn from their prior (the partially collapsed kernel's phi
    from its conditional given them and z, ``bcm_pcgibbs.state_with_z``)."""
    static, data = target
    labels = np.broadcast_to(init_labels, (num_chains, init_labels.shape[-1])).astype(np.int32)
    labels = np.pad(labels, ((0, 0), (0, static.n_obs - labels.shape[-1])))
    return _labelled_starts(static, data, jax.random.split(jax.random.PRNGKey(seed), num_chains), labels, kernel)


@partial(jax.jit, static_argnums=(0, 4))
def _labelled_starts(static, data, keys, labels, kernel):
    def start(key, chain_labels):
        z = jnp.broadcast_to(chain_labels[:, None], (static.n_obs, static.n_features))
        if kernel == "partially_collapsed":
            return bcm_pcgibbs.state_with_z(static, data, key, z)
        drawn = bcm_gibbs.init(static, data, key)
        return bcm_gibbs.state_from_params(static, data, drawn.omega, drawn.prototype, z)

    return jax.vmap(start)(keys, labels)


@memory.honours_limit
def fit_bcm(
    X,
    n_clusters: int,
    *,
    priors: bcm.Priors | None = None,
    num_samples: int | None = None,
    num_warmup: int | None = None,
    num_chains: int = 4,
    seed: int = 0,
    n_temperatures="auto",
    target_rhat: float = 1.01,
    min_ess: float = 400.0,
    max_seconds: float | None = 300.0,
    store_z: bool = False,
    init="random",
    n_values=None,
    feature_names=None,
    progress_bar: bool | None = None,
    devices=None,
    checkpoint=None,
    memory_limit: int | None = None,
    kernel: str = "collapsed",
) -> BCMResult:
    """Fit BCM to a categorical matrix (integer codes, or a DataFrame whose values are mapped to codes)
    with an exact Gibbs sampler (``kernel`` below) under non-reversible parallel tempering
    (``inference.convergence``).

    By default the chains run until the log joint, sorted cluster sizes and number of subspace features
    reach R-hat <= ``target_rhat`` and bulk ESS >= ``min_ess``, or ``max_seconds`` pass (then
    ``result.converged`` is False and a warning gives the numbers); ``num_samples`` runs exactly that many
    scans after ``num_warmup`` tuning scans (None: until a round after the first keeps the number of rungs,
    at most four rounds) instead.
    ``n_temperatures``: rungs per chain ("auto", or 1 for the untempered sampler). ``store_z``: keep every
    draw's token assignments (N x P per draw). ``init``: "random" (each replica drawn from the prior), or an
    (N,) array of initial clusters, one per observation (see :func:`corrupt_half_labels` for the paper's
    digits scheme), or a (num_chains, N) array, one start per chain. ``n_values``: for integer codes, the
    number of values V_j of each feature (P,) or one number for all, e.g. 7 for every pixel of 7-bin digits;
    by default 1 + the largest code seen (at least 2), and then a code as large as the number of
    observations is refused as a coding mistake (more categories than observations). ``feature_names``: one
    name per column, for the explanations and the trace's ``feature`` coordinate (default: a DataFrame's
    columns, else ``x0, x1, ...``). ``progress_bar``: None shows it outside CI.
    ``devices``: the chains split over several devices (None: as many as divide ``num_chains``; an
    integer or a list of devices; :func:`~interpretable_zoo.inference.tempering.chain_mesh`); the draws do not depend on it.
    ``checkpoint``: a file path or ``inference.checkpoint.Checkpoint(path, every_seconds)``: the run saves its
    state there (every 60 s by default) and a call with the same arguments resumes from it after an
    interruption, giving the draws of an uninterrupted run (``inference.checkpoint``).
    ``memory_limit``: the bytes the fit's memory estimate may reach (None: the memory available); settings
    whose estimate exceeds it are refused before any work, naming them.
    ``kernel``: the sampler (``bcm.KERNELS``): "collapsed", the default (eqs. (1), (2), observation
    re-split and cluster split-merge moves, phi and pi integrated out), or "partially_collapsed"
    (``inference.bcm_pcgibbs``: phi explicit and drawn from its conditional, every observation's tokens
    at once given phi, the re-split move given phi; no split-merge move; hyperpriors refused). Both are
    exact for the same posterior and give the same kind of result (``result.kernel`` names the one run).

    DataFrame columns of numbers (floating point, or integers with more than
    ``validation.NUMERIC_COLUMN_LEVELS`` distinct values) are refused: bin them, or mark them categorical.
    The kernel's tables are padded to the largest number of categories V and grow with P V^2 (N + 1);
    a fit whose estimated tables exceed the available memory is refused before anything is allocated.

    Example:
        >>> import numpy as np
        >>> X = np.repeat([[0, 0, 0, 0], [1, 1, 1, 1], [2, 2, 0, 1]], 10, axis=0)  # 3 groups of 10 observations
        >>> result = iz.fit_bcm(X, 3, num_samples=50, num_warmup=20, num_chains=2, n_temperatures=1, progress_bar=False)
        >>> print(result.explain().splitlines()[0])
        BCM: 3 clusters, each a prototype and its subspace (highest-log-joint draw)
        >>> sorted(result.explain_frame()["subspace"])  # per cluster: its prototype's values on its subspace
        ['x0=0, x1=0, x2=0, x3=0', 'x0=1, x1=1, x2=1, x3=1', 'x0=2, x1=2, x2=0, x3=1']
        >>> result.idata.posterior_sites["omega"].shape  # (chain, draw, cluster, feature)
        (2, 50, 3, 4)
        >>> import arviz as az
        >>> list(az.summary(result.idata).index)  # the label-free summaries
        ['log_joint', 'sorted_cluster_size[0]', 'sorted_cluster_size[1]', 'sorted_cluster_size[2]', 'n_subspace_features']
        >>> result.converged  # far too few draws; leave num_samples=None to run until converged
        False
    """
    if hasattr(X, "__len__") and len(X) == 1:
        raise ValueError("X: one sample (n_samples=1); BCM clusters at least 2 observations")
    check_categorical_table(X, counts_from_codes=n_values is None)
    data = _with_n_values(encode_categorical(X), n_values, isinstance(X, pd.DataFrame))
    if feature_names is not None:
        data = replace(data, feature_names=resolve_names(feature_names, data.codes.shape[1], argument="feature_names"))
    n_obs = data.codes.shape[0]
    n_clusters = check_n_clusters(n_clusters, n_obs)
    store_z = check_flag(store_z, "store_z")
    if not isinstance(kernel, str) or kernel not in KERNELS:
        raise ValueError(f"kernel: expected one of {', '.join(map(repr, KERNELS))}, got {kernel!r}")
    if priors is not None and not isinstance(priors, bcm.Priors):
        raise ValueError(f"priors: expected interpretable_zoo.models.bcm.Priors, got {type(priors).__name__}")
    priors = priors or bcm.Priors()
    target_settings = convergence.ConvergenceTarget(target_rhat, min_ess, max_seconds)
    check_sampling_options(num_samples, num_warmup, num_chains, seed)
    as_checkpoint(checkpoint)
    convergence.check_temperatures(n_temperatures)
    num_chains = check_positive_int(num_chains, "num_chains")
    platform = tempering.chain_devices(num_chains, devices)[0].platform  # a bad ``devices`` is named before any work
    if isinstance(init, str):
        if init != "random":
            raise ValueError(f"init: expected 'random' or an array of initial clusters, got {init!r}")
        init_labels = None
    else:
        init_labels = np.asarray(init)
        shapes = [(n_obs,), (num_chains, n_obs)]
        if init_labels.shape not in shapes or not np.issubdtype(init_labels.dtype, np.integer):
            raise ValueError(f"init: expected 'random' or integer clusters of shape {shapes}, got {init_labels.shape}")
        if init_labels.min() < 0 or init_labels.max() >= n_clusters:
            raise ValueError(f"init: initial clusters must lie in 0..{n_clusters - 1}")
    # the tables and one replica's step, which the categories size; the sampler's estimate counts the replicas
    sampled = hyperpriors.hyperpriors_of(priors)  # hyperparameters sampled within the chain; hooks checked first
    if kernel == "partially_collapsed":
        hyperpriors.refuse_hyperpriors(priors, "fit_bcm(kernel='partially_collapsed')",
                                       "kernel='collapsed' samples q, alpha, lam and c within the chain")
    padded_rows = size_bucket(n_obs, ROW_BUCKETS_PER_DOUBLING)
    needed = bcm_gibbs.memory_bytes(padded_rows, data.n_values, n_clusters, n_replicas=1,
                                    tables_per_replica=bool({"lam", "c"} & sampled.keys()))
    check_category_memory(data.n_values, data.feature_names, needed)
    if kernel == "partially_collapsed":
        inner_target = bcm_pcgibbs.make_target(data.codes, n_clusters, priors, data.n_values, padded_rows=padded_rows)
    else:
        inner_target = bcm_gibbs.make_target(data.codes, n_clusters, hyperpriors.at_point(priors), data.n_values,
                                             padded_rows=padded_rows, **bcm_gibbs.fit_options(n_temperatures != 1, platform))
    target = hyperpriors.target(hyperpriors.BCM, inner_target, priors) if sampled else inner_target
    target_check.check_bcm(n_clusters, priors)
    initial = None if init_labels is None else _initial_states(inner_target, init_labels, num_chains, seed, kernel)
    if sampled and initial is not None:
        initial = hyperpriors.initial_states(target, initial, jax.random.PRNGKey(seed))
    run = convergence.sample(
        hyperpriors.kernel_for(target[0], _kernel(store_z, kernel)),
        *target,
        num_chains=num_chains,
        seed=seed,
        n_temperatures=n_temperatures,
        num_samples=num_samples,
        tuning_rounds=convergence.tuning_rounds_for(num_warmup, SCANS_PER_CHUNK),
        scans_per_chunk=SCANS_PER_CHUNK,
        max_draws=num_samples or MAX_DRAWS,
        target=target_settings,
        progress_bar=progress_bar,
        devices=devices,
        description="BCM",
        checkpoint=checkpoint,
        initial_states=initial,
    )
    return BCMResult(run, target, data, n_clusters, priors, store_z, kernel)


class BCMClusterer(ExplainedEstimatorMixin, ClusterMixin, ClassNamePrefixFeaturesOutMixin, TransformerMixin,
                   BaseEstimator):
    """scikit-learn wrapper of :func:`~interpretable_zoo.inference.bcm.fit_bcm`: ``labels_`` is each observation's dominant cluster in the
    best draw's chain (argmax of the posterior-mean pi), ``transform`` the posterior-mean pi (columns
    ``bcmclusterer0, ...`` for ``set_output``), ``predict`` the dominant cluster of new observations (of their
    folded-in pi), ``score_samples`` each observation's log predictive density and ``score`` their mean (as
    ``GaussianMixture``'s, higher is better; :meth:`~interpretable_zoo.inference.bcm.BCMResult.score_samples`),
    ``result_`` the :class:`~interpretable_zoo.inference.bcm.BCMResult`; ``print(clusterer)`` shows the
    prototypes and subspaces. Input: categorical codes (non-negative integers) or a DataFrame of categories.

    Example:
        >>> import numpy as np
        >>> X = np.repeat([[0, 0, 0, 0], [1, 1, 1, 1], [2, 2, 0, 1]], 10, axis=0)  # 3 groups of 10 observations
        >>> clusterer = iz.BCMClusterer(3, num_samples=50, num_warmup=20, num_chains=2, n_temperatures=1,
        ...                             progress_bar=False).fit(X)
        >>> [len(set(clusterer.labels_[i:i + 10])) for i in (0, 10, 20)]  # each group whole in one cluster
        [1, 1, 1]
        >>> print(clusterer)  # each cluster's prototype and subspace
        BCM: 3 clusters, each a prototype and its subspace (highest-log-joint draw)
        cluster ... (...% of tokens): prototype ...; subspace of 4: ...
        cluster ... (...% of tokens): prototype ...; subspace of 4: ...
        cluster ... (...% of tokens): prototype ...; subspace of 4: ...
    """

    def __init__(
        self,
        n_clusters=3,
        *,
        priors=None,
        num_samples=None,
        num_warmup=None,
        num_chains=4,
        seed=0,
        n_temperatures="auto",
        target_rhat=1.01,
        min_ess=400.0,
        max_seconds=300.0,
        progress_bar=None,
        devices=None,
        checkpoint=None,
        kernel="collapsed",
    ):
        self.n_clusters = n_clusters
        self.priors = priors
        self.num_samples = num_samples
        self.num_warmup = num_warmup
        self.num_chains = num_chains
        self.seed = seed
        self.n_temperatures = n_temperatures
        self.target_rhat = target_rhat
        self.min_ess = min_ess
        self.max_seconds = max_seconds
        self.progress_bar = progress_bar
        self.devices = devices
        self.checkpoint = checkpoint
        self.kernel = kernel

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.input_tags.categorical = True
        tags.input_tags.positive_only = True  # codes 0..V-1
        return tags

    @atomic_fit
    def fit(self, X, y=None):
        X = check_estimator_input(self, X, reset=True, tables=True)
        self.result_ = fit_bcm(
            X,
            self.n_clusters,
            priors=self.priors,
            num_samples=self.num_samples,
            num_warmup=self.num_warmup,
            num_chains=self.num_chains,
            seed=self.seed,
            n_temperatures=self.n_temperatures,
            target_rhat=self.target_rhat,
            min_ess=self.min_ess,
            max_seconds=self.max_seconds,
            progress_bar=self.progress_bar,
            devices=self.devices,
            checkpoint=self.checkpoint,
            kernel=self.kernel,
        )
        self.labels_ = self.result_.transform().argmax(1)
        self._n_features_out = self.n_clusters
        return self

    def predict(self, X):
        """The dominant cluster of each observation of ``X``: the argmax of its folded-in posterior-mean pi
        (:meth:`transform`)."""
        return self.transform(X).argmax(1)

    def transform(self, X):
        """Posterior-mean mixture weights pi of the observations ``X`` (folded in, see :meth:`BCMResult.transform`)."""
        check_is_fitted(self)
        X = check_estimator_input(self, X, reset=False, tables=True)
        return self.result_.transform(X, seed=self.seed)

    def score_samples(self, X):
        """Log predictive density of each observation of ``X``, (M,)
        (:meth:`~interpretable_zoo.inference.bcm.BCMResult.score_samples`)."""
        check_is_fitted(self)
        X = check_estimator_input(self, X, reset=False, tables=True)
        return self.result_.score_samples(X, seed=self.seed)

    def score(self, X, y=None):
        """Mean log predictive density of the observations ``X`` (higher is better), as scikit-learn's
        ``GaussianMixture.score``; ``y`` is ignored."""
        return float(self.score_samples(X).mean())

    def explain(self) -> str:
        check_is_fitted(self)
        return self.result_.explain()
