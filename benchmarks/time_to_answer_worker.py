"""One time-to-answer measurement in a fresh process: import, load, fit, answer; prints one JSON line.

``python -m benchmarks.time_to_answer_worker CASE [--refits N] [--launched-at T]`` runs our side of a case
(see :data:`CASES`); ``--peer NAME --inputs DIR --options JSON`` runs a peer on inputs that
``benchmarks.bench_time_to_answer`` wrote to DIR. Nothing numerical is imported before the timed import,
so ``import`` is what a user's first ``import`` of the names the case needs costs. ``--launched-at`` is
the parent's ``time.time()`` just before it started this process (start-up = now - that).

Compilation is counted with ``jax.monitoring`` over the fit (and apart, over the answer): the seconds of
``/jax/core/compile/backend_compile_duration`` events (with a persistent cache, a cache hit fires it too,
its duration then being the load), how many there were, and the persistent cache's hits: programs
compiled = events - hits (each a miss of the persistent cache, or a program the cache does not take).
"""

from __future__ import annotations

import time

_MODULE_START, _MODULE_START_WALL = time.perf_counter(), time.time()

import argparse  # noqa: E402
import json  # noqa: E402
import sys  # noqa: E402

COMPILE_EVENT = "/jax/core/compile/backend_compile_duration"
TRACE_EVENTS = ("/jax/core/compile/jaxpr_trace_duration", "/jax/core/compile/jaxpr_to_mlir_module_duration")
CACHE_EVENTS = {
    "/jax/compilation_cache/cache_hits": "cache_hits",
    "/jax/compilation_cache/cache_misses": "cache_writes",
    "/jax/compilation_cache/compile_requests_use_cache": "cache_requests",
}
CACHE_LOAD_EVENT = "/jax/compilation_cache/cache_retrieval_time_sec"


class CompileCounter:
    """Sums of the compile events since the last :meth:`reset` (listeners registered once per process)."""

    def __init__(self):
        import jax.monitoring

        self.reset()
        jax.monitoring.register_event_duration_secs_listener(self._duration)
        jax.monitoring.register_event_listener(self._event)

    def reset(self):
        self.counts = {"compile_events": 0, **{name: 0 for name in CACHE_EVENTS.values()}}
        self.seconds = {"compile": 0.0, "trace_and_lower": 0.0, "cache_load": 0.0}

    def _duration(self, event, duration, **_):
        if event == COMPILE_EVENT:
            self.counts["compile_events"] += 1
            self.seconds["compile"] += duration
        elif event in TRACE_EVENTS:
            self.seconds["trace_and_lower"] += duration
        elif event == CACHE_LOAD_EVENT:
            self.seconds["cache_load"] += duration

    def _event(self, event, **_):
        if event in CACHE_EVENTS:
            self.counts[CACHE_EVENTS[event]] += 1

    def snapshot(self) -> dict:
        compiled = self.counts["compile_events"] - self.counts["cache_hits"]
        return {**self.counts, "programs_compiled": compiled, **{f"{k}_seconds": v for k, v in self.seconds.items()}}


def _run_seconds(fitted) -> dict | None:
    """``run.seconds`` ({"total", "compile", "sampling"}) of an MCMC fit, when it has one."""
    for holder in (fitted, getattr(fitted, "result_", None)):
        seconds = getattr(getattr(holder, "run", None), "seconds", None)
        if isinstance(seconds, dict):
            return {key: float(value) for key, value in seconds.items()}
    return None


def _bootstrap(n, seed):
    import numpy as np

    return np.random.default_rng(seed).integers(0, n, n)


# ---- our cases: imports() -> namespace; load(ns, resample_seed) -> data; fit(ns, data, seed); answer(ns, fitted, data) -> notes


def _brl_imports():
    from interpretable_zoo import BayesianRuleListClassifier
    from interpretable_zoo.datasets import load_tictactoe, load_titanic

    return {
        "BayesianRuleListClassifier": BayesianRuleListClassifier,
        "load_titanic": load_titanic,
        "load_tictactoe": load_tictactoe,
    }


def _rows(dataset, resample_seed):
    if resample_seed is None:
        return dataset.X, dataset.y
    rows = _bootstrap(len(dataset.y), resample_seed)
    return dataset.X.iloc[rows].reset_index(drop=True), dataset.y[rows]


def _titanic_load(ns, resample_seed):
    X, y = _rows(ns["load_titanic"]("train"), resample_seed)
    test = ns["load_titanic"]("test")
    return {"X": X, "y": y, "X_test": test.X, "y_test": test.y}


def _tictactoe_load(ns, resample_seed):
    dataset = ns["load_tictactoe"]()
    X, y = _rows(dataset, resample_seed)
    return {"X": X, "y": y, "X_test": dataset.X, "y_test": dataset.y}


def _brl_fit(options):
    def fit(ns, data, seed):
        return ns["BayesianRuleListClassifier"](seed=seed, **options).fit(data["X"], data["y"])

    return fit


def _brl_answer(ns, fitted, data):
    import numpy as np

    accuracy = float(np.mean(fitted.predict(data["X_test"]) == data["y_test"]))
    run = fitted.result_.run
    return (f"accuracy {accuracy:.3f}, {len(fitted.result_.antecedents)} antecedents, {run.n_scans} scans x "
            f"{run.n_temperatures} temperature(s), converged {run.converged}")  # fmt: skip


def _recipes_imports(fit_name):
    def imports():
        import interpretable_zoo
        from interpretable_zoo.datasets import load_recipes

        return {"fit": getattr(interpretable_zoo, fit_name), "load_recipes": load_recipes}

    return imports


def _recipes_load(ns, resample_seed):
    dataset = ns["load_recipes"]()
    rows = _bootstrap(len(dataset.y), resample_seed) if resample_seed is not None else slice(None)
    return {"X": dataset.X[rows], "y": dataset.y[rows], "feature_names": dataset.feature_names}


def _bcm_fit(ns, data, seed):
    return ns["fit"](data["X"], 4, seed=seed)


def _bcm_answer(ns, fitted, data):
    table = fitted.explain_frame()
    return f"{len(table)} prototypes, subspace sizes {table['n_subspace'].tolist()}"


def _mgm_fit(ns, data, seed):
    return ns["fit"](data["X"], 4, seed=seed, feature_names=data["feature_names"])


def _mgm_answer(ns, fitted, data):
    text = fitted.explain()
    return f"{len(fitted.groups)} groups, {len(fitted.distinguishing_groups())} distinguishing; explanation {len(text)} chars"


def _prototype_imports():
    from interpretable_zoo import select_prototypes
    from interpretable_zoo.datasets import load_usps
    from interpretable_zoo.inference.set_cover import dissimilarity_quantile

    return {"select_prototypes": select_prototypes, "load_usps": load_usps, "dissimilarity_quantile": dissimilarity_quantile}


def _prototype_load(ns, resample_seed):
    train, test = ns["load_usps"]("train"), ns["load_usps"]("test")
    rows = _bootstrap(len(train.y), resample_seed) if resample_seed is not None else slice(None)
    return {"X": train.X[rows], "y": train.y[rows], "X_test": test.X, "y_test": test.y}


def _prototype_fit(ns, data, seed):
    eps = ns["dissimilarity_quantile"](data["X"], 0.05, "l2")
    return ns["select_prototypes"](data["X"], data["y"], eps=eps, seed=seed)


def _prototype_answer(ns, fitted, data):
    import numpy as np

    error = float(np.mean(fitted.predict(data["X_test"]) != data["y_test"]))
    return f"{len(fitted.prototypes)} prototypes, eps {fitted.eps:.4f}, test error {error:.2%}"


def _sets_imports():
    from interpretable_zoo import BayesianSets
    from interpretable_zoo.datasets import load_movielens

    return {"BayesianSets": BayesianSets, "load_movielens": load_movielens}


GENRE_QUERY_MIN_LIKES = 20
"""Query movies are liked by at least this many users (as in the MovieLens benchmark)."""


def genre_query(X, y, seed):
    """A 3-movie query from one genre (chosen by ``seed`` among those with at least 10 eligible movies):
    (genre column, item indices)."""
    import numpy as np

    rng = np.random.default_rng(seed)
    popular = np.asarray(X.sum(axis=1)).ravel() >= GENRE_QUERY_MIN_LIKES
    eligible = [np.flatnonzero((y[:, g] == 1) & popular) for g in range(y.shape[1])]
    genres = [g for g, items in enumerate(eligible) if items.size >= 10]
    genre = int(rng.choice(genres))
    return genre, np.sort(rng.choice(eligible[genre], 3, replace=False))


def _sets_load(ns, resample_seed):
    dataset = ns["load_movielens"]()
    X, y, names = dataset.X, dataset.y, list(dataset.sample_names)
    if resample_seed is not None:
        rows = _bootstrap(len(names), resample_seed)
        X, y, names = X[rows], y[rows], [f"{names[j]} #{i}" for i, j in enumerate(rows)]
    genre, query = genre_query(X, y, 0 if resample_seed is None else resample_seed)
    return {"X": X, "y": y, "names": names, "genre": genre, "query": query}


def _sets_fit(ns, data, seed):
    return ns["BayesianSets"](data["X"], item_names=data["names"])


def _sets_answer(ns, fitted, data):
    import numpy as np

    result = fitted.query(data["query"], top_k=10)
    result.explain()
    precision = float(np.mean(data["y"][result.items, data["genre"]]))
    return f"query {data['query'].tolist()} (genre column {data['genre']}), precision at 10 {precision:.2f}"


BRL_FIXED = {"num_chains": 3, "num_samples": 10000, "num_warmup": 0, "n_temperatures": 1, "steps_per_scan": 1}
"""3 chains x 10,000 Metropolis-Hastings iterations (one proposal per scan), one rung, no tuning: imodels' 3 chains
x max_iter 10,000."""

CASES = {
    "brl_titanic": (_brl_imports, _titanic_load, _brl_fit({}), _brl_answer, 1),
    "brl_titanic_fixed": (_brl_imports, _titanic_load, _brl_fit(BRL_FIXED), _brl_answer, 1),
    "brl_tictactoe": (_brl_imports, _tictactoe_load, _brl_fit({"negations": False, "max_cardinality": 3}), _brl_answer, 1),
    "bcm_recipes": (_recipes_imports("fit_bcm"), _recipes_load, _bcm_fit, _bcm_answer, 0),
    "mgm_recipes": (_recipes_imports("fit_mgm"), _recipes_load, _mgm_fit, _mgm_answer, 0),
    "prototypes_usps": (_prototype_imports, _prototype_load, _prototype_fit, _prototype_answer, 0),
    "bayesian_sets_movielens": (_sets_imports, _sets_load, _sets_fit, _sets_answer, 0),
}
"""name -> (imports, load, fit, answer, first seed); the refit uses the next seed and a bootstrap resample."""


def run_ours(case: str, refits: int, startup: float | None) -> dict:
    imports, load, fit, answer, seed = CASES[case]
    start = time.perf_counter()
    import interpretable_zoo  # noqa: F401  (the package alone: names resolve lazily)

    bare_import = time.perf_counter() - start
    ns = imports()
    import_seconds = time.perf_counter() - start
    import jax

    counter = CompileCounter()
    record = {"case": case, "startup": startup, "import_bare": bare_import, "import": import_seconds,
              "cache_dir": jax.config.jax_compilation_cache_dir, "backend": jax.default_backend()}  # fmt: skip
    record["first"] = _measure(ns, load, fit, answer, seed, None, counter)
    record["answer_at"] = time.perf_counter() - _MODULE_START
    if refits:
        record["refit"] = _measure(ns, load, fit, answer, seed + 1, seed + 1, counter)
        more = [_measure(ns, load, fit, answer, seed + k, seed + k, counter) for k in range(2, refits + 1)]
        record["refit_fits"] = [record["refit"]["fit"], *(m["fit"] for m in more)]
    return record


def _measure(ns, load, fit, answer, seed, resample_seed, counter) -> dict:
    start = time.perf_counter()
    data = load(ns, resample_seed)
    loaded = time.perf_counter()
    counter.reset()
    fitted = fit(ns, data, seed)
    fitted_at = time.perf_counter()
    compiles = counter.snapshot()
    counter.reset()
    notes = answer(ns, fitted, data)
    done = time.perf_counter()
    return {"load": loaded - start, "fit": fitted_at - loaded, "answer": done - fitted_at, **compiles,
            "answer_compiles": counter.snapshot(), "run_seconds": _run_seconds(fitted), "notes": notes}  # fmt: skip


# ---- peers: imports() -> namespace; fit(ns, inputs, options) -> fitted; answer(ns, fitted, inputs) -> notes


def _imodels_imports():
    from imodels import BayesianRuleListClassifier

    return {"BayesianRuleListClassifier": BayesianRuleListClassifier}


def _imodels_fit(ns, inputs, options):
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return ns["BayesianRuleListClassifier"](**options).fit(inputs["X"], inputs["y"])


def _imodels_answer(ns, fitted, inputs):
    import numpy as np

    probabilities = fitted.predict_proba(inputs["X_test"])[:, 1]
    accuracy = float(np.mean((probabilities > 0.5) == inputs["y_test"]))
    return f"accuracy {accuracy:.3f}, {len(fitted.itemsets)} antecedents mined"


def _kmeans_imports():
    from sklearn.cluster import KMeans

    return {"KMeans": KMeans}


def _kmeans_fit(ns, inputs, options):
    return ns["KMeans"](**options).fit(inputs["X"])


def _kmeans_answer(ns, fitted, inputs):
    import numpy as np

    return f"cluster sizes {sorted(np.bincount(fitted.labels_).tolist(), reverse=True)}"


def _greedy_imports():
    from scipy.spatial.distance import cdist, pdist

    return {"cdist": cdist, "pdist": pdist}


def _greedy_fit(ns, inputs, options):
    import numpy as np

    eps = float(np.quantile(ns["pdist"](inputs["X"]), 0.05))
    picks = ns["numpy_greedy"](inputs["X"], inputs["y"], eps, 1.0 / len(inputs["y"]))
    return np.array(picks).reshape(-1, 2)


def _greedy_answer(ns, picks, inputs):
    import numpy as np

    nearest = np.argmin(ns["cdist"](inputs["X_test"], inputs["X"][picks[:, 0]]), axis=1)
    error = float(np.mean(np.unique(inputs["y"])[picks[nearest, 1]] != inputs["y_test"]))
    return f"{len(picks)} prototypes, test error {error:.2%}"


def _greedy_harness(ns):
    from benchmarks.bench_prototype_selection import numpy_greedy

    ns["numpy_greedy"] = numpy_greedy


def _bayessets_imports():
    from bayessets import BernoulliBayesianSet

    return {"BernoulliBayesianSet": BernoulliBayesianSet}


def _bayessets_fit(ns, inputs, options):
    return ns["BernoulliBayesianSet"](inputs["X"][:, inputs["informative"]])


def _bayessets_answer(ns, fitted, inputs):
    import numpy as np

    scores = fitted.query(inputs["query"])
    scores[inputs["query"]] = -np.inf  # the query's own items are not part of the answer
    return f"top 10 {np.argsort(-scores, kind='stable')[:10].tolist()}"


PEERS = {
    "imodels_brl": (_imodels_imports, None, _imodels_fit, _imodels_answer),
    "kmeans": (_kmeans_imports, None, _kmeans_fit, _kmeans_answer),
    "numpy_greedy": (_greedy_imports, _greedy_harness, _greedy_fit, _greedy_answer),
    "bayessets": (_bayessets_imports, None, _bayessets_fit, _bayessets_answer),
}
"""name -> (imports, harness, fit, answer); ``harness`` loads benchmark code that is not the peer's own
import (its time is reported apart, as ``harness``, and left out of the peer's process time)."""


def load_inputs(directory: str) -> dict:
    """The arrays a peer reads: ``inputs.npz`` (dense) and ``X.npz`` / ``X_test.npz`` (scipy sparse) in ``directory``."""
    import os

    import numpy as np

    inputs = dict(np.load(os.path.join(directory, "inputs.npz")))
    for name in ("X", "X_test"):
        path = os.path.join(directory, f"{name}.npz")
        if os.path.exists(path):
            import scipy.sparse

            inputs[name] = scipy.sparse.load_npz(path).tocsr()
    return inputs


def run_peer(peer: str, directory: str, options: dict, startup: float | None) -> dict:
    imports, harness, fit, answer = PEERS[peer]
    start = time.perf_counter()
    ns = imports()
    import_seconds = time.perf_counter() - start
    harness_seconds = 0.0
    if harness is not None:
        harness_start = time.perf_counter()
        harness(ns)
        harness_seconds = time.perf_counter() - harness_start
    load_start = time.perf_counter()
    inputs = load_inputs(directory)
    fit_start = time.perf_counter()
    fitted = fit(ns, inputs, options)
    fitted_at = time.perf_counter()
    notes = answer(ns, fitted, inputs)
    done = time.perf_counter()
    return {"peer": peer, "startup": startup, "import": import_seconds, "harness": harness_seconds,
            "first": {"load": fit_start - load_start, "fit": fitted_at - fit_start, "answer": done - fitted_at, "notes": notes},
            "answer_at": done - _MODULE_START - harness_seconds}  # fmt: skip


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.time_to_answer_worker")
    parser.add_argument("case", nargs="?", choices=sorted(CASES), help="our case to run")
    parser.add_argument("--refits", type=int, default=0,
                        help="after the first answer, refit the same shapes this many times (seed + k, bootstrap rows k)")
    parser.add_argument("--peer", choices=sorted(PEERS), help="run a peer instead of our case")
    parser.add_argument("--inputs", help="folder of the peer's inputs")
    parser.add_argument("--options", default="{}", help="the peer's options, JSON")
    parser.add_argument("--launched-at", type=float, default=None, help="time.time() when the parent started this process")
    args = parser.parse_args(argv)
    startup = None if args.launched_at is None else _MODULE_START_WALL - args.launched_at
    if (args.case is None) == (args.peer is None):
        parser.error("give exactly one of CASE or --peer")
    if args.peer is not None:
        record = run_peer(args.peer, args.inputs, json.loads(args.options), startup)
    else:
        record = run_ours(args.case, args.refits, startup)
    record["printed_at"] = time.perf_counter() - _MODULE_START
    print(json.dumps(record), flush=True)


if __name__ == "__main__":
    sys.exit(main())
