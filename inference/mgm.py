"""Mind the Gap, public layer: ``fit_mgm``, ``fit_mgm_sweep``, the result with its explanation, ``MGMClusterer``.

The fit follows the paper's protocol (sec. 3-4): agglomerative feature extraction with coordinate-ascent
ELBO (``interpretable_zoo.inference.mgm_vi``), ``restarts`` restarts (vmapped, ``RUNS_PER_CALL`` at most
per compiled call) keeping the best ELBO, and for ``fit_mgm_sweep`` a sweep over the number of clusters
keeping the best ELBO.
"""

from __future__ import annotations

import time
from collections.abc import Iterable
from dataclasses import dataclass, field
from functools import partial

import jax
import jax.numpy as jnp
import numpy as np
import pandas as pd
from sklearn.base import BaseEstimator, ClusterMixin
from sklearn.utils.validation import check_is_fitted

from interpretable_zoo.inference import convergence, memory, mgm_vi, progress, target_check
from interpretable_zoo.inference.explanation import ExplainedResultMixin, records
from interpretable_zoo.inference.estimators import ExplainedEstimatorMixin, atomic_fit
from interpretable_zoo.inference.names import resolve_names
from interpretable_zoo.inference.shapes import size_bucket
from interpretable_zoo.inference.validation import (
    check_binary_matrix,
    check_estimator_input,
    check_flag,
    check_n_clusters,
    check_number,
    check_positive_int,
    check_real_matrix,
    check_seed,
)
from interpretable_zoo.models.mgm import AND, FORMULA_NAMES, Priors


@dataclass(repr=False)
class MGMResult(ExplainedResultMixin):
    """A fitted MGM (best restart): extraction, selection and clustering, with the ELBO traces of all restarts.

    Attributes:
        elbo: ELBO of the returned fit.
        n_iterations: merge iterations of the search of the returned fit (at most ``max_iter``).
        elbo_traces: per restart, the ELBO after the start (annealing and cluster moves on singleton groups),
            after each search iteration and after the final cluster moves; never decreasing.
        groups: member dimensions of each extracted group (index tuples, occupied groups only).
        formulas: "OR" or "AND" per group.
        importance: q(y_g = 1), the probability that the group is important (bi-modal).
        distinguishing: q(y_g = 1 and the t_gk of the occupied clusters not all equal): important, with
            occupied clusters in both modes (clusters that are no observation's most probable one, whose t
            follow the prior, do not count).
        presence: E q(beta_gk), (n_groups, K), the probability that group g is present in cluster k.
        high_mode: q(t_gk = 1), (n_groups, K).
        responsibilities: q(z_n), (N, K); ``labels`` their argmax.
        cluster_weights: E q(pi).
        sweep_elbo, sweep_restart_elbo: from ``fit_mgm_sweep``, each number of clusters' best ELBO and the
            ELBO of each of its restarts (the paper keeps the number with the highest).

    Example:
        >>> import numpy as np
        >>> faces = [[1, 0, 0, 0, 0, 0], [0, 1, 0, 0, 0, 0], [1, 1, 0, 0, 0, 0],  # vacation: hat OR sunglasses
        ...          [0, 0, 1, 0, 0, 0], [0, 0, 0, 1, 0, 0], [0, 0, 1, 1, 0, 0],  # winter: earmuffs OR scarf
        ...          [0, 0, 0, 0, 1, 0], [0, 0, 0, 0, 0, 1], [0, 0, 0, 0, 1, 1]]  # student: pencil OR glasses
        >>> X = np.repeat(faces, 5, axis=0)  # 45 faces, 15 of each cluster
        >>> names = ["hat", "sunglasses", "earmuffs", "scarf", "pencil", "glasses"]
        >>> result = iz.fit_mgm(X, 3, restarts=2, feature_names=names)
        >>> sorted(result.group_name(g) for g in range(len(result.groups)))
        ['earmuffs OR scarf', 'hat OR sunglasses', 'pencil OR glasses']
        >>> result.responsibilities.shape, result.presence.shape  # (observations, clusters), (groups, clusters)
        ((45, 3), (3, 3))
        >>> result.presence.max(1).round(2), result.presence.min(1).round(2)  # E[beta_gk]: each group marks one cluster
        (array([0.96, 0.96, 0.96]), array([0.04, 0.04, 0.04]))
    """

    elbo: float
    elbo_traces: list[np.ndarray]
    n_clusters: int
    feature_names: tuple[str, ...]
    groups: list[tuple[int, ...]]
    formulas: list[str]
    importance: np.ndarray
    distinguishing: np.ndarray
    presence: np.ndarray
    high_mode: np.ndarray
    responsibilities: np.ndarray
    cluster_weights: np.ndarray
    priors: Priors
    exact_or: bool = False
    n_iterations: int = 0
    sweep_elbo: dict[int, float] = field(default_factory=dict)
    sweep_restart_elbo: dict[int, np.ndarray] = field(default_factory=dict)
    _phi: np.ndarray | None = field(default=None, repr=False)
    _tau: np.ndarray | None = field(default=None, repr=False)

    @property
    def labels(self) -> np.ndarray:
        return self.responsibilities.argmax(1)

    @property
    def occupied_clusters(self) -> np.ndarray:
        """Clusters that are the most probable cluster of at least one observation; explanations show only these."""
        return np.unique(self.labels)

    def group_name(self, g: int, max_members: int | None = None) -> str:
        """The group as a formula, e.g. ``hat OR sunglasses`` (``(+n more)`` past ``max_members``)."""
        names = [self.feature_names[d] for d in self.groups[g]]
        shown = names if max_members is None or len(names) <= max_members else names[:max_members]
        text = f" {self.formulas[g]} ".join(shown)
        return text if len(shown) == len(names) else f"{text} {self.formulas[g]} ... (+{len(names) - len(shown)} more)"

    def distinguishing_groups(self, threshold: float = 0.5) -> list[int]:
        """Groups with distinguishing probability above ``threshold`` (a probability), widest gap across
        clusters first."""
        threshold = check_number(threshold, "threshold")
        if not 0.0 <= threshold <= 1.0:
            raise ValueError(f"threshold: a distinguishing probability in [0, 1], got {threshold!r}")
        chosen = np.flatnonzero(self.distinguishing > threshold)
        gaps = self.presence[chosen].max(1) - self.presence[chosen].min(1)
        return [int(g) for g in chosen[np.argsort(-gaps, kind="stable")]]

    def majority_names(self, y, target_names=None) -> list[str]:
        """A name per cluster from the majority true label of its members (as in the paper's fig. 3)."""
        y = np.asarray(y)
        names = []
        for k in range(self.n_clusters):
            members = y[self.labels == k]
            if members.size == 0:
                names.append(f"cluster {k}")
                continue
            values, counts = np.unique(members, return_counts=True)
            top = values[counts.argmax()]
            names.append(str(target_names[int(top)]) if target_names is not None else str(top))
        return names

    def cluster_headers(self, cluster_names=None) -> list[str]:
        """A column name per occupied cluster, ``<name> (n=<members>)`` (``cluster k`` by default); a name that
        several clusters share gets its cluster index."""
        sizes = np.bincount(self.labels, minlength=self.n_clusters)
        names = list(cluster_names) if cluster_names is not None else [f"cluster {k}" for k in range(self.n_clusters)]
        if len(names) != self.n_clusters:
            raise ValueError(f"cluster_names: expected {self.n_clusters} names, got {len(names)}")
        shown = [names[k] for k in self.occupied_clusters]
        return [f"{names[k]}{f' [{k}]' if shown.count(names[k]) > 1 else ''} (n={sizes[k]})"
                for k in self.occupied_clusters]

    def explain_frame(self, cluster_names=None, threshold: float = 0.5) -> pd.DataFrame:
        """The fig. 3 table as a DataFrame: a row per distinguishing group (widest gap first), indexed by its
        formula, with ``formula`` (AND/OR), ``members`` (feature names), ``importance`` q(y_g = 1),
        ``distinguishing``, ``gap`` (largest minus smallest presence over the occupied clusters), then a
        column per occupied cluster (:meth:`cluster_headers`): E[beta_gk], the probability that the group
        is present in a member of the cluster."""
        rows = self.distinguishing_groups(threshold)
        columns = self.occupied_clusters
        presence = self.presence[np.ix_(rows, columns)].reshape(len(rows), len(columns))
        frame = pd.DataFrame(
            {
                "formula": [self.formulas[g] for g in rows],
                "members": [[self.feature_names[d] for d in self.groups[g]] for g in rows],
                "importance": self.importance[rows],
                "distinguishing": self.distinguishing[rows],
                "gap": presence.max(1) - presence.min(1),
            },
            index=pd.Index([self.group_name(g) for g in rows], name="group"),
        )
        for header, column in zip(self.cluster_headers(cluster_names), presence.T):
            frame[header] = column
        return frame

    def explain(self, cluster_names=None, threshold: float = 0.5, max_members: int = 8) -> str:
        """The fig. 3 table (:meth:`explain_frame`) as text: rows the distinguishing groups as formulas (at
        most ``max_members`` members shown), columns clusters, cells E[beta_gk]."""
        frame = self.explain_frame(cluster_names, threshold)
        headers = self.cluster_headers(cluster_names)
        labels = [self.group_name(g, max_members) for g in self.distinguishing_groups(threshold)]
        width = max([len(s) for s in labels] + [len("group")])
        cells = [max(len(h), 5) for h in headers]
        lines = [
            f"Mind the Gap: {len(frame)} distinguishing of {len(self.groups)} extracted groups, "
            f"{len(headers)} occupied of {self.n_clusters} clusters, ELBO {self.elbo:.2f}",
            "cells: probability that the group is present in a member of the cluster",
            "group".ljust(width) + "  " + "  ".join(h.rjust(c) for h, c in zip(headers, cells)),
        ]
        for label, (_, row) in zip(labels, frame.iterrows()):
            values = "  ".join(f"{row[h]:.2f}".rjust(c) for h, c in zip(headers, cells))
            lines.append(label.ljust(width) + "  " + values)
        if frame.empty:
            lines.append("(no group has a gap across clusters)")
        return "\n".join(lines)

    def to_dict(self, cluster_names=None, threshold: float = 0.5) -> dict:
        """:meth:`explain_frame`'s groups (``groups``) with the clusters and the fit's facts, JSON-ready."""
        sizes = np.bincount(self.labels, minlength=self.n_clusters)
        return {
            "model": "MGM",
            "elbo": self.elbo,
            "n_clusters": self.n_clusters,
            "clusters": [{"cluster": int(k), "column": h, "size": int(sizes[k]), "weight": float(self.cluster_weights[k])}
                         for k, h in zip(self.occupied_clusters, self.cluster_headers(cluster_names))],
            "n_groups": len(self.groups),
            "groups": records(self.explain_frame(cluster_names, threshold)),
        }

    def _card(self):
        facts = {"ELBO": self.elbo, "clusters": f"{len(self.occupied_clusters)} occupied of {self.n_clusters}",
                 "groups": len(self.groups), "restarts": len(self.elbo_traces)}
        return "Mind the Gap", facts, self.explain_frame().drop(columns="members"), None

    def plot_heatmap(self, ax=None, cluster_names=None, threshold: float = 0.5, max_members: int = 4):
        """Heatmap of E[beta_gk] for the distinguishing groups: ``diagnostics.plots.plot_gap_heatmap``."""
        from interpretable_zoo.diagnostics.plots import plot_gap_heatmap

        return plot_gap_heatmap(self, cluster_names=cluster_names, threshold=threshold, max_members=max_members, ax=ax)

    def plot_sweep(self, axes=None, cluster_names=None, threshold: float = 0.5, max_members: int = 4):
        """ELBO by number of clusters beside the chosen fit's heatmap: ``diagnostics.plots.plot_elbo_sweep``."""
        from interpretable_zoo.diagnostics.plots import plot_elbo_sweep

        return plot_elbo_sweep(self, cluster_names=cluster_names, threshold=threshold, max_members=max_members,
                               axes=axes)

    def _present(self, X) -> np.ndarray:
        array = check_binary_matrix(X)
        if array.shape[1] != len(self.feature_names):
            raise ValueError(f"X: has {array.shape[1]} columns, the model was fitted on {len(self.feature_names)}")
        membership = np.zeros((array.shape[1], len(self.groups)))
        for g, members in enumerate(self.groups):
            membership[list(members), g] = 1
        ones = array @ membership
        sizes = membership.sum(0)
        is_and = np.array([f == FORMULA_NAMES[AND] for f in self.formulas])
        return np.where(is_and, ones == sizes, ones > 0).astype(float)

    def predict_proba(self, X) -> np.ndarray:
        """q(z_n) for new observations by (U6) with the fitted q(beta), q(pi). Rows and groups go to the
        compiled program padded as the search pads observations and dimensions (padded groups masked out,
        padded rows dropped after), so that the folds of a cross-validation share it."""
        present = self._present(X)
        n_rows, n_groups = present.shape
        groups = _bucket(len(self.feature_names), MIN_COLUMNS)  # as many as the search's padded dimensions
        present = np.pad(present, ((0, _bucket(n_rows, MIN_ROWS) - n_rows), (0, groups - n_groups)))
        phi = np.pad(self._phi, ((0, groups - n_groups), (0, 0), (0, 0)), constant_values=1.0)  # a proper Beta
        return np.asarray(_responsibilities(phi, self._tau, present, np.arange(groups) < n_groups))[:n_rows]

    def predict(self, X) -> np.ndarray:
        return self.predict_proba(X).argmax(1)


@jax.jit
def _responsibilities(phi, tau, present, groups):
    """q(z_n) (U6) of observations with group indicators ``present`` under the fitted q(beta), q(pi), over
    the groups where ``groups`` is True."""
    return jax.nn.softmax(mgm_vi.cluster_logits(phi, tau, present, groups), -1)


def _result_from(search: mgm_vi.SearchResult, n_clusters, names, priors, exact_or) -> MGMResult:
    """The restart with the highest ELBO of ``search`` (restarts stacked) as an ``MGMResult``."""
    best = int(np.nanargmax(np.asarray(search.elbo)))
    take = lambda v: np.asarray(v[best])  # noqa: E731
    ext, params = jax.tree.map(take, search.ext), jax.tree.map(take, search.params)
    observations = ext.observed > 0  # the padding rows left out
    slots = np.flatnonzero(ext.sizes > 0)
    groups = [tuple(int(d) for d in np.flatnonzero(ext.assignment == g)) for g in slots]
    lam = params.lam[slots, :n_clusters].astype(float)
    eta = params.eta[slots].astype(float)
    phi = params.phi[slots, :n_clusters].astype(float)
    nu, tau = params.nu[observations, :n_clusters], params.tau[:n_clusters]
    occupied = np.isin(np.arange(n_clusters), nu.argmax(1))
    all_equal = np.prod(lam[:, occupied], 1) + np.prod(1 - lam[:, occupied], 1)
    lengths = np.asarray(search.n_iterations) + 2  # the start, the iterations, the final cluster moves
    traces = [np.asarray(t[:n], float) for t, n in zip(np.asarray(search.trace), lengths)]
    return MGMResult(
        elbo=float(search.elbo[best]),
        elbo_traces=traces,
        n_clusters=n_clusters,
        feature_names=names,
        groups=groups,
        formulas=[FORMULA_NAMES[int(f)] for f in ext.formula[slots]],
        importance=eta,
        distinguishing=eta * (1 - all_equal),
        presence=phi[..., 0] / phi.sum(-1),
        high_mode=lam,
        responsibilities=nu.astype(float),
        cluster_weights=tau / tau.sum(),
        priors=priors,
        exact_or=exact_or,
        n_iterations=int(search.n_iterations[best]),
        _phi=phi,
        _tau=tau.astype(float),
    )


def _check_priors(priors) -> Priors:
    if priors is None:
        return Priors()
    if not isinstance(priors, Priors):
        raise ValueError(f"priors: must be an interpretable_zoo.models.mgm.Priors (e.g. Priors(**values)), "
                         f"got {type(priors).__name__}")  # fmt: skip
    return priors


DEFAULT_PROPOSALS = 20
"""``n_proposals`` of the fits: merge proposals per iteration."""

PROPOSALS_PER_PAIR = 4
"""``n_proposals`` may reach this many times the pairs of groups, D (D - 1) / 2, or :data:`DEFAULT_PROPOSALS`:
proposals drawn with replacement reach a share 1 - e^-4 (98 %) of the pairs by then, and a repeated pair
scores the same merge again."""


def _settings(X, feature_names, priors, restarts, max_iter, seed, n_proposals, rel_tol, exact_or):
    """Checked arguments shared by ``fit_mgm`` and ``fit_mgm_sweep``: (array, names, priors, config, restarts, seed)."""
    array = check_binary_matrix(X)
    columns = tuple(str(c) for c in X.columns) if hasattr(X, "columns") else None
    restarts = check_positive_int(restarts, "restarts")
    max_iter = check_positive_int(max_iter, "max_iter", minimum=0)
    n_proposals = check_positive_int(n_proposals, "n_proposals")
    pairs = array.shape[1] * (array.shape[1] - 1) // 2
    most_proposals = max(PROPOSALS_PER_PAIR * pairs, DEFAULT_PROPOSALS)
    if n_proposals > most_proposals:
        raise ValueError(
            f"n_proposals: {n_proposals} merge proposals per iteration for {array.shape[1]} dimensions, whose groups "
            f"form at most {pairs} pairs; drawn with replacement, {PROPOSALS_PER_PAIR} per pair reach all but 2% of "
            f"them, and more only repeat pairs (each costing the same): at most {most_proposals}"
        )
    if not 0 <= check_number(rel_tol, "rel_tol") < 1:
        raise ValueError(f"rel_tol: must lie in [0, 1), got {rel_tol}")
    names = resolve_names(feature_names if feature_names is not None else columns, array.shape[1],
                          argument="feature_names")  # fmt: skip
    config = mgm_vi.SearchConfig(max_iter=max_iter, n_proposals=n_proposals, rel_tol=rel_tol,
                                  exact_or=check_flag(exact_or, "exact_or"))  # fmt: skip
    priors = _check_priors(priors)
    target_check.check_mgm(priors, config.exact_or)  # the model file's program is the one the ELBO assumes
    mgm_vi.check_expected_log_prior(priors)  # and the ELBO's prior terms are its log density
    return array, names, priors, config, restarts, check_seed(seed)


def _restart_keys(seed: int, n_clusters: int, restarts: int):
    """PRNG keys (restarts, 2) of the restarts with ``n_clusters`` clusters: a fit and a sweep draw the same."""
    return _fold_in_restarts(jax.random.PRNGKey(seed), n_clusters, restarts)


@partial(jax.jit, static_argnames="restarts")
def _fold_in_restarts(key, n_clusters, restarts: int):
    base = jax.random.fold_in(key, n_clusters)
    return jax.vmap(lambda r: jax.random.fold_in(base, r))(jnp.arange(restarts))


BUCKETS_PER_DOUBLING = 4
"""The search pads the observations, dimensions and clusters to ``shapes.size_bucket(n, 4)`` (at most a
quarter more), and to at least MIN_ROWS observations, MIN_COLUMNS dimensions and MIN_CLUSTERS clusters."""
MIN_ROWS, MIN_COLUMNS, MIN_CLUSTERS = 128, 16, 4
"""Every data set up to 128 x 16 shares one compiled search (about 20 s to compile on a laptop core); a warm
search of that size takes a fraction of a second, so small fits, cross-validation folds and scikit-learn's
estimator checks pay for one compilation, not one per size."""


def _bucket(n: int, least: int) -> int:
    """The padded size of ``n`` observations, dimensions or clusters (at least ``least``)."""
    return size_bucket(max(n, least), BUCKETS_PER_DOUBLING)


def _padded_data(array):
    """(W, observed, features): the data as float32 with zero rows and columns appended up to its size
    buckets, and the masks of the rows that are observations and the columns that are dimensions; fits whose
    sizes share buckets share one compiled search."""
    n_obs, n_dims = array.shape
    W = np.zeros((_bucket(n_obs, MIN_ROWS), _bucket(n_dims, MIN_COLUMNS)), np.float32)
    W[:n_obs, :n_dims] = array
    return W, (np.arange(W.shape[0]) < n_obs).astype(np.float32), (np.arange(W.shape[1]) < n_dims).astype(np.float32)


RUNS_PER_CALL = 64
"""Searches (restarts x numbers of clusters) that one vmapped call runs at most. More run in groups of this
many, one group after the other, the last padded with repeats of its last search so that all groups share
one compiled program: a call stays bounded, so Ctrl-C is prompt, and the search projects its time from its
second call (``convergence.TimeProjection``)."""


def _in_groups(search, keys, active, projection: convergence.TimeProjection):
    """``search(keys, active)`` of all runs (rows), in groups of at most :data:`RUNS_PER_CALL` rows, each
    call timed for the search's ``projection``."""
    runs, parts = len(keys), []
    for first in range(0, runs, RUNS_PER_CALL):
        rows = np.minimum(np.arange(first, first + RUNS_PER_CALL), runs - 1) if runs > RUNS_PER_CALL else slice(None)
        started = time.perf_counter()
        group = search(keys[rows], active[rows])
        projection.record(time.perf_counter() - started, 1)
        parts.append(jax.tree.map(lambda leaf, kept=min(RUNS_PER_CALL, runs - first): leaf[:kept], group))
    return parts[0] if len(parts) == 1 else jax.tree.map(lambda *leaves: np.concatenate(leaves), *parts)


def _search(array, cluster_numbers, width, per_batch, *, restarts, seed, priors, config, bar=None,
            on_merges=None) -> dict:
    """Every restart for every number of clusters, ``per_batch`` numbers of clusters per vmapped call (the last
    call padded with repeats, so that all calls share one compiled program), all padded to the bucket of
    ``width`` clusters, and the data to its buckets (``_padded_data``); returns {number of clusters: its
    restarts' ``SearchResult``, stacked}. ``bar`` counts the numbers done; ``on_merges`` is called with the
    merge iterations of each compiled call (``mgm_vi.search_batch``)."""
    padded = _padded_data(np.asarray(array))
    width = _bucket(width, MIN_CLUSTERS)
    runs = per_batch * restarts
    memory.check_memory(
        min(runs, RUNS_PER_CALL) * mgm_vi.search_bytes(*padded[0].shape, width, config),
        f"restarts, n_proposals, max_iter: {min(runs, RUNS_PER_CALL)} searches run at once ({restarts} restarts"
        f"{f' x {per_batch} numbers of clusters' if per_batch > 1 else ''}), each with {config.n_proposals} "
        f"merge proposals per iteration and an ELBO trace of max_iter = {config.max_iter} iterations",
        "lower restarts, n_proposals or max_iter" + (" or clusters_per_batch" if per_batch > 1 else ""),
    )
    W, observed, features = jax.device_put(padded)

    def search(keys, active):
        return mgm_vi.search_batch(keys, W, observed, features, jnp.asarray(active), priors=priors, config=config,
                                   on_merges=on_merges)  # fmt: skip

    n_calls = -(-len(cluster_numbers) // per_batch) * -(-runs // RUNS_PER_CALL)
    numbers = f" for {len(cluster_numbers)} numbers of clusters" if len(cluster_numbers) > 1 else ""

    def message(left, _, per_call):
        return (f"MGM: restarts={restarts}{numbers} runs as {n_calls} compiled calls, projected to take "
                f"{convergence.format_seconds(left)} more at {convergence.format_seconds(per_call)} a call, as "
                "timed on the last; Ctrl-C stops the search after the call in flight.")

    projection = convergence.TimeProjection(n_calls, message, stacklevel=4)
    results = {}
    for first in range(0, len(cluster_numbers), per_batch):
        if bar is not None:
            bar.set_postfix_str(f"{cluster_numbers[first]} clusters")
        chunk = cluster_numbers[first : first + per_batch]
        padded = chunk + chunk[-1:] * (per_batch - len(chunk))
        keys = jnp.concatenate([_restart_keys(seed, k, restarts) for k in padded])
        active = np.repeat(np.arange(width)[None, :] < np.array(padded)[:, None], restarts, axis=0)
        batch = _in_groups(search, keys, active, projection)
        for c, k in enumerate(chunk):
            rows = slice(c * restarts, (c + 1) * restarts)
            results[k] = jax.tree.map(lambda leaf, rows=rows: leaf[rows], batch)
        if bar is not None:
            bar.update(len(chunk))
    return results


@memory.honours_limit
def fit_mgm(
    X,
    n_clusters: int,
    *,
    priors: Priors | None = None,
    restarts: int = 5,
    max_iter: int = 40,
    seed: int = 0,
    feature_names=None,
    n_proposals: int = DEFAULT_PROPOSALS,
    rel_tol: float = 0.1,
    exact_or: bool = False,
    max_clusters: int | None = None,
    progress_bar: bool | None = None,
    memory_limit: int | None = None,
) -> MGMResult:
    """Fit MGM with ``n_clusters`` clusters: agglomerative extraction + coordinate-ascent ELBO, best of ``restarts``.

    ``X`` is a binary (N, D) array or DataFrame; one column (D = 1) is a model too, of one group whose
    presence rate alone can tell clusters apart. The restarts run together (vmapped, in groups of at most
    ``RUNS_PER_CALL``); each starts from a k-means++ / k-means clustering, anneals, and moves clusters by
    split-merge (``interpretable_zoo.inference.mgm_vi``).
    ``rel_tol`` stops a restart once an iteration improves the ELBO by less than that fraction of the first
    iteration's improvement (the paper's "0.1 relative"); ``exact_or`` uses the exact OR of eq. 2 instead of
    the relaxed one of eq. 3. The search is compiled for ``max_clusters`` clusters (default ``n_clusters``),
    observations and dimensions, each rounded up to a size bucket (at most a quarter more; at least 4 clusters,
    128 observations and 16 dimensions), the padding masked out: fits whose sizes share buckets, with the same
    ``restarts``, share its compiled programs whatever the data, prior values and seed. ``progress_bar``
    counts the merge iterations, at most ``max_iter`` (None: a bar outside CI).
    ``memory_limit``: the bytes the fit's memory estimate may reach (None: the memory available); settings
    whose estimate exceeds it are refused before any work, naming them.

    Example:
        >>> import numpy as np
        >>> faces = [[1, 0, 0, 0, 0, 0], [0, 1, 0, 0, 0, 0], [1, 1, 0, 0, 0, 0],  # vacation: hat OR sunglasses
        ...          [0, 0, 1, 0, 0, 0], [0, 0, 0, 1, 0, 0], [0, 0, 1, 1, 0, 0],  # winter: earmuffs OR scarf
        ...          [0, 0, 0, 0, 1, 0], [0, 0, 0, 0, 0, 1], [0, 0, 0, 0, 1, 1]]  # student: pencil OR glasses
        >>> X = np.repeat(faces, 5, axis=0)  # 45 faces, 15 of each cluster
        >>> names = ["hat", "sunglasses", "earmuffs", "scarf", "pencil", "glasses"]
        >>> result = iz.fit_mgm(X, 3, restarts=2, feature_names=names)
        >>> print(result.explain().splitlines()[0])
        Mind the Gap: 3 distinguishing of 3 extracted groups, 3 occupied of 3 clusters, ELBO -135...
        >>> sorted(result.group_name(g) for g in result.distinguishing_groups())
        ['earmuffs OR scarf', 'hat OR sunglasses', 'pencil OR glasses']
        >>> [len(set(result.labels[i:i + 15])) for i in (0, 15, 30)]  # each planted cluster found whole
        [1, 1, 1]
    """
    array, names, priors, config, restarts, seed = _settings(X, feature_names, priors, restarts, max_iter, seed,
                                                             n_proposals, rel_tol, exact_or)  # fmt: skip
    n_clusters = check_n_clusters(n_clusters, array.shape[0])
    width = n_clusters if max_clusters is None else check_n_clusters(max_clusters, array.shape[0], "max_clusters")
    if width < n_clusters:
        raise ValueError(f"max_clusters: {max_clusters} is below n_clusters ({n_clusters})")
    bar = progress.bar(progress_bar, "MGM search", total=config.max_iter * -(-restarts // RUNS_PER_CALL),
                       unit=" merge iterations")
    try:
        searches = _search(array, [n_clusters], width, 1, restarts=restarts, seed=seed, priors=priors, config=config,
                           on_merges=None if bar is None else bar.update)  # fmt: skip
    finally:
        if bar is not None:
            bar.close()
    return _result_from(searches[n_clusters], n_clusters, names, priors, config.exact_or)


@memory.honours_limit
def fit_mgm_sweep(
    X,
    n_clusters=range(4, 17),
    *,
    priors: Priors | None = None,
    restarts: int = 5,
    max_iter: int = 40,
    seed: int = 0,
    feature_names=None,
    n_proposals: int = DEFAULT_PROPOSALS,
    rel_tol: float = 0.1,
    exact_or: bool = False,
    clusters_per_batch: int = 1,
    progress_bar: bool | None = None,
    memory_limit: int | None = None,
) -> MGMResult:
    """``fit_mgm`` for every number of clusters in ``n_clusters`` (paper: 4 to 16), keeping the best ELBO.

    The result is that fit, with ``sweep_elbo`` (number of clusters -> best ELBO), ``sweep_restart_elbo``
    (-> the ELBO of every restart) and ``plot_sweep``. Every fit is padded to the largest number of clusters,
    so all share one compiled search; ``clusters_per_batch`` numbers of clusters run in one vmapped call
    (each fit with K clusters equals ``fit_mgm(X, K, max_clusters=max(n_clusters))``). ``progress_bar``
    counts the numbers of clusters searched (None: a bar outside CI).
    ``memory_limit``: the bytes the fit's memory estimate may reach (None: the memory available); settings
    whose estimate exceeds it are refused before any work, naming them.

    Example:
        >>> import numpy as np
        >>> faces = [[1, 0, 0, 0, 0, 0], [0, 1, 0, 0, 0, 0], [1, 1, 0, 0, 0, 0],  # vacation: hat OR sunglasses
        ...          [0, 0, 1, 0, 0, 0], [0, 0, 0, 1, 0, 0], [0, 0, 1, 1, 0, 0],  # winter: earmuffs OR scarf
        ...          [0, 0, 0, 0, 1, 0], [0, 0, 0, 0, 0, 1], [0, 0, 0, 0, 1, 1]]  # student: pencil OR glasses
        >>> X = np.repeat(faces, 5, axis=0)  # 45 faces, 15 of each cluster
        >>> names = ["hat", "sunglasses", "earmuffs", "scarf", "pencil", "glasses"]
        >>> result = iz.fit_mgm_sweep(X, [2, 3], restarts=2, feature_names=names, progress_bar=False)
        >>> {k: round(elbo) for k, elbo in result.sweep_elbo.items()}  # best ELBO of each number of clusters
        {2: -169, 3: -135}
        >>> result.n_clusters  # the fit returned: the number with the highest ELBO
        3
    """
    array, names, priors, config, restarts, seed = _settings(X, feature_names, priors, restarts, max_iter, seed,
                                                             n_proposals, rel_tol, exact_or)  # fmt: skip
    if isinstance(n_clusters, str) or not isinstance(n_clusters, Iterable):
        raise ValueError(f"n_clusters: expected a sequence of cluster numbers (e.g. range(4, 17)), got {n_clusters!r}")
    candidates = sorted({check_n_clusters(k, array.shape[0]) for k in n_clusters})
    if not candidates:
        raise ValueError("n_clusters: the sweep needs at least one number of clusters")
    per_batch = check_positive_int(clusters_per_batch, "clusters_per_batch")
    bar = progress.bar(progress_bar, "MGM sweep", total=len(candidates), unit=" numbers of clusters")
    try:
        searches = _search(array, candidates, candidates[-1], per_batch, restarts=restarts, seed=seed, priors=priors,
                           config=config, bar=bar)  # fmt: skip
    finally:
        if bar is not None:
            bar.close()
    restart_elbo = {k: np.asarray(s.elbo, float) for k, s in searches.items()}
    chosen = max(candidates, key=lambda k: np.nanmax(restart_elbo[k]))
    best = _result_from(searches[chosen], chosen, names, priors, config.exact_or)
    best.sweep_elbo = {k: float(np.nanmax(v)) for k, v in restart_elbo.items()}
    best.sweep_restart_elbo = restart_elbo
    return best


class MGMClusterer(ExplainedEstimatorMixin, ClusterMixin, BaseEstimator):
    """scikit-learn clusterer: MGM with the paper's protocol (:func:`~interpretable_zoo.inference.mgm.fit_mgm`); ``explain()`` (and ``print``)
    gives the distinguishing groups, ``result_`` the :class:`~interpretable_zoo.inference.mgm.MGMResult`.

    ``binarize``: None (default) takes X as it is, which must then be binary (0/1); a number t makes
    every feature the indicator x > t first, in fit and predict (as ``BernoulliNB(binarize=t)``), so that
    real-valued input such as pixel intensities or counts can be given directly.

    After ``fit``: ``result_``, ``labels_`` (each observation's most probable cluster; clusters that no
    observation prefers stay empty, so labels need not be consecutive), ``n_iter_`` (merge iterations of
    the chosen restart).

    Example:
        >>> import numpy as np
        >>> faces = [[1, 0, 0, 0, 0, 0], [0, 1, 0, 0, 0, 0], [1, 1, 0, 0, 0, 0],  # vacation: hat OR sunglasses
        ...          [0, 0, 1, 0, 0, 0], [0, 0, 0, 1, 0, 0], [0, 0, 1, 1, 0, 0],  # winter: earmuffs OR scarf
        ...          [0, 0, 0, 0, 1, 0], [0, 0, 0, 0, 0, 1], [0, 0, 0, 0, 1, 1]]  # student: pencil OR glasses
        >>> X = np.repeat(faces, 5, axis=0)  # 45 faces, 15 of each cluster
        >>> clusterer = iz.MGMClusterer(3, restarts=2).fit(X)
        >>> [len(set(clusterer.labels_[i:i + 15])) for i in (0, 15, 30)]  # each planted cluster found whole
        [1, 1, 1]
        >>> print(clusterer.explain().splitlines()[0])
        Mind the Gap: 3 distinguishing of 3 extracted groups, 3 occupied of 3 clusters, ELBO -135...
        >>> clusterer.predict([[0, 1, 0, 0, 0, 0]]) == clusterer.labels_[0]  # sunglasses alone: a vacation face
        array([ True])
    """

    def __init__(self, n_clusters: int = 4, *, priors: Priors | None = None, restarts: int = 5, max_iter: int = 40,
                 seed: int = 0, rel_tol: float = 0.1, binarize: float | None = None):  # fmt: skip
        self.n_clusters = n_clusters
        self.priors = priors
        self.restarts = restarts
        self.max_iter = max_iter
        self.seed = seed
        self.rel_tol = rel_tol
        self.binarize = binarize

    def _binary(self, X, *, reset: bool):
        """X checked as scikit-learn expects, and thresholded at ``binarize`` when that is given."""
        X = check_estimator_input(self, X, reset=reset)
        if self.binarize is None:
            return X
        threshold = check_number(self.binarize, "binarize")
        return (check_real_matrix(X, "X") > threshold).astype(np.uint8)

    @atomic_fit
    def fit(self, X, y=None):
        X = self._binary(X, reset=True)
        self.result_ = fit_mgm(X, self.n_clusters, priors=self.priors, restarts=self.restarts, max_iter=self.max_iter,
                               seed=self.seed, rel_tol=self.rel_tol, progress_bar=False,
                               feature_names=getattr(self, "feature_names_in_", None))  # fmt: skip
        self.labels_ = self.result_.labels
        self.n_iter_ = self.result_.n_iterations
        return self

    def predict(self, X):
        check_is_fitted(self)
        return self.result_.predict(self._binary(X, reset=False))

    def predict_proba(self, X):
        check_is_fitted(self)
        return self.result_.predict_proba(self._binary(X, reset=False))

    def explain(self, **kwargs) -> str:
        check_is_fitted(self)
        return self.result_.explain(**kwargs)
