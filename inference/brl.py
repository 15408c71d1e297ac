"""Bayesian Rule Lists, public layer: ``fit_brl``, its result (BRL-point, BRL-post, explanations with
credible intervals) and the scikit-learn ``BayesianRuleListClassifier`` (Letham et al. 2015)."""

from __future__ import annotations

import functools
import numbers
import warnings
from dataclasses import dataclass, field

import jax
import jax.numpy as jnp
import numpy as np
import pandas as pd
from scipy import optimize, stats
from sklearn.base import BaseEstimator, ClassifierMixin
from sklearn.utils.validation import check_is_fitted

from interpretable_zoo.diagnostics.inference_data import SITES_GROUP, log_likelihood_fits, tempered_inference_data
from interpretable_zoo.diagnostics import loo
from interpretable_zoo.inference import brl_mh, convergence, hyperpriors, memory, target_check, tempering
from interpretable_zoo.inference.checkpoint import as_checkpoint
from interpretable_zoo.inference.explanation import ExplainedResultMixin, mcmc_facts, mcmc_status, plain, records
from interpretable_zoo.inference.estimators import ExplainedEstimatorMixin, atomic_fit
from interpretable_zoo.inference.shapes import size_bucket
from interpretable_zoo.inference.tempering import TargetKernel
from interpretable_zoo.inference.names import resolve_names
from interpretable_zoo.inference.rule_mining import (
    ItemEncoder,
    antecedent_neighbours,
    binary_items,
    fit_item_encoder,
    mine_antecedents,
    neighbour_counts,
    truth_table,
)
from interpretable_zoo.inference.validation import (
    check_binary_matrix,
    check_estimator_input,
    check_sampling_options,
    check_seed,
    encode_labels,
)
from interpretable_zoo.models import brl

DEFAULT_MAX_LENGTH = 30
"""Longest list a run represents unless ``max_length`` says otherwise (the prior mean is lam = 3)."""

SUMMARY_VARIABLES = ("log_posterior", "length", "mean_cardinality")

DEFAULT_CHAINS = 8
"""Chains of a fit by default: two groups of four that learn their proposals apart
(:data:`~interpretable_zoo.inference.brl_mh.LEARNING_GROUPS`); groups of four find both kinds of tic-tac-toe's lists, where groups of
two did not (docs/decisions/brl-sampler.md)."""

STEPS_PER_SCAN = 10
"""Metropolis-Hastings steps of every replica between two swap rounds by default: about one pass over a
list of typical length, so that a replica's list adapts to its rung before its next swap (the local
exploration that non-reversible parallel tempering relies on; with one step per scan, replicas keep
their lists across swaps and stuck chains are not rescued)."""

SCANS_PER_CHUNK = 128
"""Tempering scans per compiled call at :data:`STEPS_PER_SCAN` steps a scan (each ``steps_per_scan``
Metropolis-Hastings steps of every replica and a swap round); see :func:`scans_per_chunk`."""


def scans_per_chunk(steps_per_scan: int) -> int:
    """Scans per chunk: :data:`SCANS_PER_CHUNK`, times as many as make up for fewer steps a scan than the
    default, so that a chunk (and a tuning round, a convergence test) spans at least the default's
    Metropolis-Hastings steps. At one step a scan, a chunk of 128 scans runs a few milliseconds, and the
    host's work per chunk (dispatch, transfers) would cost as much again (benchmarks/RESULTS.md,
    brl_mh_speed)."""
    return SCANS_PER_CHUNK * max(1, STEPS_PER_SCAN // steps_per_scan)


def _record(static, data, states):
    """What a kept draw of the posterior rung stores: the padded list."""
    return {"rules": states.rules, "length": states.length}


KERNEL = TargetKernel(brl_mh.init, brl_mh.step, brl_mh.summaries, _record, brl_mh.learn_proposal, brl_mh.with_proposal,
                      chain_rows=brl_mh.chain_rows, scratch=brl_mh.scratch)
"""The list Metropolis-Hastings kernel as the tempering engine runs it."""


ROW_BUCKETS_PER_DOUBLING, MIN_ROWS = 8, 512
"""Rows of the truth tables that predictions send to their compiled programs (``_in_row_bucket``) are
rounded up to m 2^e with ROW_BUCKETS_PER_DOUBLING <= m < 2 ROW_BUCKETS_PER_DOUBLING (``shapes.size_bucket``),
and to at least MIN_ROWS, so that all small predictions share one program."""


@jax.jit
def _capture_index(by_antecedent, rules, length):
    """:func:`~interpretable_zoo.models.brl.capture_index` of the truth table given as its (``|A|``, n) transpose."""
    return brl.capture_index(by_antecedent.T, rules, length)


def _labels(y, n_samples: int):
    classes, codes = encode_labels(y, n_samples, "a rule list")
    return classes, codes.astype(np.int32)


def _check_antecedents(antecedents, n_items: int) -> tuple[tuple[int, ...], ...]:
    if isinstance(antecedents, (str, bytes)) or not hasattr(antecedents, "__iter__"):
        raise ValueError("antecedents must be a list of tuples of binary-column indices")
    checked = []
    for antecedent in antecedents:
        antecedent = tuple(antecedent) if hasattr(antecedent, "__iter__") else (antecedent,)
        if not antecedent or not all(isinstance(i, numbers.Integral) and 0 <= i < n_items for i in antecedent):
            raise ValueError(f"antecedents: {antecedent!r} is not a non-empty tuple of column indices in 0..{n_items - 1}")
        if len(set(antecedent)) != len(antecedent):
            raise ValueError(f"antecedents: {antecedent!r} repeats a column")
        checked.append(tuple(int(i) for i in antecedent))
    if not checked:
        raise ValueError("antecedents is empty")
    if len(set(checked)) != len(checked):
        raise ValueError("antecedents lists the same conjunction twice")
    return tuple(checked)


@dataclass(repr=False)
class BRLResult(ExplainedResultMixin, convergence.TemperedResult):
    """A BRL posterior: ``idata`` (``posterior``: the label-free ``length``, ``mean_cardinality`` and
    ``log_posterior``, and any sampled hyperparameter, so that ``az.summary(idata)`` means something;
    ``posterior_sites``: ``rules`` (chain, draw, position), antecedent indices padded with -1 (their text in
    ``attrs["antecedent_names"]``), and ``rule_in_list`` (chain, draw, antecedent), 1 where the list holds
    the antecedent, for every antecedent in at least ``RULE_IN_LIST_SHARE`` of the draws, named by its
    text; ``sample_stats`` ``lp`` and ``swap_accept``; the pointwise
    ``log_likelihood``; ``observed_data`` ``y``, the training labels as codes into ``attrs["classes"]``; the
    tempering facts in ``idata.posterior.attrs``), the antecedents the rules index,
    and predictions. ``idata`` is built on first use (predictions and explanations read the run's draws).

    ``converged``: whether every label-free summary reached the convergence target; ``diagnostics``:
    name -> (R-hat, bulk ESS); ``log_evidence`` +- ``log_evidence_se``: the stepping-stone log p(y | x)
    (NaN when run untempered). :meth:`~interpretable_zoo.inference.convergence.TemperedResult.extend` continues the chains.

    Example:
        >>> data = iz.datasets.load_titanic_table()
        >>> X, names = iz.datasets.one_hot(data.X)  # binary items such as sex=female
        >>> result = iz.fit_brl(X, data.y, feature_names=names, min_support=0.3, num_samples=50, num_warmup=20,
        ...                     num_chains=2, n_temperatures=1, progress_bar=False)
        >>> frame = result.explain_frame()  # the BRL-point list, one row per rule, the default rule last
        >>> frame[["antecedent", "captured", "p_1", "p_1_low", "p_1_high"]].head(2).round(2)
                                    antecedent  captured   p_1  p_1_low  p_1_high
        position
        0         sex=female and not class=3rd       274  0.92     0.89      0.95
        1         sex=female and not class=2nd       196  0.46     0.39      0.53
        >>> result.predict_proba(X[:2]).round(2)  # two adult men of the first class
        array([[0.67, 0.33],
               [0.67, 0.33]])
        >>> result.idata.posterior["length"].shape  # (chain, draw): the length of each sampled list
        (2, 50)
    """

    antecedents: tuple[tuple[int, ...], ...]
    item_names: tuple[str, ...]
    classes: np.ndarray
    priors: brl.Priors
    negations: bool  # items are X's columns followed by their negations (mined), else X's columns
    train_table: np.ndarray = field(repr=False)
    train_labels: np.ndarray = field(repr=False)
    run: convergence.TemperedRun = field(repr=False, default=None)
    target: tuple = field(repr=False, default=None)  # (static, data) of the kernel, for extend()
    sample_names: tuple[str, ...] | None = field(repr=False, default=None)  # the observation coordinate's values
    encoder: ItemEncoder | None = field(repr=False, default=None)  # the items of a table of categories
    table_columns: tuple[str, ...] | None = field(repr=False, default=None)  # that table's columns, by position

    def _kernel(self) -> TargetKernel:
        return hyperpriors.kernel_for(self.target[0], KERNEL)

    def _with_run(self, run) -> BRLResult:
        return _result(run, self.target, self.antecedents, self.item_names, self.classes, self.priors,
                       self.negations, self.train_table, self.train_labels, self.sample_names, self.encoder,
                       self.table_columns)

    def _posterior_name(self, name: str) -> str:
        return "log_posterior" if name == "log_joint" else name

    def _summary_var_names(self) -> tuple[str, ...]:
        return SUMMARY_VARIABLES + hyperpriors.sampled_hyperparameters(brl.Priors, self.run.summaries)

    @property
    def antecedent_names(self) -> tuple[str, ...]:
        return tuple(" and ".join(self.item_names[i] for i in antecedent) for antecedent in self.antecedents)

    @functools.cached_property
    def idata(self):
        """``arviz.InferenceData`` of the run (see the class docstring)."""
        rules, lengths = self.run.records["rules"], self.run.records["length"]
        sampled_hyperparameters = hyperpriors.sampled_hyperparameters(brl.Priors, self.run.summaries)
        pointwise = None
        if log_likelihood_fits(*lengths.shape, len(self.train_labels), "BRL"):
            pointwise = {"y": _pointwise_log_likelihood(self._slots(self.train_table), self.train_labels,
                                                        self._alpha_draws(), rules, lengths)}  # fmt: skip
        shown, in_list = _rule_inclusion(rules)
        coords = {"antecedent": [self.antecedent_names[i] for i in shown]}
        if self.sample_names is not None:
            coords["observation"] = list(self.sample_names)
        idata = tempered_inference_data(
            self.run,
            {
                "length": lengths,
                "mean_cardinality": self.run.summaries["mean_cardinality"],
                "log_posterior": self.run.summaries["log_joint"],
                **{name: self.run.summaries[name] for name in sampled_hyperparameters},
            },
            sites={"rules": rules, "rule_in_list": in_list},
            summary_var_names=self._summary_var_names(),
            coords=coords,
            dims={"rules": ["position"], "rule_in_list": ["antecedent"]},
            log_likelihood=pointwise,
            observed_data={"y": (self.train_labels, ["observation"])},
        )
        idata[SITES_GROUP].attrs["antecedent_names"] = list(self.antecedent_names)  # what the indices in rules mean
        if not sampled_hyperparameters:  # a discrete posterior: diagnostics.discrete_loo applies
            idata.posterior.attrs.update({loo.STATE_ATTR: ["rules", "length"], loo.LOG_JOINT_ATTR: "log_posterior"})
        idata.observed_data.attrs["classes"] = [str(label) for label in self.classes]  # what the codes in y mean
        if len(self.run.schedule) > 1:  # where rung 0 of the path stands (brl_mh.log_reference_density)
            capacity = self.target[0].capacity
            idata.posterior.attrs["tempering_reference"] = (
                f"list lengths Poisson({brl_mh.reference_mean_length(capacity):g}) truncated to 0..{capacity}, "
                "rules drawn without replacement by the learned rule weights averaged over the chains"
            )
        return idata

    def add_posterior_predictive(self, seed: int = 0):
        """``idata`` with a ``posterior_predictive`` group (replaced on a second call), returned: ``y``
        (chain, draw, observation), replicated training labels as codes into ``observed_data.attrs["classes"]``.
        For each draw's list d (and alpha), theta_j ~ Dirichlet(alpha + N_j) for every rule j, N_j the
        training labels it captures, then y_rep_n ~ Categorical(theta of the rule capturing x_n) (Letham
        eqs. 3-4 with theta drawn from its posterior given d). For ``az.plot_ppc``; ``seed`` fixes the draws."""
        import arviz as az
        import xarray as xr

        rules, lengths = self.run.records["rules"], self.run.records["length"]
        capacity, n_classes, labels = rules.shape[-1], len(self.classes), self.train_labels
        lists, inverse = np.unique(np.concatenate([rules, lengths[..., None]], -1).reshape(-1, capacity + 1), axis=0,
                                   return_inverse=True)  # fmt: skip
        table = jax.device_put(self._slots(self.train_table))
        # (lists, n): the capturing rule, the capacity for the default
        positions = _in_list_batches(lambda batch: _capture_positions_per_list(table, batch), lists)
        cell = (np.arange(len(lists))[:, None] * (capacity + 1) + positions) * n_classes + labels
        counts = np.bincount(cell.ravel(), minlength=len(lists) * (capacity + 1) * n_classes).reshape(
            len(lists), capacity + 1, n_classes)
        alpha = self._alpha_draws().reshape(-1, n_classes)
        rng = np.random.default_rng(check_seed(seed))
        replicated = np.empty((len(alpha), len(labels)), np.int32)
        for start in range(0, len(alpha), 64):  # 64 draws at a time: (64, n, L) probabilities
            draw_lists = inverse.ravel()[start : start + 64]
            theta = rng.standard_gamma(alpha[start : start + 64, None, :] + counts[draw_lists])
            probabilities = np.take_along_axis(theta / theta.sum(-1, keepdims=True), positions[draw_lists][..., None], 1)
            below = probabilities.cumsum(-1)[..., :-1] < rng.random((len(draw_lists), len(labels), 1))
            replicated[start : start + 64] = below.sum(-1)
        idata = self.idata
        predictive = xr.Dataset({"y": (["chain", "draw", "observation"], replicated.reshape(*lengths.shape, -1))},
                                coords={"chain": idata.posterior.chain, "draw": idata.posterior.draw,
                                        "observation": idata.observed_data.observation})  # fmt: skip
        idata.extend(az.InferenceData(posterior_predictive=predictive), join="right")
        return idata

    def _draws(self):
        rules = self.run.records["rules"]
        return rules.reshape(-1, rules.shape[-1]), self.run.records["length"].ravel(), (
            self.run.summaries["mean_cardinality"].ravel()
        ), self.run.summaries["log_joint"].ravel()

    def point_list(self) -> tuple[int, ...]:
        """BRL-point (Letham sec. 4): among draws whose length and mean cardinality lie between the floor
        and ceiling of their posterior means, the list of highest log posterior (antecedent indices)."""
        rules, lengths, cardinality, log_posterior = self._draws()
        mean_length = lengths.mean()
        nonempty = lengths > 0
        mean_card = cardinality[nonempty].mean() if nonempty.any() else 0.0
        typical = (np.floor(mean_length) <= lengths) & (lengths <= np.ceil(mean_length))
        typical &= ~nonempty | ((np.floor(mean_card) <= cardinality) & (cardinality <= np.ceil(mean_card)))
        candidates = np.flatnonzero(typical) if typical.any() else np.arange(lengths.size)
        best = candidates[np.argmax(log_posterior[candidates])]
        return tuple(int(r) for r in rules[best, : lengths[best]])

    def _alpha_draws(self) -> np.ndarray:
        """(chain, draw, L) float32: theta's Dirichlet concentration with each draw (each draw's own alpha
        when alpha holds a hyperprior)."""
        lengths = self.run.records["length"]
        if "alpha" in hyperpriors.hyperpriors_of(self.priors):
            return np.repeat(self.run.summaries["alpha"][..., None], len(self.classes), -1).astype(np.float32)
        return np.broadcast_to(self.priors.alpha_vector(len(self.classes)), (*lengths.shape, len(self.classes))
                               ).astype(np.float32)

    def _alpha_given_list(self, counts) -> tuple[np.ndarray, np.ndarray]:
        """alpha given a list with rule counts ``counts`` (rows, L) and the data: (nodes (G, L), weights (G,)),
        the one fixed alpha, or for a hyperprior on alpha a quadrature of p(alpha) p(y | d, alpha) (Letham
        eq. 5) on :data:`ALPHA_QUADRATURE_NODES` points of log alpha over the hyperprior's central
        1 - 2e-12."""
        prior = self.priors.alpha
        n_classes = len(self.classes)
        if not hyperpriors.is_hyperprior(prior):
            return self.priors.alpha_vector(n_classes)[None], np.ones(1)
        shape, rate = float(prior.concentration), float(prior.rate)
        log_alpha = np.linspace(*np.log(stats.gamma.ppf([1e-12, 1 - 1e-12], shape, scale=1 / rate)),
                                ALPHA_QUADRATURE_NODES)
        nodes = np.repeat(np.exp(log_alpha)[:, None], n_classes, -1)  # (G, L)
        log_likelihood = np.asarray(_log_likelihood_at_each_alpha(counts[:-1], counts[-1], len(counts) - 1, nodes))
        log_weight = stats.gamma.logpdf(nodes[:, 0], shape, scale=1 / rate) + log_alpha + log_likelihood
        weights = np.exp(log_weight - log_weight.max())
        return nodes, weights / weights.sum()

    def rule_probabilities(self, rules) -> np.ndarray:
        """E[theta_j | data] (len(rules) + 1, L) of each rule of a list, default rule last (Letham sec. 2.1):
        (alpha + N_j) / sum_l (alpha_l + N_jl), averaged over alpha given the list for a hyperprior on alpha."""
        counts = self.rule_counts(rules)
        nodes, weights = self._alpha_given_list(counts)
        return np.einsum("g,grl->rl", weights, brl.label_posterior_mean(counts[None], nodes[:, None]))

    def _slots(self, table) -> np.ndarray:
        """The (slots, n) transpose of a (n, ``|A|``) truth table, widened with never-true antecedents to the
        kernel's antecedent slots, so that fits whose ``|A|`` share a size bucket share the compiled prediction
        programs (which take truth tables in this layout, that of :func:`~interpretable_zoo.inference.rule_mining.truth_table`)."""
        return np.pad(np.asarray(table).T, ((0, self.target[0].antecedent_slots - table.shape[1]), (0, 0)))

    def _padded(self, rules):
        """A list as the kernel stores it: (capacity,) antecedent indices padded with -1 (fixed shapes, so
        that evaluating lists of any length reuses one compiled program)."""
        capacity = self.run.records["rules"].shape[-1]
        return jax.device_put(np.array(list(rules) + [-1] * (capacity - len(rules)), dtype=np.int32))

    def _capture_positions(self, table, rules) -> np.ndarray:
        """For each row of the (n, ``|A|``) truth table ``table``, the position in ``rules`` of the rule that
        captures it (len(rules) for the default rule). The table goes to the compiled program widened to the
        kernel's antecedent slots and to a size bucket of rows (``_in_row_bucket``)."""
        position = np.asarray(_capture_index(_in_row_bucket(self._slots(table)), self._padded(rules), len(rules)))
        return np.minimum(position[: len(table)], len(rules))

    def rule_counts(self, rules) -> np.ndarray:
        """N_j: (len(rules) + 1, L) training labels captured by each rule of a list, default rule last."""
        rules = tuple(int(r) for r in np.asarray(rules, dtype=np.int64).reshape(-1))
        counts = np.zeros((len(rules) + 1, len(self.classes)), np.int32)
        np.add.at(counts, (self._capture_positions(self.train_table, rules), self.train_labels), 1)
        return counts

    def items(self, X) -> np.ndarray:
        """The binary items of ``X`` (same columns as in the fit; a table of categories if the fit had one)."""
        if self.encoder is not None:  # a DataFrame's columns by name, an array's by position
            return self.encoder.transform(X if isinstance(X, pd.DataFrame) else _category_table(X, self.table_columns))
        X = check_binary_matrix(X, dtype=np.uint8)
        n_columns = len(self.item_names) // 2 if self.negations else len(self.item_names)
        if X.shape[1] != n_columns:
            raise ValueError(f"X has {X.shape[1]} columns; the fit had {n_columns}")
        return np.hstack([X, 1 - X]) if self.negations else X

    def predict_proba(self, X, *, estimate: str = "point") -> np.ndarray:
        """Class probabilities (n, L): ``"point"`` uses the BRL-point list's posterior means
        (:func:`~interpretable_zoo.models.brl.label_posterior_mean`); ``"post"`` (BRL-post) averages them over every posterior draw."""
        if estimate not in ("point", "post"):
            raise ValueError(f"estimate must be 'point' or 'post', got {estimate!r}")
        table = truth_table(self.items(X), self.antecedents)
        if estimate == "point":
            rules = self.point_list()
            return self.rule_probabilities(rules)[self._capture_positions(table, rules)]
        rules, lengths, _, _ = self._draws()
        rows = _draw_rows(rules, lengths, self._alpha_draws().reshape(-1, len(self.classes)))
        unique, inverse = np.unique(rows, axis=0, return_inverse=True)
        padded = _in_whole_batches(unique)
        weights = np.bincount(inverse.ravel(), minlength=len(padded)).astype(np.float32) / lengths.size  # 0: repeats
        train_table = _in_row_bucket(self._slots(self.train_table))  # its padding rows labelled n_classes
        train_labels = np.pad(self.train_labels, (0, train_table.shape[1] - len(self.train_labels)),
                              constant_values=len(self.classes))
        tables = jax.device_put((train_table, train_labels, _in_row_bucket(self._slots(table))))
        total = sum(np.asarray(_posterior_average(*tables, *jax.device_put((padded[start : start + LISTS_PER_CALL],
                                                                             weights[start : start + LISTS_PER_CALL])),
                                                  len(self.classes)))
                    for start in range(0, len(padded), LISTS_PER_CALL))  # fmt: skip
        return total[: len(table)]

    def predict(self, X, *, estimate: str = "point") -> np.ndarray:
        return self.classes[np.argmax(self.predict_proba(X, estimate=estimate), axis=1)]

    def explain_frame(self, *, outcome: str | None = None, level: float = 0.95) -> pd.DataFrame:
        """The BRL-point list as a table, one row per rule (the default rule last): ``antecedent`` (its name,
        missing for the default rule) and ``antecedent_index`` (into ``antecedents``, -1 for the default),
        ``support`` (training points where the antecedent holds, wherever it stands in the list),
        ``captured`` (training points the rule decides: the antecedent holds and no earlier one does) and
        ``captured_<class>`` per class, then per class ``p_<class>`` (posterior mean of theta_jl) and
        ``p_<class>_low``, ``p_<class>_high``: the central ``level`` credible interval of its Beta marginal
        (theta_j | data ~ Dirichlet(alpha + N_j), Letham sec. 2.1). ``outcome`` is :meth:`explain`'s
        (the frame holds every class)."""
        if not 0 < level < 1:
            raise ValueError(f"level: must lie strictly between 0 and 1, got {level!r}")
        rules = self.point_list()
        counts = self.rule_counts(rules)
        means = self.rule_probabilities(rules)
        nodes, weights = self._alpha_given_list(counts)
        concentration = counts[None] + nodes[:, None]  # (G, rows, L): theta_jl ~ Beta(concentration, rest) per node
        lows, highs = (_beta_mixture_quantile(q, weights, concentration, concentration.sum(-1, keepdims=True)
                                              - concentration) for q in ((1 - level) / 2, (1 + level) / 2))
        support = np.append(self.train_table[:, list(rules)].sum(0), len(self.train_labels))
        frame = pd.DataFrame(
            {
                "antecedent": [self.antecedent_names[r] for r in rules] + [None],
                "antecedent_index": list(rules) + [-1],
                "support": support.astype(np.int64),
                "captured": counts.sum(1),
            },
            index=pd.RangeIndex(len(rules) + 1, name="position"),
        )
        for label, name in enumerate(self.classes):
            frame[f"captured_{name}"] = counts[:, label]
        for label, name in enumerate(self.classes):
            frame[f"p_{name}"], frame[f"p_{name}_low"], frame[f"p_{name}_high"] = (
                means[:, label], lows[:, label], highs[:, label])
        frame.attrs.update(level=level, outcome=(outcome or f"y={self.classes[1]}") if len(self.classes) == 2 else None)
        return frame

    def explain(self, *, outcome: str | None = None, level: float = 0.95) -> str:
        """The BRL-point list, each rule with the posterior mean and a ``level`` credible interval of its
        outcome probability (the numbers of :meth:`explain_frame`).

        Two classes: the probability of the second class, named ``outcome`` (default ``y=<class>``).
        More classes: the most probable class of each rule and its probability.
        """
        frame = self.explain_frame(outcome=outcome, level=level)
        lines = []
        for position, row in frame.iterrows():
            probabilities = [row[f"p_{name}"] for name in self.classes]
            label = 1 if len(self.classes) == 2 else int(np.argmax(probabilities))
            name = self.classes[label]
            what = frame.attrs["outcome"] if len(self.classes) == 2 else f"y={name}"
            consequent = (f"{what} probability {row[f'p_{name}']:.0%} "
                          f"({row[f'p_{name}_low']:.0%}-{row[f'p_{name}_high']:.0%})")
            if row["antecedent_index"] < 0:  # the default rule
                lines.append(f"{'else ' if position else ''}{consequent}")
            else:
                lines.append(f"{'else if' if position else 'if'} {row['antecedent']} then {consequent}")
        return "\n".join(lines)

    def to_dict(self, *, outcome: str | None = None, level: float = 0.95) -> dict:
        """:meth:`explain_frame`'s rules (``rules``, one dict per rule) with the fit's facts, JSON-ready."""
        frame = self.explain_frame(outcome=outcome, level=level)
        return {
            "model": "BRL",
            "classes": plain(self.classes),
            "level": level,
            **mcmc_facts(self),
            "rules": records(frame),
        }

    def _card(self):
        facts = {"classes": ", ".join(map(str, self.classes)), "antecedents": len(self.antecedents),
                 "training points": len(self.train_labels)}
        return "Bayesian rule list (BRL-point)", facts, self.explain_frame(), mcmc_status(self)


def _beta_mixture_quantile(q: float, weights, a, b) -> np.ndarray:
    """The q-quantile of sum_g weights[g] Beta(a[g], b[g]) for each entry of a[g] (G, ...): the Beta
    quantile for one component, else the root of the mixture's CDF (the posterior of theta_jl with alpha
    integrated out)."""
    if len(weights) == 1:
        return stats.beta.ppf(q, a[0], b[0])
    keep = weights > 1e-12 * weights.max()
    weights, a, b = weights[keep], a[keep], b[keep]

    def root(index):
        return optimize.brentq(lambda t: weights @ stats.beta.cdf(t, a[(slice(None), *index)],
                                                                  b[(slice(None), *index)]) - q, 0.0, 1.0, xtol=1e-10)

    return np.array([root(index) for index in np.ndindex(a.shape[1:])]).reshape(a.shape[1:])


ALPHA_QUADRATURE_NODES = 2001
"""Points of log alpha on which :meth:`BRLResult._alpha_given_list` integrates a sampled alpha out."""


@jax.jit
def _log_likelihood_at_each_alpha(rule_counts, default_counts, length, alphas):
    """(G,): :func:`~interpretable_zoo.models.brl.log_marginal_likelihood` of one list's counts at each concentration (G, L)."""
    return jax.vmap(lambda alpha: brl.log_marginal_likelihood(rule_counts, default_counts, length, alpha))(alphas)


@functools.partial(jax.jit, static_argnums=5)
def _posterior_average(train_by_antecedent, train_labels, test_by_antecedent, unique, weights, n_classes: int):
    """BRL-post's terms of a batch of distinct sampled (list, alpha): the sum of weight * E[theta_j(x) | data]
    (the posterior mean of the rule capturing x); ``unique`` rows: the rules, the length, then alpha's L
    float32 values as int32 bits (``_draw_rows``); the truth tables as their (slots, n) transposes
    (:meth:`BRLResult._slots`). :meth:`BRLResult.predict_proba` gives it batches of :data:`LISTS_PER_CALL`
    rows (the last padded with weight 0) and rows of test points in size buckets, so that predictions share
    one compiled program."""
    train_table, test_table = train_by_antecedent.T, test_by_antecedent.T

    def add(total, list_and_weight):
        row, weight = list_and_weight
        rules, length, alpha = _split_draw_row(row, n_classes)
        rule_counts, default_counts = brl.capture_counts(train_table, train_labels, n_classes, rules, length)
        probabilities = brl.label_posterior_mean(jnp.concatenate([rule_counts, default_counts[None]]), alpha)
        return total + weight * probabilities[brl.capture_index(test_table, rules, length)], None

    total = jnp.zeros((test_table.shape[0], n_classes))
    return jax.lax.scan(add, total, (unique, weights))[0]


def _in_row_bucket(slots) -> np.ndarray:
    """A (slots, n) truth table widened with never-true rows to a size bucket of n (at least
    :data:`MIN_ROWS`), so that predictions of nearby sizes, such as the folds of a cross-validation, share the
    compiled programs; their results for the added rows are dropped."""
    n_rows = slots.shape[1]
    return np.pad(slots, ((0, 0), (0, size_bucket(max(n_rows, MIN_ROWS), ROW_BUCKETS_PER_DOUBLING) - n_rows)))


def _draw_rows(rules, lengths, alpha) -> np.ndarray:
    """(..., capacity + 1 + L) int32 rows of draws: the rules, the length, then alpha's float32 values as
    int32 bits (so that np.unique over rows finds the distinct (list, alpha) pairs)."""
    return np.concatenate([rules, lengths[..., None], np.ascontiguousarray(alpha, np.float32).view(np.int32)],
                          axis=-1).astype(np.int32)


def _split_draw_row(row, n_classes: int):
    """(rules, length, alpha (L,) float32) of a row of ``_draw_rows``, in a traced program."""
    return row[: -n_classes - 1], row[-n_classes - 1], jax.lax.bitcast_convert_type(row[-n_classes:], jnp.float32)


@memory.honours_limit
def fit_brl(
    X,
    y,
    *,
    priors: brl.Priors | None = None,
    antecedents=None,
    min_support: float = 0.1,
    max_cardinality: int = 2,
    max_length: int | None = None,
    feature_names=None,
    num_samples: int | None = None,
    num_warmup: int | None = None,
    num_chains: int = DEFAULT_CHAINS,
    seed: int = 0,
    n_temperatures="auto",
    steps_per_scan: int = STEPS_PER_SCAN,
    target_rhat: float = 1.01,
    min_ess: float = 400.0,
    max_seconds: float | None = 60.0,
    progress_bar: bool | None = None,
    devices=None,
    checkpoint=None,
    memory_limit: int | None = None,
) -> BRLResult:
    """Sample the BRL posterior over rule lists for binary features ``X`` (n, p) and labels ``y``.

    ``X``: 0/1 array or DataFrame (its columns name the features unless ``feature_names`` is given, its index
    the trace's observations), or a table (a DataFrame with a categorical, string or non-0/1 numeric column,
    or an array of strings), whose items are made as :class:`BayesianRuleListClassifier` makes them
    (:func:`~interpretable_zoo.inference.rule_mining.fit_item_encoder`: ``sex=male``, and ``class!=3rd`` for columns of more than two
    values; numeric columns of such a table binned at quartiles); the result then predicts from such tables;
    ``y``: any labels, at least two classes (``result.classes`` keeps their order).

    ``antecedents``: conjunctions as tuples of column indices of X; by default they are mined
    (:func:`~interpretable_zoo.inference.rule_mining.mine_antecedents`) from X's columns and their negations with ``min_support``
    (per class) and ``max_cardinality``. ``max_length`` caps the list length (default
    min(``|A|``, 30)); the sampler then targets the posterior with the length prior truncated there.

    Sampling (``inference.convergence``): ``num_chains`` chains (``DEFAULT_CHAINS``, in two groups that
    learn their proposals apart) of non-reversible parallel tempering
    (``n_temperatures`` rungs per chain, "auto" to choose from the communication barrier, 1 for plain
    Metropolis-Hastings), each rung moved by ``steps_per_scan`` insert, delete, swap, replace and
    neighbour proposals (a rule exchanged for one that differs from it in one item) between swap rounds. By default the
    chains run until the log posterior, list length and mean cardinality reach R-hat <= ``target_rhat``
    and bulk ESS >= ``min_ess``, or ``max_seconds`` pass (then ``result.converged`` is False and a warning
    gives the numbers). ``num_samples``: run exactly that many scans after ``num_warmup`` tuning scans
    (rounded up to whole tuning rounds; None: until a round after the first keeps the number of rungs, at
    most four rounds) instead.
    ``progress_bar``: None shows it outside CI.
    ``devices``: the chains split over several devices (None: as many as divide ``num_chains``; an
    integer or a list of devices; :func:`~interpretable_zoo.inference.tempering.chain_mesh`); the draws do not depend on it.
    ``checkpoint``: a file path or ``inference.checkpoint.Checkpoint(path, every_seconds)``: the run saves its
    state there (every 60 s by default) and a call with the same arguments resumes from it after an
    interruption, giving the draws of an uninterrupted run (``inference.checkpoint``).
    ``memory_limit``: the bytes the fit's memory estimate may reach (None: the memory available); settings
    whose estimate exceeds it are refused before any work, naming them.

    Example:
        >>> data = iz.datasets.load_titanic_table()
        >>> X, names = iz.datasets.one_hot(data.X)  # binary items such as sex=female
        >>> result = iz.fit_brl(X, data.y, feature_names=names, min_support=0.3, num_samples=50, num_warmup=20,
        ...                     num_chains=2, n_temperatures=1, progress_bar=False)
        >>> result.classes
        array([0, 1])
        >>> print(result.explain(outcome="survived").splitlines()[0])  # the first rule of the BRL-point list
        if sex=female and not class=3rd then survived probability ...% (...%-...%)
        >>> result.converged  # far too few draws; leave num_samples=None to run until converged
        False
    """
    priors = brl.Priors() if priors is None else priors
    if not isinstance(priors, brl.Priors):
        raise ValueError(f"priors must be a models.brl.Priors, got {type(priors).__name__}")
    target = convergence.ConvergenceTarget(target_rhat, min_ess, max_seconds)
    check_sampling_options(num_samples, num_warmup, num_chains, seed)
    as_checkpoint(checkpoint)
    convergence.check_temperatures(n_temperatures)
    tempering.chain_mesh(num_chains, devices)  # a bad ``devices`` is named before any work
    if feature_names is None and isinstance(X, pd.DataFrame):
        feature_names = tuple(str(column) for column in X.columns)
    sample_names = tuple(str(name) for name in X.index) if isinstance(X, pd.DataFrame) else None
    encoder = table_columns = None
    if _is_item_table(X):
        if antecedents is not None:
            raise ValueError("antecedents: give them as column indices of a 0/1 X; for a table of categories they "
                             "are mined from its items")
        if np.ndim(X) != 2:
            raise ValueError(f"X: expected a 2-D table, got shape {np.shape(X)}")
        table_columns = resolve_names(feature_names, np.shape(X)[1], argument="feature_names")  # an array's: x0, x1, ...
        frame = _category_table(X, table_columns)
        encoder = fit_item_encoder(frame)
        X = encoder.transform(frame)
    else:
        X = check_binary_matrix(X, dtype=np.uint8)
    classes, codes = _labels(y, X.shape[0])
    hyperpriors.at_point(priors).alpha_vector(len(classes))  # a per-class alpha of the wrong length fails here
    if encoder is not None:  # the table's items hold the negations already
        items, item_names = X, encoder.item_names
        antecedents = tuple(mine_antecedents(items, codes, min_support=min_support, max_cardinality=max_cardinality,
                                             item_columns=encoder.item_columns))
        negations = False
    elif antecedents is None:
        items, item_names, item_columns = binary_items(X, feature_names)
        mined = mine_antecedents(
            items, codes, min_support=min_support, max_cardinality=max_cardinality, item_columns=item_columns
        )
        antecedents = tuple(mined)
        negations = True
    else:
        items = X
        item_names = resolve_names(feature_names, X.shape[1], argument="feature_names")
        antecedents = _check_antecedents(antecedents, X.shape[1])
        negations = False
    capacity = brl.list_capacity(len(antecedents), DEFAULT_MAX_LENGTH if max_length is None else max_length)
    memory.check_memory(
        TRUTH_TABLE_BYTES_PER_CELL * items.shape[0] * len(antecedents),
        f"antecedents: the truth table of {items.shape[0]} samples x {len(antecedents)} antecedents",
        "raise min_support or lower max_cardinality so that fewer antecedents are mined, or pass fewer antecedents",
    )
    counts = neighbour_counts(antecedents)
    memory.check_memory(
        brl_mh.neighbour_table_bytes(counts),
        f"antecedents: the neighbour move's table of {len(antecedents)} antecedents ({counts.sum()} neighbours "
        "in all)",
        "raise min_support or lower max_cardinality so that fewer antecedents are mined, or pass fewer antecedents",
    )
    table = truth_table(items, antecedents)
    cardinalities = np.array([len(a) for a in antecedents], dtype=np.int32)
    kernel_target = brl_mh.make_target(table, cardinalities, len(classes), codes, hyperpriors.at_point(priors),
                                       capacity, steps_per_call=steps_per_scan,
                                       neighbours=antecedent_neighbours(antecedents), tempered=n_temperatures != 1)
    if hyperpriors.hyperpriors_of(priors):  # hyperparameters sampled within the chain; hooks checked first
        kernel_target = hyperpriors.target(hyperpriors.BRL, kernel_target, priors)
    target_check.check_brl(cardinalities, len(classes), priors, capacity)
    static, data = kernel_target
    # chains learn their proposal in groups (brl_mh.learn_proposal)
    if isinstance(static, hyperpriors.HyperStatic):
        data = data._replace(inner=brl_mh.per_chain(data.inner, num_chains))
    else:
        data = brl_mh.per_chain(data, num_chains)
    chunk = scans_per_chunk(steps_per_scan)
    run = convergence.sample(
        hyperpriors.kernel_for(static, KERNEL),
        static,
        data,
        num_chains=num_chains,
        seed=seed,
        n_temperatures=n_temperatures,
        num_samples=num_samples,
        tuning_rounds=convergence.tuning_rounds_for(num_warmup, chunk),
        scans_per_chunk=chunk,
        max_draws=num_samples or convergence.MAX_DRAWS,
        target=target,
        progress_bar=progress_bar,
        devices=devices,
        description="BRL",
        checkpoint=checkpoint,
    )
    return _result(run, kernel_target, antecedents, item_names, classes, priors, negations, table, codes, sample_names,
                   encoder, table_columns)


def _category_table(X, columns: tuple[str, ...]) -> pd.DataFrame:
    """A table of categories (DataFrame or 2-D array) as a DataFrame whose columns, by position, are ``columns``."""
    if np.ndim(X) != 2 or np.shape(X)[1] != len(columns):
        raise ValueError(f"X: expected a table of {len(columns)} columns, got shape {np.shape(X)}")
    frame = X if isinstance(X, pd.DataFrame) else pd.DataFrame(np.asarray(X, dtype=object))
    return frame.set_axis(list(columns), axis=1)


def _is_item_table(X) -> bool:
    """Whether ``X`` is a table to make items of rather than a 0/1 matrix: a DataFrame with a column that is
    not numeric or holds values other than 0 and 1 (binned as the classifier bins it), or an array of
    strings or objects."""
    if isinstance(X, pd.DataFrame):
        columns = (X.iloc[:, j] for j in range(X.shape[1]))
        return any(not pd.api.types.is_numeric_dtype(column) or not column.dropna().isin([0, 1]).all()
                   for column in columns)
    if hasattr(X, "dtype"):  # an array, or a sparse matrix (whose np.asarray is an object scalar)
        return isinstance(X, np.ndarray) and X.dtype.kind in "OUS"
    try:
        return np.asarray(X).dtype.kind in "OUS"
    except ValueError:  # ragged: check_binary_matrix names the problem
        return False


RULE_IN_LIST_SHARE = 0.01
"""``idata``'s ``rule_in_list`` covers the antecedents in at least this share of the draws: the others have an
inclusion probability near 0 and an R-hat that says little, and all of them would take chains x draws bytes
each."""


def _rule_inclusion(rules) -> tuple[np.ndarray, np.ndarray]:
    """The antecedents in at least ``RULE_IN_LIST_SHARE`` of the draws of ``rules`` (chain, draw, position),
    by how often they are drawn, and (chain, draw, antecedent) int8: 1 where the draw's list holds one."""
    flat = rules.reshape(-1, rules.shape[-1])
    counts = np.bincount(flat[flat >= 0], minlength=1)
    shown = np.flatnonzero(counts >= RULE_IN_LIST_SHARE * len(flat))
    shown = shown[np.argsort(-counts[shown], kind="stable")]
    column = np.full(len(counts) + 1, len(shown))  # -1 (padding) and unshown antecedents go to a dropped column
    column[shown] = np.arange(len(shown))
    in_list = np.zeros((len(flat), len(shown) + 1), np.int8)
    in_list[np.arange(len(flat))[:, None], column[flat]] = 1
    return shown, in_list[:, :-1].reshape(*rules.shape[:2], len(shown))


def _pointwise_log_likelihood(by_antecedent, labels, alpha, rules, lengths) -> np.ndarray:
    """(chain, draw, n) float32: :func:`~interpretable_zoo.models.brl.loo_log_predictive` of every training sample under each
    drawn list and alpha (``alpha`` (chain, draw, L); the truth table as its (slots, n) transpose), computed
    once per distinct (list, alpha), :data:`LISTS_PER_CALL` of them per call (the last call padded), so that
    every fit and extension of one shape shares the compiled program."""
    draws = _draw_rows(rules, lengths, alpha)  # (chain, draw, row)
    changed = np.ones(lengths.shape, bool)  # a chain's list often stays for several draws: unique over the changes
    changed[:, 1:] = (draws[:, 1:] != draws[:, :-1]).any(axis=-1)
    changes = np.ascontiguousarray(draws[changed])
    _, first, inverse_changed = np.unique(changes.view(np.dtype((np.void, changes.itemsize * changes.shape[-1])))[:, 0],
                                          return_index=True, return_inverse=True)  # fmt: skip
    unique, inverse = changes[first], inverse_changed[np.cumsum(changed) - 1]
    by_antecedent, labels = jax.device_put((by_antecedent, labels))
    per_list = _in_list_batches(lambda batch: _loo_per_list(by_antecedent, labels, batch, alpha.shape[-1]), unique)
    return per_list[inverse.ravel()].reshape(*lengths.shape, -1)


def _in_whole_batches(rows) -> np.ndarray:
    """``rows`` (one per list) with repeats of the last appended up to a multiple of :data:`LISTS_PER_CALL`,
    so that every batch sent to a compiled per-list program has the same shape."""
    return np.pad(rows, ((0, -len(rows) % LISTS_PER_CALL), (0, 0)), mode="edge")


def _in_list_batches(compiled, rows) -> np.ndarray:
    """``compiled(batch)`` over the ``rows`` (one per list) in batches of :data:`LISTS_PER_CALL`
    (``_in_whole_batches``); one result per row."""
    padded = _in_whole_batches(rows)
    return np.concatenate([np.asarray(compiled(jax.device_put(padded[start : start + LISTS_PER_CALL])))
                           for start in range(0, len(padded), LISTS_PER_CALL)])[: len(rows)]  # fmt: skip


TRUTH_TABLE_BYTES_PER_CELL = 9
"""Peak bytes of a fit per (sample, antecedent) pair: the truth table, its copies (padded, bit-packed, on the
device for the pointwise log-likelihood) and the binary input; measured at 30,000 samples x 2,000 antecedents."""

LISTS_PER_CALL = 256
"""Distinct lists whose pointwise log-likelihood one compiled call computes."""


@jax.jit
def _capture_positions_per_list(by_antecedent, lists):
    """(len(lists), n): the position of the rule capturing each sample under each list (rows of rules then
    length; the capacity for the default rule), one list at a time; the truth table as its (slots, n)
    transpose."""
    return jax.lax.map(lambda row: brl.capture_index(by_antecedent.T, row[:-1], row[-1]), lists)


@functools.partial(jax.jit, static_argnums=3)
def _loo_per_list(by_antecedent, labels, lists, n_classes: int):
    """(len(lists), n): the pointwise terms of each list and alpha (a row of ``_draw_rows``), one at a
    time (the memory of one list's capture counts); the truth table as its (slots, n) transpose."""

    def one(row):
        rules, length, alpha = _split_draw_row(row, n_classes)
        return brl.loo_log_predictive(by_antecedent.T, labels, alpha, rules, length).astype(jnp.float32)

    return jax.lax.map(one, lists)


def _result(run, kernel_target, antecedents, item_names, classes, priors, negations, table, codes,
            sample_names=None, encoder=None, table_columns=None) -> BRLResult:
    """The :class:`BRLResult` of a finished run (warning when draws reach the list-length cap)."""
    rules, lengths = run.records["rules"], run.records["length"]
    capacity = rules.shape[-1]
    if capacity < len(antecedents) and (lengths == capacity).any():
        warnings.warn(
            f"max_length: {np.mean(lengths == capacity):.1%} of the draws reach the cap of {capacity} rules; "
            "raise max_length for the untruncated posterior",
            stacklevel=3,
        )
    return BRLResult(antecedents, item_names, classes, priors, negations, table, codes, run, kernel_target,
                     sample_names, encoder, table_columns)


@dataclass(frozen=True)
class Rule:
    """One rule of a fitted rule list, as data.

    ``conditions``: the items its antecedent joins ("if all of these"), empty for the default rule (the
    last, "else"); ``antecedent``: its index in ``result.antecedents`` (None for the default rule);
    ``probabilities``: the posterior mean of each class's probability under the rule, E[theta_j | data]
    with theta_j | data ~ Dirichlet(alpha + N_j) (Letham sec. 2.1), in the order of ``classes_``;
    ``counts``: N_j, the training labels of each class that the rule captures (those that no earlier rule
    captured); ``prediction``: its most probable class. Every field holds plain Python values, so that
    ``json.dumps(dataclasses.asdict(rule))`` works.
    """

    conditions: tuple[str, ...]
    antecedent: int | None
    probabilities: tuple[float, ...]
    counts: tuple[int, ...]
    prediction: object


class BayesianRuleListClassifier(ExplainedEstimatorMixin, ClassifierMixin, BaseEstimator):
    """scikit-learn BRL classifier for tables with mixed column types (pandas DataFrames or arrays).

    Columns become items (:func:`~interpretable_zoo.inference.rule_mining.fit_item_encoder`: categorical values and, with
    ``negations``, their negations; numeric quantile thresholds with ``n_bins``), antecedents of at
    most ``max_cardinality`` items are mined per class, and :func:`fit_brl` samples the posterior under
    ``priors`` (a ``models.brl.Priors``; None: the model file's defaults), with the sampling options
    of :func:`fit_brl`. ``estimate`` chooses BRL-point or BRL-post predictions. Numeric columns must be
    finite; at predict, a categorical value unseen in fit matches none of its column's items (with a
    warning naming the column).

    After ``fit``: ``result_`` (the :class:`BRLResult`), ``classes_``, ``encoder_`` (the items),
    ``rules_`` (the BRL-point list as :class:`Rule` records, the default rule last); ``print(clf)``
    shows the list with credible intervals.

    Example:
        >>> data = iz.datasets.load_titanic_table()  # a DataFrame of categories: class, age, sex
        >>> clf = iz.BayesianRuleListClassifier(min_support=0.02, num_samples=50, num_warmup=20, num_chains=2,
        ...                                     n_temperatures=1, progress_bar=False).fit(data.X, data.y)
        >>> print(clf)  # the BRL-point list with 95% credible intervals
        if class=1st and sex=female then y=1 probability ...% (...%-...%)
        else if class=3rd and sex=male then y=1 probability ...
        ...
        else y=1 probability ...
        >>> clf.rules_[0].conditions, int(clf.rules_[0].prediction)
        (('class=1st', 'sex=female'), 1)
        >>> round(clf.score(data.X, data.y), 2)
        0.79
    """

    def __init__(
        self,
        *,
        priors: brl.Priors | None = None,
        min_support: float = 0.1,
        max_cardinality: int = 2,
        n_bins: int = 4,
        negations: bool = True,
        max_length: int | None = None,
        num_samples: int | None = None,
        num_warmup: int | None = None,
        num_chains: int = DEFAULT_CHAINS,
        seed: int = 0,
        n_temperatures="auto",
        steps_per_scan: int = STEPS_PER_SCAN,
        target_rhat: float = 1.01,
        min_ess: float = 400.0,
        max_seconds: float | None = 60.0,
        estimate: str = "point",
        progress_bar: bool | None = None,
        devices=None,
        checkpoint=None,
    ):
        self.priors = priors
        self.min_support = min_support
        self.max_cardinality = max_cardinality
        self.n_bins = n_bins
        self.negations = negations
        self.max_length = max_length
        self.num_samples = num_samples
        self.num_warmup = num_warmup
        self.num_chains = num_chains
        self.seed = seed
        self.n_temperatures = n_temperatures
        self.steps_per_scan = steps_per_scan
        self.target_rhat = target_rhat
        self.min_ess = min_ess
        self.max_seconds = max_seconds
        self.estimate = estimate
        self.progress_bar = progress_bar
        self.devices = devices
        self.checkpoint = checkpoint

    @atomic_fit
    def fit(self, X, y):
        if self.estimate not in ("point", "post"):
            raise ValueError(f"estimate must be 'point' or 'post', got {self.estimate!r}")
        X = check_estimator_input(self, X, reset=True, tables=True)
        classes, codes = _labels(y, X.shape[0])
        self.encoder_: ItemEncoder = fit_item_encoder(X, n_bins=self.n_bins, negations=self.negations)
        items = self.encoder_.transform(X)
        antecedents = mine_antecedents(
            items,
            codes,
            min_support=self.min_support,
            max_cardinality=self.max_cardinality,
            item_columns=self.encoder_.item_columns,
        )
        self.result_ = fit_brl(
            items,
            classes[codes],
            priors=self.priors,
            antecedents=antecedents,
            max_length=self.max_length,
            feature_names=self.encoder_.item_names,
            num_samples=self.num_samples,
            num_warmup=self.num_warmup,
            num_chains=self.num_chains,
            seed=self.seed,
            n_temperatures=self.n_temperatures,
            steps_per_scan=self.steps_per_scan,
            target_rhat=self.target_rhat,
            min_ess=self.min_ess,
            max_seconds=self.max_seconds,
            progress_bar=self.progress_bar,
            devices=self.devices,
            checkpoint=self.checkpoint,
        )
        self.classes_ = self.result_.classes
        return self

    @property
    def rules_(self) -> list[Rule]:
        """The BRL-point list as data, one :class:`Rule` per rule, the default rule last."""
        check_is_fitted(self)
        result = self.result_
        rules = result.point_list()
        counts = result.rule_counts(rules)
        probabilities = result.rule_probabilities(rules)
        antecedents = list(rules) + [None]
        return [
            Rule(
                conditions=() if r is None else tuple(result.item_names[i] for i in result.antecedents[r]),
                antecedent=None if r is None else int(r),
                probabilities=tuple(map(float, p)),
                counts=tuple(map(int, n)),
                prediction=plain(self.classes_[int(np.argmax(p))]),
            )
            for r, p, n in zip(antecedents, probabilities, counts)
        ]

    def predict_proba(self, X) -> np.ndarray:
        check_is_fitted(self)
        X = check_estimator_input(self, X, reset=False, tables=True)
        return self.result_.predict_proba(self.encoder_.transform(X), estimate=self.estimate)

    def predict(self, X) -> np.ndarray:
        check_is_fitted(self)
        return self.classes_[np.argmax(self.predict_proba(X), axis=1)]

    def explain(self, **kwargs) -> str:
        check_is_fitted(self)
        return self.result_.explain(**kwargs)
