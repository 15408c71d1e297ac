"""Pictures of fitted results (matplotlib): traces with the swap acceptance of tempered runs, the BRL rule
list, BCM prototypes as images with their subspace, the MGM gap heatmap and ELBO sweep, prototypes per
class, a Bayesian Sets answer with its reasons. Every function draws from the result's own numbers (``explain_frame`` and the trace) and returns
its matplotlib axes; give ``ax``/``axes`` to draw into an existing figure.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from interpretable_zoo.diagnostics.inference_data import _as_inference_data, default_var_names


def _axes(ax, n_rows: int = 1, n_cols: int = 1, figsize=None):
    import matplotlib.pyplot as plt

    if ax is not None:
        return ax
    _, created = plt.subplots(n_rows, n_cols, figsize=figsize, squeeze=False)
    return created[0, 0] if n_rows == n_cols == 1 else created


def plot_trace(result_or_idata, var_names: Sequence[str] | None = None, *, swap_acceptance: bool = True, **kwargs):
    """``arviz.plot_trace`` of a result or InferenceData, by default over the label-free summaries; with
    ``swap_acceptance`` and a tempered run (more than one inverse temperature), the mean acceptance of the
    swaps at each kept scan is drawn as one more row. Extra keyword arguments go to ArviZ. The figure is
    laid out by matplotlib's constrained layout (titles clear of the tick labels, also when saved), and
    the histograms of integer summaries such as cluster sizes get at most 6 ticks instead of one per bin.

    Example:
        >>> data = iz.datasets.load_titanic_table()
        >>> X, names = iz.datasets.one_hot(data.X)  # binary items such as sex=female
        >>> result = iz.fit_brl(X, data.y, feature_names=names, min_support=0.3, num_samples=50, num_warmup=20,
        ...                     num_chains=2, n_temperatures=1, progress_bar=False)
        >>> axes = iz.diagnostics.plot_trace(result)  # a row per label-free summary: density, trace
        >>> axes.shape, [row[0].get_title() for row in axes]
        ((3, 2), ['log_posterior', 'length', 'mean_cardinality'])
    """
    import arviz as az

    idata = _as_inference_data(result_or_idata)
    var_names = list(var_names) if var_names is not None else default_var_names(idata)
    tempered = len(np.atleast_1d(idata.posterior.attrs.get("inverse_temperatures", [1.0]))) > 1
    if swap_acceptance and tempered and "sample_stats" in idata.groups() and "swap_accept" in idata.sample_stats:
        posterior = idata.posterior[var_names] if var_names is not None else idata.posterior
        posterior = posterior.assign(swap_accept=idata.sample_stats["swap_accept"])
        var_names = None if var_names is None else [*var_names, "swap_accept"]
        idata = az.InferenceData(posterior=posterior)
    if kwargs.get("axes") is None:
        kwargs["backend_kwargs"] = {"layout": "constrained", **(kwargs.get("backend_kwargs") or {})}
    axes = az.plot_trace(idata, var_names=var_names, **kwargs)
    from matplotlib.ticker import MaxNLocator

    for ax in np.atleast_2d(axes)[:, 0]:
        ax.xaxis.set_major_locator(MaxNLocator(6))
    return axes


def plot_rule_list(result, *, outcome: str | None = None, level: float = 0.95, ax=None):
    """The BRL-point list (``BRLResult.explain_frame``) as a forest plot: a row per rule, top to bottom in
    list order, with the posterior mean and ``level`` credible interval of its outcome probability (two
    classes: the second class; more: each rule's most probable class) and its captured count.

    Example:
        >>> data = iz.datasets.load_titanic_table()
        >>> X, names = iz.datasets.one_hot(data.X)  # binary items such as sex=female
        >>> result = iz.fit_brl(X, data.y, feature_names=names, min_support=0.3, num_samples=50, num_warmup=20,
        ...                     num_chains=2, n_temperatures=1, progress_bar=False)
        >>> ax = iz.diagnostics.plot_rule_list(result)
        >>> len(ax.get_yticklabels()) == len(result.explain_frame()), ax.get_xlabel()  # a row per rule
        (True, 'y=1 (mean, 95% credible interval)')
    """
    frame = result.explain_frame(outcome=outcome, level=level)
    classes = list(result.classes)
    probabilities = frame[[f"p_{c}" for c in classes]].to_numpy()
    labels = np.full(len(frame), 1) if len(classes) == 2 else probabilities.argmax(1)
    mean = probabilities[np.arange(len(frame)), labels]
    low = np.array([frame[f"p_{classes[k]}_low"].iloc[i] for i, k in enumerate(labels)])
    high = np.array([frame[f"p_{classes[k]}_high"].iloc[i] for i, k in enumerate(labels)])
    ax = _axes(ax, figsize=(8, 0.45 * len(frame) + 1.2))
    rows = np.arange(len(frame))
    ax.errorbar(mean, rows, xerr=[mean - low, high - mean], fmt="o", color="C0", capsize=3)
    names = [("if " if i == 0 else "else if ") + str(a) if k >= 0 else ("else" if i else "always")
             for i, (a, k) in enumerate(zip(frame["antecedent"], frame["antecedent_index"]))]
    ax.set_yticks(rows, names)
    ax.invert_yaxis()
    ax.set_xlim(0, 1)
    for row, captured in zip(rows, frame["captured"]):
        ax.annotate(f"n={captured}", (1.0, row), xytext=(4, 0), textcoords="offset points", va="center", fontsize=8,
                    annotation_clip=False)
    what = frame.attrs["outcome"] if len(classes) == 2 else "probability of the rule's class"
    ax.set_xlabel(f"{what} (mean, {level:.0%} credible interval)")
    return ax


def plot_prototypes(result, image_shape: tuple[int, int], *, titles=None, value_range=None, axes=None):
    """BCM prototypes (``BCMResult.explain_frame``, largest cluster first) as images of ``image_shape``
    (the features are pixels in row-major order), each with its subspace (features with posterior
    inclusion probability >= 1/2) outlined in red along the pixel edges. ``titles``: one per cluster in the frame's order
    (default: the prototype's name); ``value_range``: (vmin, vmax) of the codes (default all codes).

    Example:
        >>> import numpy as np
        >>> X = np.repeat([[0, 0, 0, 0], [1, 1, 1, 1], [2, 2, 0, 1]], 10, axis=0)  # 3 groups of 10 "2x2 images"
        >>> result = iz.fit_bcm(X, 3, num_samples=50, num_warmup=20, num_chains=2, n_temperatures=1, progress_bar=False)
        >>> axes = iz.diagnostics.plot_prototypes(result, (2, 2))
        >>> len(axes), axes[0].images[0].get_array().shape
        (3, (2, 2))
    """
    frame = result.explain_frame()
    from matplotlib.collections import LineCollection

    inclusion = result.subspace_probabilities()
    if int(np.prod(image_shape)) != result.data.codes.shape[1]:
        raise ValueError(f"image_shape: {image_shape} does not hold the {result.data.codes.shape[1]} features")
    vmin, vmax = value_range if value_range is not None else (0, int(result.data.codes.max()))
    axes = np.ravel(_axes(axes, 1, len(frame), figsize=(1.5 * len(frame), 1.9)))
    titles = titles if titles is not None else list(frame["prototype_name"])
    for ax, (cluster, row), title in zip(axes, frame.iterrows(), titles):
        ax.imshow(result.data.codes[row["prototype"]].reshape(image_shape), cmap="gray_r", vmin=vmin, vmax=vmax)
        ax.add_collection(LineCollection(_outline(inclusion[cluster].reshape(image_shape) >= 0.5), colors="red",
                                         linewidths=0.9))
        ax.set_title(str(title), fontsize=9)
        ax.axis("off")
    return axes


def plot_subspaces(result, *, threshold: float = 0.5, hide_value: str | None = None, ax=None):
    """A BCM result's subspaces as a cluster x feature heatmap: the posterior probability that omega_sj = 1
    (``BCMResult.subspace_probabilities``), one row per cluster of ``explain_frame`` (largest first, named
    by its prototype and share), one column per feature that reaches ``threshold`` in some cluster; each
    cell in a subspace (at least 1/2) shows the prototype's value there. ``hide_value`` leaves out the
    features where every prototype has that value, as ``explain`` does (e.g. "0" for ingredient lists,
    whose clusters all hold most absent ingredients in their subspaces).

    Example:
        >>> import numpy as np
        >>> X = np.repeat([[0, 0, 0, 0], [1, 1, 1, 1], [2, 2, 0, 1]], 10, axis=0)
        >>> result = iz.fit_bcm(X, 3, num_samples=50, num_warmup=20, num_chains=2, n_temperatures=1, progress_bar=False)
        >>> ax = iz.diagnostics.plot_subspaces(result)
        >>> ax.images[0].get_array().shape  # 3 clusters x the features in some subspace
        (3, 4)
    """
    if not 0 < threshold <= 1:
        raise ValueError(f"threshold: expected a probability in (0, 1], got {threshold!r}")
    frame = result.explain_frame()
    inclusion = result.subspace_probabilities()[frame.index]  # (clusters in the frame's order, P)
    codes = result.data.codes[frame["prototype"].to_numpy()]  # the prototypes' values
    values = np.array([[result.data.value_names[j][code] for j, code in enumerate(row)] for row in codes], dtype=object)
    shown = np.flatnonzero((inclusion >= threshold).any(0) & (values != hide_value).any(0))
    names = np.asarray(result.data.feature_names, dtype=object)[shown]
    ax = _axes(ax, figsize=(max(4.0, 0.32 * len(shown) + 2.5), 0.45 * len(frame) + 1.6))
    image = ax.imshow(inclusion[:, shown], cmap="Blues", vmin=0, vmax=1, aspect="auto")
    for row, column in zip(*np.nonzero(inclusion[:, shown] >= 0.5)):
        ax.text(column, row, str(values[row, shown[column]]), ha="center", va="center", fontsize=7, color="white")
    ax.set_xticks(range(len(shown)), names, rotation=90, fontsize=7)
    ax.set_yticks(range(len(frame)), [f"{name} ({share:.0%})" for name, share in zip(frame["prototype_name"], frame["share"])],
                  fontsize=8)  # fmt: skip
    ax.set_xlabel("feature (cell: the prototype's value where in the subspace)")
    ax.figure.colorbar(image, ax=ax, label="P(omega = 1)", fraction=0.03)
    return ax


def _outline(mask: np.ndarray) -> list:
    """The pixel edges between cells in ``mask`` (H, W) and cells outside it (or the image border), as
    segments in image coordinates (pixel centres at integers)."""
    padded = np.pad(mask, 1)
    segments = []
    for i, j in zip(*np.nonzero(mask)):
        above, below, left, right = ~padded[i, j + 1], ~padded[i + 2, j + 1], ~padded[i + 1, j], ~padded[i + 1, j + 2]
        if above:
            segments.append([(j - 0.5, i - 0.5), (j + 0.5, i - 0.5)])
        if below:
            segments.append([(j - 0.5, i + 0.5), (j + 0.5, i + 0.5)])
        if left:
            segments.append([(j - 0.5, i - 0.5), (j - 0.5, i + 0.5)])
        if right:
            segments.append([(j + 0.5, i - 0.5), (j + 0.5, i + 0.5)])
    return segments


def plot_gap_heatmap(result, *, cluster_names=None, threshold: float = 0.5, max_members: int = 4, ax=None):
    """MGM's fig. 3: E[beta_gk] of the distinguishing groups (rows, widest gap first) in the occupied
    clusters (columns), light where the group is present (``MGMResult.explain_frame``).

    Example:
        >>> import numpy as np
        >>> faces = [[1, 0, 0, 0, 0, 0], [0, 1, 0, 0, 0, 0], [1, 1, 0, 0, 0, 0],  # vacation: hat OR sunglasses
        ...          [0, 0, 1, 0, 0, 0], [0, 0, 0, 1, 0, 0], [0, 0, 1, 1, 0, 0],  # winter: earmuffs OR scarf
        ...          [0, 0, 0, 0, 1, 0], [0, 0, 0, 0, 0, 1], [0, 0, 0, 0, 1, 1]]  # student: pencil OR glasses
        >>> X = np.repeat(faces, 5, axis=0)  # 45 faces, 15 of each cluster
        >>> names = ["hat", "sunglasses", "earmuffs", "scarf", "pencil", "glasses"]
        >>> result = iz.fit_mgm_sweep(X, [2, 3], restarts=2, feature_names=names, progress_bar=False)
        >>> ax = iz.diagnostics.plot_gap_heatmap(result)
        >>> sorted(label.get_text() for label in ax.get_yticklabels())  # the planted groups
        ['earmuffs OR scarf', 'hat OR sunglasses', 'pencil OR glasses']
    """
    frame = result.explain_frame(cluster_names, threshold)
    headers = result.cluster_headers(cluster_names)
    ax = _axes(ax, figsize=(1.2 * len(headers) + 4, 0.45 * max(len(frame), 1) + 1.5))
    image = ax.imshow(frame[headers].to_numpy(dtype=float).reshape(len(frame), len(headers)), cmap="gray", vmin=0,
                      vmax=1, aspect="auto")
    ax.set_yticks(range(len(frame)), [result.group_name(g, max_members) for g in result.distinguishing_groups(threshold)])
    ax.set_xticks(range(len(headers)), headers)
    ax.set_xlabel("cluster")
    ax.figure.colorbar(image, ax=ax, label="E[beta] (presence probability)")
    return ax


def plot_elbo_sweep(result, *, cluster_names=None, threshold: float = 0.5, max_members: int = 4, axes=None):
    """Two panels for a ``fit_mgm_sweep`` result: the ELBO of every restart against the number of clusters
    (best per number joined, the chosen one starred), and :func:`~interpretable_zoo.diagnostics.plots.plot_gap_heatmap` of the chosen fit.

    Example:
        >>> import numpy as np
        >>> faces = [[1, 0, 0, 0, 0, 0], [0, 1, 0, 0, 0, 0], [1, 1, 0, 0, 0, 0],  # vacation: hat OR sunglasses
        ...          [0, 0, 1, 0, 0, 0], [0, 0, 0, 1, 0, 0], [0, 0, 1, 1, 0, 0],  # winter: earmuffs OR scarf
        ...          [0, 0, 0, 0, 1, 0], [0, 0, 0, 0, 0, 1], [0, 0, 0, 0, 1, 1]]  # student: pencil OR glasses
        >>> X = np.repeat(faces, 5, axis=0)  # 45 faces, 15 of each cluster
        >>> names = ["hat", "sunglasses", "earmuffs", "scarf", "pencil", "glasses"]
        >>> result = iz.fit_mgm_sweep(X, [2, 3], restarts=2, feature_names=names, progress_bar=False)
        >>> axes = iz.diagnostics.plot_elbo_sweep(result)
        >>> result.n_clusters, [ax.get_title() for ax in axes]
        (3, ['ELBO by number of clusters', 'distinguishing groups of the chosen fit'])
    """
    if not result.sweep_restart_elbo:
        raise ValueError("plot_sweep: this result has no sweep (use fit_mgm_sweep)")
    if axes is None:
        import matplotlib.pyplot as plt

        height = 0.45 * max(len(result.distinguishing_groups(threshold)), 6) + 1.5
        _, axes = plt.subplots(1, 2, figsize=(12, height), gridspec_kw={"width_ratios": [1, 1.4]})
    numbers = sorted(result.sweep_restart_elbo)
    for k in numbers:
        values = result.sweep_restart_elbo[k]
        axes[0].plot(np.full(len(values), k), values, "o", color="0.6", markersize=4)
    axes[0].plot(numbers, [result.sweep_elbo[k] for k in numbers], "-o", color="C0", label="best restart")
    axes[0].plot([result.n_clusters], [result.elbo], "*", color="C3", markersize=14, label=f"chosen K={result.n_clusters}")
    axes[0].set(xlabel="number of clusters K", ylabel="ELBO", title="ELBO by number of clusters")
    axes[0].legend()
    plot_gap_heatmap(result, cluster_names=cluster_names, threshold=threshold, max_members=max_members, ax=axes[1])
    axes[1].set_title("distinguishing groups of the chosen fit")
    return axes


def plot_prototype_images(selection, image_shape: tuple[int, int], *, X=None, by_class: bool = False,
                          max_shown: int = 44, columns: int = 11, axes=None):
    """Selected prototypes (``PrototypeSelection.explain_frame``) as images of ``image_shape``: in selection
    order, each titled with its cover counts "covered (wrong)" as the paper's fig. 6; or with ``by_class``
    one row per class (up to ``columns`` prototypes each). The images are the candidates' features (``X``
    for a selection made from a dissimilarity matrix).

    Example:
        >>> digits = iz.datasets.load_digits()
        >>> selection = iz.select_prototypes(digits.X[:200], digits.y[:200], eps=30.0)
        >>> axes = iz.diagnostics.plot_prototype_images(selection, (8, 8), by_class=True)
        >>> axes.shape  # a row per digit, up to 11 prototypes each
        (10, 11)
    """
    points = selection.candidate_points if X is None else np.asarray(X)
    if points is None:
        raise ValueError("X: this selection was made from a dissimilarity matrix; give the candidates' features")
    frame = selection.explain_frame()
    if by_class:
        groups = [frame[frame["class"] == label].head(columns) for label in selection.classes]
        n_rows, n_cols = len(groups), columns
    else:
        groups = [frame.head(max_shown)]
        n_rows, n_cols = max(1, -(-len(groups[0]) // columns)), columns
    axes = np.asarray(_axes(axes, n_rows, n_cols, figsize=(1.1 * n_cols, 1.3 * n_rows)))
    for ax in axes.ravel():
        ax.axis("off")
    cells = [(r, c, row) for r, group in enumerate(groups) for c, (_, row) in enumerate(group.iterrows())]
    for r, c, row in cells:
        ax = axes[r, c] if by_class else axes.ravel()[c]
        ax.imshow(points[row["candidate"]].reshape(image_shape), cmap="gray_r")
        ax.set_title(f"{row['class']}: {row['covered']} ({row['wrong']})" if by_class else
                     f"{row['covered']} ({row['wrong']})", fontsize=7)
    return axes


def plot_set_completion(result, *, ax=None):
    """A Bayesian Sets answer (``BayesianSetsResult.explain_frame``): a bar per returned item, best at the
    top, of its log score, coloured by its probability of belonging to the query's cluster, with the
    features that weigh most in its score written beside it.

    Example:
        >>> import pandas as pd
        >>> animals = pd.DataFrame([[1, 1, 0, 1], [1, 1, 0, 1], [1, 0, 0, 1], [0, 0, 1, 0], [1, 0, 1, 0]],
        ...                        index=["lion", "tiger", "wolf", "trout", "otter"],
        ...                        columns=["fur", "stripes", "fins", "legs"])
        >>> ax = iz.diagnostics.plot_set_completion(iz.BayesianSets(animals).query(["lion"], top_k=3))
        >>> [label.get_text() for label in ax.get_yticklabels()], ax.get_title()
        (['tiger', 'wolf', 'otter'], 'query: lion')
    """
    import matplotlib.pyplot as plt

    frame = result.explain_frame()
    ax = _axes(ax, figsize=(9, 0.4 * len(frame) + 1.2))
    colours = plt.get_cmap("viridis")(frame["membership"].to_numpy(dtype=float))
    rows = np.arange(len(frame))
    ax.barh(rows, frame["log_score"], color=colours)
    ax.set_yticks(rows, [f"{name} [query]" if q else str(name) for name, q in zip(frame["name"], frame["in_query"])])
    ax.invert_yaxis()
    for row, score, features in zip(rows, frame["log_score"], frame["top_features"]):
        ax.annotate(", ".join(map(str, features[:3])), (max(score, 0), row), xytext=(4, 0), textcoords="offset points",
                    va="center", fontsize=7)
    ax.axvline(0, color="k", lw=0.6)
    ax.set_xlabel("log score (colour: P(member), 0 dark to 1 light)")
    ax.set_title("query: " + ", ".join(map(str, result.query_names)), fontsize=9)
    return ax
