"""Bayesian Sets (Ghahramani, Heller 2005): the Beta-Bernoulli cluster model and its closed-form score.

Notation of the paper (sec. 2-3): a data set of n items, each a binary vector x = (x_1, ..., x_J); a
query D_c of N items. A cluster is a set of items drawn i.i.d. from one Bernoulli model whose
parameters are unknown::

    theta_j ~ Beta(alpha_j, beta_j)                  (eq. 8)
    x_ij | theta_j ~ Bernoulli(theta_j)              (eq. 7)

The score of an item is the ratio (eq. 1-2) of its predictive probability given the query to its
prior probability, score(x) = p(x | D_c) / p(x) = p(x, D_c) / (p(x) p(D_c)): both integrate theta out of
the program :func:`model`, which has the Beta-function marginal :func:`log_marginal` (eq. 9). The score
is log-linear in x (eq. 11-14), log score(x) = c + sum_j q_j x_j, so every item of the data set is scored
by one matrix-vector product X q (eq. 15); :func:`score_coefficients` computes c and q.

Prior (sec. 5): alpha_j = kappa m_j, beta_j = kappa (1 - m_j) with m the mean of each feature over all n
items and kappa = 2, unless per-feature alpha and beta are given (:class:`Priors`). A feature whose mean
is 0 or 1 then has an improper prior, carries no information and drops out of the score
(:func:`informative_features`). A second, optional prior answers the question the paper leaves open
(sec. 6), how many items to return (:func:`membership_log_odds`).

Editing priors: the scores follow :class:`Priors` (kappa, or explicit alpha and beta) and the hook
:func:`beta_hyperparameters`. Any other edit of :func:`model` (e.g. theta ~ Beta(alpha + 1, beta + 1), or
another family) is refused when ``BayesianSets`` is built, with ``inference.target_check.ModelMismatchError``
naming the site: the closed form integrates this one program.
"""

from __future__ import annotations

from dataclasses import dataclass
from numbers import Real

import jax.numpy as jnp
import numpy as np
import numpyro
import numpyro.distributions as dist
import scipy.sparse
from scipy.special import betaln

from interpretable_zoo.inference import hyperpriors


def _positive_vector(value, name: str) -> np.ndarray:
    """``value`` as a read-only 1-D float64 array of finite positive numbers; ValueError naming it otherwise."""
    array = np.asarray(value)
    if array.ndim != 1 or array.size == 0:
        raise ValueError(f"{name}: expected a non-empty 1-D array (one value per feature), got shape {array.shape}")
    if not (np.issubdtype(array.dtype, np.number) and not np.issubdtype(array.dtype, np.complexfloating)):
        raise ValueError(f"{name}: expected numbers, got dtype {array.dtype}")
    array = array.astype(np.float64)
    if not np.all(np.isfinite(array)) or np.any(array <= 0):
        raise ValueError(f"{name}: every entry must be finite and positive")
    array.setflags(write=False)
    return array


@dataclass(frozen=True, eq=False)
class Priors:
    """Hyperparameters of Bayesian Sets; the defaults are the paper's (sec. 5).

    kappa: scale of the empirical prior alpha_j = kappa m_j, beta_j = kappa (1 - m_j) (m_j: the mean of
        feature j over all items), entering eq. 8 and through alpha, beta eqs. 9-14. kappa = 2 in the paper.
    alpha, beta: optional explicit per-feature Beta parameters (eq. 8), both or neither; when given,
        kappa is not used.
    membership_rate: prior probability rho that a candidate item belongs to the query's cluster, used
        only to choose the size of the returned set (:func:`membership_log_odds`); None estimates it from
        the scores of the candidates by maximum marginal likelihood.
    """

    kappa: float = 2.0
    alpha: np.ndarray | None = None
    beta: np.ndarray | None = None
    membership_rate: float | None = None

    def __post_init__(self):
        hyperpriors.refuse_hyperpriors(
            self, "Bayesian Sets' closed-form score",
            "give it a number (to weigh values by evidence, compare p(D | kappa) over a grid of values)")
        kappa = self.kappa
        if isinstance(kappa, bool) or not isinstance(kappa, Real) or not np.isfinite(kappa) or kappa <= 0:
            raise ValueError(f"priors.kappa: must be a finite positive number, got {kappa!r}")
        if (self.alpha is None) != (self.beta is None):
            raise ValueError("priors.alpha and priors.beta: give both per-feature vectors or neither")
        if self.alpha is not None:
            alpha = _positive_vector(self.alpha, "priors.alpha")
            beta = _positive_vector(self.beta, "priors.beta")
            if alpha.shape != beta.shape:
                raise ValueError(f"priors.alpha and priors.beta: lengths differ ({alpha.size} and {beta.size})")
            object.__setattr__(self, "alpha", alpha)
            object.__setattr__(self, "beta", beta)
        rate = self.membership_rate
        if rate is not None and (isinstance(rate, bool) or not isinstance(rate, Real) or not 0 < rate < 1):
            raise ValueError(f"priors.membership_rate: must be None or a number strictly between 0 and 1, got {rate!r}")


def beta_hyperparameters(priors: Priors, feature_means) -> tuple[np.ndarray, np.ndarray]:
    """Per-feature (alpha, beta) of eq. 8 for data with the given feature means m.

    Explicit ``priors.alpha``/``priors.beta`` are returned as they are; otherwise alpha = kappa m and
    beta = kappa (1 - m) (sec. 5), zero on the features with m_j = 0 or 1 (:func:`informative_features`).
    """
    means = np.asarray(feature_means, dtype=np.float64)
    if priors.alpha is not None:
        if priors.alpha.size != means.size:
            raise ValueError(f"priors.alpha: has {priors.alpha.size} entries for {means.size} features")
        return priors.alpha, priors.beta
    alpha = priors.kappa * means
    beta = priors.kappa * (1.0 - means)
    if np.any((means > 0) & (means < 1) & ((alpha == 0) | (beta == 0))):
        raise ValueError(
            f"priors.kappa: {priors.kappa!r} times a feature mean underflows to 0 (an improper Beta prior); "
            "use a larger kappa"
        )
    return alpha, beta


def informative_features(alpha, beta, feature_means) -> np.ndarray:
    """(J,) bool: the features that enter the score under the Beta(alpha_j, beta_j) prior of eq. 8.

    A feature drops out only where its factor in every item's score is exactly 1, the limit of a proper
    prior: alpha_j = 0 on a feature no item has, or beta_j = 0 on one every item has. Any other zero, a
    negative or non-finite value, or a wrong shape makes eq. 8 improper for the data, a ValueError naming
    ``beta_hyperparameters``, the hook that returned them.

    Features whose mean is 0 or 1 (a feature no item has, or every item has) get alpha_j = 0 or beta_j = 0
    under the prior of sec. 5, an improper Beta whose logarithms are infinite. Every item of the data set
    has the same value on such a feature, so for those items it carries no information; letting alpha_j
    (or beta_j) tend to 0 with kappa fixed, its factor in the score of every item of the data set tends to
    exactly 1 (for m_j = 0, s_j = 0 and x_j = 0: (alpha + beta) beta~ / ((alpha + beta + N) beta) =
    kappa (kappa + N) / ((kappa + N) kappa); for m_j = 1, s_j = N and x_j = 1: the factors (alpha + beta)
    beta~ / ((alpha + beta + N) beta) = kappa / (kappa + N) of c and alpha~ beta / (alpha beta~) =
    (kappa + N) / kappa of q cancel). Such features are therefore left out of c and q: a feature is
    uninformative exactly where the hyperparameters that :func:`beta_hyperparameters` returns are
    alpha_j = 0 (and m_j = 0) or beta_j = 0 (and m_j = 1), so which features drop out follows from the
    values that hook returns, and :func:`score_coefficients` gives it c_j = q_j = 0. Every feature with
    positive alpha_j and beta_j enters the score, whatever its mean (e.g. under a smoothed prior
    alpha_j = kappa m_j + 1/2).
    """
    means = np.asarray(feature_means, dtype=np.float64)
    alpha, beta = np.asarray(alpha, dtype=np.float64), np.asarray(beta, dtype=np.float64)
    if alpha.shape != means.shape or beta.shape != means.shape:
        raise ValueError(f"beta_hyperparameters: returned alpha of shape {alpha.shape} and beta of shape "
                         f"{beta.shape}, expected one value per feature {means.shape}")  # fmt: skip
    bad = ~(np.isfinite(alpha) & np.isfinite(beta) & (alpha >= 0) & (beta >= 0))
    bad |= ((alpha == 0) & (means > 0)) | ((beta == 0) & (means < 1))
    if bad.any():
        raise ValueError(
            f"beta_hyperparameters: alpha and beta must be finite and positive, except alpha_j = 0 on a feature "
            f"no item has or beta_j = 0 on one every item has; features {np.flatnonzero(bad)[:5].tolist()} break this"
        )
    return (alpha > 0) & (beta > 0)


def model(alpha, beta, n_items: int, x=None):
    """A cluster of ``n_items`` items drawn from one Beta-Bernoulli model (eqs. 7-8).

    Sites: ``theta`` (J,) per-feature Bernoulli parameters; ``x`` (n_items, J) the binary items.
    """
    alpha, beta = jnp.asarray(alpha), jnp.asarray(beta)
    with numpyro.plate("features", alpha.shape[-1]):
        theta = numpyro.sample("theta", dist.Beta(alpha, beta))
        with numpyro.plate("items", n_items, dim=-2):
            numpyro.sample("x", dist.Bernoulli(theta), obs=x)


def log_marginal(n_ones, n_items, alpha, beta) -> np.ndarray:
    """log p(D | alpha, beta) of a set of ``n_items`` items with per-feature counts of ones ``n_ones`` (eq. 9).

    p(D) = prod_j B(alpha_j + s_j, beta_j + N - s_j) / B(alpha_j, beta_j): theta integrated out of
    :func:`model`. ``n_ones`` has shape (..., J); returns shape (...), summed over features.
    """
    n_ones = np.asarray(n_ones, dtype=np.float64)
    n_items = np.asarray(n_items, dtype=np.float64)[..., None]
    return np.sum(betaln(alpha + n_ones, beta + n_items - n_ones) - betaln(alpha, beta), axis=-1)


def _log_growth(base, increment):
    """log((base + increment) / base) for base > 0 and increment >= 0, elementwise, without cancellation
    (log1p when the increment is at most the base) or overflow (a difference of logarithms otherwise)."""
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        return np.where(increment <= base, np.log1p(increment / base), np.log(base + increment) - np.log(base))


def _log_ratio_terms(n_ones, n_items, alpha, beta):
    """Feature j's term of c (eq. 13) and its weight q_j (eq. 14), elementwise over broadcast arrays.

    With alpha~ = alpha + s and beta~ = beta + (N - s): c_j = log beta~/beta - log (alpha + beta + N)/(alpha + beta)
    and q_j = log alpha~/alpha - log beta~/beta, each ratio taken as a growth from its base (``_log_growth``),
    so that the terms stay exact for any positive alpha, beta (a tiny kappa included).
    """
    beta_growth = _log_growth(beta, n_items - n_ones)
    constant_terms = beta_growth - _log_growth(alpha + beta, n_items)
    weights = _log_growth(alpha, n_ones) - beta_growth
    return constant_terms, weights


def query_size_terms(sizes, alpha, beta, informative) -> tuple[np.ndarray, np.ndarray]:
    """Per-feature terms of c and q for a feature the query lacks (s_j = 0), for each query size N in ``sizes``.

    They depend on the query only through N (sec. 3): c_j = log(alpha_j + beta_j) - log(alpha_j + beta_j + N)
    + log(beta_j + N) - log beta_j and q_j = log beta_j - log(beta_j + N). Returns two (len(sizes), J) arrays,
    zero on uninformative features.
    """
    sizes = np.asarray(sizes, dtype=np.float64)
    with np.errstate(divide="ignore", invalid="ignore"):  # uninformative features are masked
        constant_terms, weights = _log_ratio_terms(0.0, sizes[:, None], alpha, beta)
    return np.where(informative, constant_terms, 0.0), np.where(informative, weights, 0.0)


def score_coefficients(n_ones, n_items, alpha, beta, informative, size_terms=None) -> tuple[np.ndarray, np.ndarray]:
    """The constant c and weights q of log score(x) = c + sum_j q_j x_j for a batch of queries (eqs. 10-14).

    With s_j = sum_{i in D_c} x_ij the query's count of ones on feature j and N its size::

      alpha~_j = alpha_j + s_j,  beta~_j = beta_j + N - s_j                               (posterior, eq. 10)
      log p(x | D_c) - log p(x) = sum_j [x_j log(alpha~_j / (alpha~_j + beta~_j)) + (1 - x_j) log(beta~_j /
          (alpha~_j + beta~_j)) - x_j log(alpha_j / (alpha_j + beta_j)) - (1 - x_j) log(beta_j / (alpha_j + beta_j))]
                                                       (eq. 10 with Gamma(a + 1) = a Gamma(a); eq. 11)
      c = sum_j [log(alpha_j + beta_j) - log(alpha_j + beta_j + N) + log beta~_j - log beta_j]      (eq. 13)
      q_j = log alpha~_j - log alpha_j - log beta~_j + log beta_j                                 (eq. 14)

    (alpha~_j + beta~_j = alpha_j + beta_j + N.) Uninformative features get c_j = q_j = 0
    (:func:`informative_features`).
    As the paper notes (sec. 3), the terms of the features a query lacks (s_j = 0) depend only on N
    (:func:`query_size_terms`); the logarithms of eqs. 13-14 are evaluated anew only where s_j > 0.

    ``n_ones``: (B, J) counts, a dense array or a scipy sparse matrix; ``n_items``: (B,) query sizes;
    ``size_terms``: :func:`query_size_terms` of ``np.unique(n_items)`` when already at hand.
    Returns c (B,) and q (B, J), float64.
    """
    n_items = np.asarray(n_items, dtype=np.float64)
    sizes, size_index = np.unique(n_items, return_inverse=True)
    if size_terms is None:
        size_terms = query_size_terms(sizes, alpha, beta, informative)
    base_constant, base_weights = size_terms
    c = base_constant.sum(axis=1)[size_index]
    q = base_weights[size_index]

    if scipy.sparse.issparse(n_ones):
        counts = n_ones.tocoo()
        rows, cols, values = counts.row, counts.col, counts.data.astype(np.float64)
    else:
        n_ones = np.asarray(n_ones, dtype=np.float64)
        rows, cols = np.nonzero(n_ones)
        values = n_ones[rows, cols]
    keep = (values != 0) & informative[cols]
    rows, cols, values = rows[keep], cols[keep], values[keep]
    constant_terms, weights = _log_ratio_terms(values, n_items[rows], alpha[cols], beta[cols])
    c += np.bincount(rows, weights=constant_terms - base_constant[size_index[rows], cols], minlength=len(n_items))
    q[rows, cols] = weights
    return c, q


def membership_log_odds(log_scores, membership_rate: float) -> np.ndarray:
    """Posterior log odds that an item belongs to the query's cluster: log score(x) + logit rho.

    Each candidate is in the cluster with prior probability rho (then x ~ p(x | D_c)) or else drawn from
    the background p(x) (eq. 3), so P(member | x, D_c) = rho score(x) / (rho score(x) + 1 - rho) =
    sigmoid(log score(x) + logit rho). Under this optional prior (``Priors.membership_rate``) the completed
    set holds the items whose posterior probability is at least 1/2. When rho is not given it is estimated
    by maximum marginal likelihood over the candidates (``inference.bayesian_sets.estimate_membership_rate``).
    """
    return np.asarray(log_scores, dtype=np.float64) + np.log(membership_rate) - np.log1p(-membership_rate)
