"""Bayesian Rule Lists (Letham, Rudin, McCormick, Madigan 2015; Yang, Rudin, Seltzer 2017).

A rule list d = (a_1, ..., a_m) is an ordered choice of antecedents from a pre-mined set A; the first
antecedent that holds for x decides its label distribution theta_j, else the default rule's theta_0.
This file holds the hyperparameters, the generative process (Letham's Algorithm 1) as a NumPyro
program, and the formulas the fast sampler uses, defined once here: the prior hooks
:func:`log_length_prior` (eq. 2) and :func:`log_cardinality_prior` (eq. 3), with the antecedent uniform
among the unused ones of its cardinality (eq. 4), which :func:`rule_list_prior` samples from and
:func:`prior_tables` tabulates for :func:`log_prior_from_tables`, the log prior of a list
(:func:`log_prior`) that the sampler evaluates by lookups; and :func:`log_marginal_likelihood`, the
Dirichlet-multinomial log p(y | x, d, alpha) with every theta_j integrated out, with its lookup form
(:func:`likelihood_tables`, :func:`log_marginal_likelihood_from_tables`), so that a sampler step gathers
and adds instead of evaluating log Gamma. A list is stored padded: ``rules`` (max_length,) int antecedent
indices, -1 after position ``length``. Antecedents are described by their truth table over the samples
(n, ``|A|``) and their cardinalities.

Editing priors: the fast sampler follows :class:`Priors` (its defaults and hyperpriors too) and the hooks
:func:`log_length_prior` and :func:`log_cardinality_prior`. It refuses, with
``inference.target_check.ModelMismatchError`` naming the site, a program it cannot sample: a new site
(a hyperprior written as a site of a program: write it as a Priors field, ``Priors(lam=dist.Gamma(a, b))``),
another family, the length or antecedent choice written in :func:`rule_list_prior` instead of a hook,
theta's Dirichlet changed in :func:`model` alone, or an edit of :func:`log_prior` (a derived evaluation:
edit the hooks). Check an edit by fitting (the check runs on every fit) and by the enumeration tests of
the edited model, as in tests/test_prior_edits.py.
"""

from __future__ import annotations

import numbers
import sys
from collections.abc import Iterable
from dataclasses import dataclass
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
import numpyro
import numpyro.distributions as dist
from jax.scipy.special import gammaln, logsumexp
from numpyro import handlers
from scipy import special

from interpretable_zoo import compiled_hooks
from interpretable_zoo.inference import hyperpriors
from interpretable_zoo.inference.validation import check_float32_positive


@dataclass(frozen=True)
class Priors:
    """Hyperparameters of BRL (Letham et al. 2015, sec. 2).

    lam: prior mean of the list length; m ~ Poisson(lam) truncated to 0..min(``|A|``, max_length). It may
        hold a hyperprior instead, ``Priors(lam=dist.Gamma(a, b))``: the programs draw it as the site
        ``lam`` (:func:`sample_hyperparameters`) and the sampler draws it within the chain
        (``inference.hyperpriors``: slice sampling on log lam).
    eta: prior mean of an antecedent's cardinality; c_j ~ Poisson(eta) truncated to the cardinalities
        that still have unused antecedents. It may hold a hyperprior, ``Priors(eta=dist.Gamma(a, b))``,
        sampled as lam's is.
    alpha: Dirichlet concentration of each rule's label distribution theta_j ~ Dirichlet(alpha); a
        scalar (the same for every class) or one value per class. It may hold a hyperprior on the scalar,
        ``Priors(alpha=dist.Gamma(a, b))``, sampled as lam's is.
    """

    lam: float | dist.Distribution = 3.0
    eta: float | dist.Distribution = 1.0
    alpha: float | tuple[float, ...] | dist.Distribution = 1.0

    def __post_init__(self) -> None:
        for name in ("lam", "eta"):
            value = getattr(self, name)
            if isinstance(value, dist.Distribution):  # a hyperprior: sampled within the chain where supported
                hyperpriors.check_scalar(name, value)
                continue
            if isinstance(value, jax.core.Tracer):  # drawn inside a traced program: refused where it is sampled
                continue
            if isinstance(value, bool) or not isinstance(value, numbers.Real) or not np.isfinite(value) or value <= 0:
                raise ValueError(f"{name} must be a positive finite number, got {value!r}")
            check_float32_positive(float(value), f"priors.{name}")
        alpha = self.alpha
        if isinstance(alpha, dist.Distribution):
            hyperpriors.check_scalar("alpha", alpha)
            return
        if isinstance(alpha, jax.core.Tracer):
            return
        if isinstance(alpha, numbers.Real) and not isinstance(alpha, bool):
            values = (float(alpha),)
        else:
            try:
                values = tuple(float(a) for a in alpha)
            except TypeError:
                if isinstance(alpha, Iterable) and any(isinstance(a, dist.Distribution) for a in alpha):
                    raise ValueError("priors.alpha: a hyperprior is one scalar distribution for every class "
                                     "(alpha=dist.Gamma(a, b)); per-class values must be numbers") from None
                raise ValueError(f"alpha must be a positive number or a sequence of them, got {alpha!r}") from None
            object.__setattr__(self, "alpha", values)
        if not values or not all(np.isfinite(a) and a > 0 for a in values):
            raise ValueError(f"alpha must be positive and finite, got {alpha!r}")
        for a in values:
            check_float32_positive(a, "priors.alpha")

    def alpha_vector(self, n_classes: int) -> np.ndarray:
        """alpha as one float per class; ValueError when a per-class alpha has the wrong length."""
        if isinstance(self.alpha, tuple):
            if len(self.alpha) != n_classes:
                raise ValueError(f"alpha has {len(self.alpha)} values for {n_classes} classes")
            if any(isinstance(a, jax.core.Tracer) for a in self.alpha):  # hyperparameters traced as arguments
                return jnp.stack(self.alpha)
            return np.asarray(self.alpha, dtype=np.float64)
        return np.ones(n_classes) * self.alpha


def cardinality_counts(cardinalities) -> np.ndarray:
    """K_c: how many antecedents of A have cardinality c, for c = 1..max (needs concrete values)."""
    cardinalities = np.asarray(cardinalities)
    if cardinalities.ndim != 1 or cardinalities.size == 0 or cardinalities.min() < 1:
        raise ValueError("cardinalities must be a non-empty 1-D array of integers >= 1")
    return np.bincount(cardinalities, minlength=cardinalities.max() + 1)[1:].astype(np.int32)


def log_length_prior(priors: Priors, max_length: int) -> jnp.ndarray:
    """log p(m | A, lam) for m = 0..max_length: Poisson(lam) truncated to that range (Letham eq. 2)."""
    m = jnp.arange(max_length + 1)
    weights = m * jnp.log(priors.lam) - gammaln(m + 1.0)
    return weights - logsumexp(weights)


def log_cardinality_prior(priors: Priors, available) -> jnp.ndarray:
    """log p(c_j | c_<j, A, eta) for c = 1..C (Letham eq. 3): Poisson(eta) renormalised over the
    cardinalities that still have unused antecedents, ``available`` (..., C) bool; -inf elsewhere."""
    c = jnp.arange(1, available.shape[-1] + 1)
    weights = jnp.where(available, c * jnp.log(priors.eta) - gammaln(c + 1.0), -jnp.inf)
    norm = logsumexp(weights, axis=-1, keepdims=True)
    return jnp.where(available, weights - jnp.where(jnp.isfinite(norm), norm, 0.0), -jnp.inf)


class PriorTables(NamedTuple):
    """The list prior (Letham eqs. 2-4) as lookups built from the hooks, for lists of at most
    ``capacity`` rules over antecedents of C cardinalities.

    ``length`` (capacity + 1,): :func:`log_length_prior`. ``cardinality`` (2^C, C):
    :func:`log_cardinality_prior` given the set S of cardinalities that still have unused antecedents
    (cardinality c is in S when bit c - 1 of the row number is set). ``choice`` (C, capacity + 1): the
    uniform antecedent choices of n rules of cardinality c, which multiply to 1 / (K_c (K_c - 1) ...
    (K_c - n + 1)) whatever their order (eq. 4). ``counts`` (C,): K_c, the antecedents of A of each
    cardinality.
    """

    length: jnp.ndarray
    cardinality: jnp.ndarray
    choice: jnp.ndarray
    counts: jnp.ndarray


MAX_CARDINALITY = 16
"""Longest conjunction :func:`prior_tables` accepts (its cardinality table has 2^C rows)."""


def prior_tables(cardinalities, priors: Priors, capacity: int) -> PriorTables:
    """The :class:`PriorTables` of antecedents with these (concrete) cardinalities."""
    counts = cardinality_counts(cardinalities)
    n_cardinalities = counts.size
    if n_cardinalities > MAX_CARDINALITY:
        raise ValueError(f"cardinalities: conjunctions of at most {MAX_CARDINALITY} items, got {n_cardinalities}")
    left = counts[:, None] - np.arange(capacity)[None, :]  # unused antecedents of cardinality c after taking n
    with np.errstate(divide="ignore"):
        step = np.where(left > 0, -np.log(np.maximum(left, 1)), -np.inf)
    choice = np.concatenate([np.zeros((n_cardinalities, 1)), np.cumsum(step, axis=1)], axis=1)
    length, cardinality = compiled_hooks.evaluate(sys.modules[__name__], hook_tables, priors, n_cardinalities, capacity)
    return PriorTables(length, cardinality, jax.device_put(choice), jax.device_put(counts))


def hook_tables(priors: Priors, n_cardinalities: int, capacity: int):
    """The length and cardinality hooks' tables of :class:`PriorTables`."""
    subsets = (np.arange(2**n_cardinalities)[:, None] >> np.arange(n_cardinalities)) & 1 == 1
    return log_length_prior(priors, capacity), log_cardinality_prior(priors, jnp.asarray(subsets))


def cardinalities_can_run_out(cardinalities, capacity: int) -> bool:
    """Whether a list of at most ``capacity`` rules can use up every antecedent of some cardinality
    before its last rule (0 < K_c < capacity), so that p(c_j | c_<j) changes along the list."""
    counts = cardinality_counts(cardinalities)
    return bool(((counts > 0) & (counts < capacity)).any())


def log_prior_from_tables(tables: PriorTables, rule_cardinality, length, can_run_out: bool = True):
    """log p(d | A, lam, eta) of a padded list (Letham eqs. 2-4): log p(m) + sum_{j<m} log p(c_j | the
    cardinalities with unused antecedents before j) + the antecedent choices. ``rule_cardinality``
    (max_length,) int: c_j - 1 of each rule (any value in 0..C-1 beyond ``length``). With
    ``can_run_out`` False (see :func:`cardinalities_can_run_out`) that set is the same at every
    position and the sum is taken over the counts n_c of each cardinality."""
    n_cardinalities = tables.counts.shape[0]
    bits = 1 << jnp.arange(n_cardinalities)
    valid = jnp.arange(rule_cardinality.shape[-1]) < length
    chosen = valid[:, None] & (rule_cardinality[:, None] == jnp.arange(n_cardinalities))
    n_chosen = chosen.sum(axis=0)
    if can_run_out:
        used_before = jnp.cumsum(chosen, axis=0, dtype=jnp.int32) - chosen
        subset = ((used_before < tables.counts) * bits).sum(axis=1)
        log_cardinality = jnp.where(valid, tables.cardinality[subset, rule_cardinality], 0.0).sum()
    else:
        every = tables.cardinality[((tables.counts > 0) * bits).sum()]
        log_cardinality = jnp.where(n_chosen > 0, n_chosen * every, 0.0).sum()
    log_choice = tables.choice[jnp.arange(n_cardinalities), n_chosen].sum()
    return tables.length[length] + log_cardinality + log_choice


def log_prior(rules, length, cardinalities, priors: Priors, max_length: int):
    """log p(d | A, lam, eta) of one padded list of at most ``max_length`` rules (Letham eqs. 2-4), by
    :func:`log_prior_from_tables`. ``cardinalities`` must be concrete; ``rules``, ``length`` may be traced."""
    cards = jnp.asarray(np.asarray(cardinalities) - 1)
    rules = jnp.asarray(rules)
    rule_cardinality = jnp.where(rules >= 0, cards[jnp.maximum(rules, 0)], 0)
    return log_prior_from_tables(prior_tables(cardinalities, priors, max_length), rule_cardinality, length)


def _log_multivariate_beta(a):
    return gammaln(a).sum(-1) - gammaln(a.sum(-1))


def log_marginal_likelihood(rule_counts, default_counts, length, alpha):
    """log p(y | x, d, alpha) = sum_j [log B(alpha + N_j) - log B(alpha)] over the rules j < length and
    the default rule, with theta_j ~ Dirichlet(alpha) integrated out (Letham eq. 5).

    ``rule_counts`` (max_length, L) and ``default_counts`` (L,): N_j, the labels captured by each rule.
    """
    alpha = jnp.asarray(alpha)
    base = _log_multivariate_beta(alpha)
    valid = jnp.arange(rule_counts.shape[-2]) < length
    rule_terms = jnp.where(valid, _log_multivariate_beta(alpha + rule_counts) - base, 0.0)
    return rule_terms.sum() + _log_multivariate_beta(alpha + default_counts) - base


def label_posterior_mean(counts, alpha):
    """E[theta_j | data] = (alpha + N_j) / sum_l (alpha_l + N_jl), theta_j | data ~ Dirichlet(alpha + N_j)
    (Letham sec. 2.1), for captured-label counts ``counts`` (..., L)."""
    concentration = counts + alpha
    return concentration / concentration.sum(axis=-1, keepdims=True)


class LikelihoodTables(NamedTuple):
    """log Gamma differences for :func:`log_marginal_likelihood_from_tables`, for counts k = 0..n:
    ``terms`` (n + 1, L + 1): column l < L holds log Gamma(alpha_l + k) - log Gamma(alpha_l), column L
    holds -(log Gamma(A + k) - log Gamma(A)) with A = sum_l alpha_l."""

    terms: jnp.ndarray


def likelihood_tables(alpha, n_samples: int) -> LikelihoodTables:
    """The :class:`LikelihoodTables` of concentration ``alpha`` (L,) for up to ``n_samples`` captures."""
    alpha = np.asarray(alpha, dtype=np.float64)
    k = np.arange(n_samples + 1, dtype=np.float64)[:, None]
    class_terms = special.gammaln(alpha[None, :] + k) - special.gammaln(alpha)[None, :]
    total_terms = special.gammaln(alpha.sum() + k) - special.gammaln(alpha.sum())
    return LikelihoodTables(jax.device_put(np.hstack([class_terms, -total_terms])))


class DirichletConcentration(NamedTuple):
    """alpha (L,) itself in place of :class:`LikelihoodTables`, for :func:`log_marginal_likelihood_from_tables`
    to evaluate log Gamma directly: the form for an alpha sampled within the chain, which would otherwise
    need its tables rebuilt for every replica in every scan."""

    alpha: jnp.ndarray


def log_marginal_likelihood_from_tables(tables: LikelihoodTables | DirichletConcentration, counts_and_totals):
    """:func:`log_marginal_likelihood` as lookups (or evaluated, given a :class:`DirichletConcentration`).
    ``counts_and_totals`` (rows, L + 1): N_j and its total sum_l N_jl in the last column, one row for each
    rule in use and the default rule (any other rows all zero: they add 0). Returns sum_j log B(alpha + N_j)
    - log B(alpha)."""
    if isinstance(tables, DirichletConcentration):  # a zero row's term is exactly 0 here too
        alpha = tables.alpha
        return (_log_multivariate_beta(alpha + counts_and_totals[..., :-1]) - _log_multivariate_beta(alpha)).sum()
    width = counts_and_totals.shape[-1]
    per_row = sum(tables.terms[counts_and_totals[..., l], l] for l in range(width))
    return per_row.sum()


def capture_index(truth_table, rules, length):
    """For each sample, the position of the first rule of the list that holds for it, or max_length
    (the default rule) when none does. ``truth_table`` (n, ``|A|``) bool."""
    max_length = rules.shape[-1]
    positions = jnp.arange(max_length, dtype=jnp.int32)
    # a gather of the transposed table's rows and a min: about 10x faster than of columns and an argmax
    covers = jnp.asarray(truth_table).T[jnp.maximum(rules, 0)] & (positions < length)[:, None]  # (max_length, n)
    return jnp.where(covers, positions[:, None], max_length).min(axis=0)


def capture_counts(truth_table, y, n_classes: int, rules, length):
    """N_j: (rule_counts (max_length, L), default_counts (L,)), the labels each rule captures."""
    return _counts_by_rule(capture_index(truth_table, rules, length), y, n_classes, rules.shape[-1])


def _counts_by_rule(rule, y, n_classes: int, max_length: int):
    """Labels counted by the rule capturing them; a label of ``n_classes`` (a padding row) counts nowhere."""
    counts = jnp.zeros((max_length + 1, n_classes), jnp.int32).at[rule, jnp.asarray(y)].add(jnp.int32(1), mode="drop")
    return counts[:max_length], counts[max_length]


def loo_log_predictive(truth_table, y, alpha, rules, length):
    """``log p(y_n | x_n, d, y_-n)`` for every training sample n: the label's Dirichlet-multinomial predictive
    under the list d with theta integrated out given the other samples' labels,
    log (alpha_{y_n} + N_{j y_n} - 1) - log (A + N_j - 1), j the rule capturing n (Letham eq. 5 by the
    chain rule: log p(y | x, d) minus the same with sample n left out). Shape (n,)."""
    rule = capture_index(truth_table, rules, length)
    rule_counts, default_counts = _counts_by_rule(rule, y, alpha.shape[0], rules.shape[-1])
    concentration = jnp.concatenate([rule_counts, default_counts[None]]) + alpha
    return jnp.log(concentration[rule, jnp.asarray(y)] - 1) - jnp.log(concentration[rule].sum(-1) - 1)


def list_capacity(n_antecedents: int, max_length: int | None) -> int:
    """The longest list allowed: min(``|A|``, max_length), or ``|A|`` when max_length is None."""
    if max_length is None:
        return n_antecedents
    if isinstance(max_length, bool) or not isinstance(max_length, numbers.Integral) or max_length < 1:
        raise ValueError(f"max_length must be a positive integer, got {max_length!r}")
    return min(int(max_length), n_antecedents)


IMPOSSIBLE = -1e30
"""A finite stand-in for log 0 in Categorical logits (validated distributions reject -inf)."""


def _finite_logits(logits):
    return jnp.where(jnp.isfinite(logits), logits, IMPOSSIBLE)


def sample_hyperparameters(priors: Priors) -> Priors:
    """``priors`` with each hyperprior field drawn as the site named after it (``lam``), the first line of
    :func:`model` and :func:`collapsed_model`, and of :func:`rule_list_prior` run as a program of its own; a
    program that samples a field as a site of its own instead is refused by the sampler with the way to write
    it."""
    return hyperpriors.sample_hyperparameters(priors)


def rule_list_prior(cardinalities, priors: Priors = Priors(), max_length: int | None = None):
    """Sample a list from p(d | A, lam, eta) (Letham Algorithm 1, lines 2, 5, 6); returns (rules, length).

    Sites: the hyperpriors of ``priors`` not yet drawn, e.g. ``lam`` when it holds one
    (:func:`sample_hyperparameters`; :func:`model` draws them before it calls this); ``length``; for each
    position j < max_length, ``cardinality_j`` and ``antecedent_j`` (masked out beyond ``length``).
    """
    if hyperpriors.hyperpriors_of(priors):
        priors = sample_hyperparameters(priors)
    cards = np.asarray(cardinalities)
    counts = cardinality_counts(cards)
    capacity = list_capacity(cards.size, max_length)
    length = numpyro.sample("length", dist.Categorical(logits=log_length_prior(priors, capacity)))
    cards_j = jnp.asarray(cards)
    used = jnp.zeros(cards.size, bool)
    rules = []
    for j in range(capacity):
        remaining = jnp.asarray(counts) - jnp.bincount(jnp.where(used, cards_j - 1, counts.size), length=counts.size + 1)[:-1]
        with handlers.mask(mask=j < length):
            card_logits = jnp.concatenate([jnp.array([-jnp.inf]), log_cardinality_prior(priors, remaining > 0)])
            card = numpyro.sample(f"cardinality_{j}", dist.Categorical(logits=_finite_logits(card_logits)))
            candidates = ~used & (cards_j == card)
            antecedent = numpyro.sample(f"antecedent_{j}", dist.Categorical(logits=jnp.where(candidates, 0.0, IMPOSSIBLE)))
        used = used.at[antecedent].set(True)
        rules.append(antecedent)
    rules = jnp.where(jnp.arange(capacity) < length, jnp.stack(rules), -1)
    return rules, length


def _check_truth_table(truth_table, cardinalities):
    if np.ndim(truth_table) != 2 or np.shape(truth_table)[1] != np.asarray(cardinalities).size:
        raise ValueError(f"truth_table must be (n_samples, n_antecedents = len(cardinalities)), got {np.shape(truth_table)}")
    if isinstance(truth_table, jax.core.Tracer):  # data traced as an argument
        return truth_table.astype(bool)
    return np.asarray(truth_table).astype(bool)


def model(truth_table, cardinalities, n_classes: int, y=None, *, priors: Priors = Priors(), max_length: int | None = None):
    """Letham's Algorithm 1: a list from the prior, theta_j ~ Dirichlet(alpha) per rule and for the
    default rule, and y_i ~ Categorical(theta of the first rule capturing x_i).

    Sites: ``length``, ``cardinality_j``, ``antecedent_j``, ``theta`` (max_length + 1, L: row j for
    rule j, masked beyond ``length``; the last row for the default rule) and ``y`` (n,). Draw planted
    lists and labels with ``numpyro.infer.Predictive(model, num_samples=...)``.
    """
    table = _check_truth_table(truth_table, cardinalities)
    priors = sample_hyperparameters(priors)
    rules, length = rule_list_prior(cardinalities, priors, max_length)
    capacity = rules.shape[0]
    in_use = (jnp.arange(capacity + 1) < length) | (jnp.arange(capacity + 1) == capacity)
    with numpyro.plate("rule", capacity + 1), handlers.mask(mask=in_use):
        theta = numpyro.sample("theta", dist.Dirichlet(priors.alpha_vector(n_classes)))
    with numpyro.plate("sample", table.shape[0]):
        numpyro.sample("y", dist.Categorical(probs=theta[capture_index(table, rules, length)]), obs=y)


def collapsed_model(truth_table, cardinalities, n_classes: int, y, *, priors: Priors = Priors(), max_length: int | None = None):
    """The target of the Metropolis-Hastings sampler: the list prior with every theta integrated out,
    log p(d) + log p(y | x, d, alpha). Same list sites as :func:`model`. The sampler's tempered rungs start
    from a reference of their own (``inference.brl_mh.log_reference_density``); it shapes only the path,
    never the posterior."""
    table = _check_truth_table(truth_table, cardinalities)
    priors = sample_hyperparameters(priors)
    rules, length = rule_list_prior(cardinalities, priors, max_length)
    rule_counts, default_counts = capture_counts(table, y, n_classes, rules, length)
    numpyro.factor("y", log_marginal_likelihood(rule_counts, default_counts, length, priors.alpha_vector(n_classes)))
