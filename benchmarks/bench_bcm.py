"""BCM collapsed Gibbs against the `lda` package's collapsed-Gibbs LDA, and the paper's digits experiment.

Needs the real datasets (INTERPRETABLE_ZOO_DATA) for USPS; peers: `pip install lda` (scikit-learn's
LatentDirichletAllocation is the LDA of the fig. 2a comparison).
"""

from __future__ import annotations

import time

import arviz as az
import jax
import numpy as np

from benchmarks.runner import Comparison, benchmark, import_peer, time_call
from interpretable_zoo.datasets.smiley_faces import load_usps_bcm
from interpretable_zoo.inference.bcm import corrupt_half_labels, fit_bcm
from interpretable_zoo.inference.bcm_gibbs import initial_state, problem_from_model_args, sweep

N_CLUSTERS = 10
SWEEPS = 100
SEED = 0


def token_counts(codes: np.ndarray, n_values: int) -> np.ndarray:
    """Documents = observations, words = (feature, value) pairs: the same N x P tokens as BCM's."""
    n_obs, n_features = codes.shape
    counts = np.zeros((n_obs, n_features * n_values), np.int64)
    counts[np.arange(n_obs)[:, None], np.arange(n_features) * n_values + codes] = 1
    return counts


def sweeps_per_second(codes, num_chains: int, sweeps: int = SWEEPS) -> float:
    """Median time of ``sweeps`` sweeps of ``num_chains`` vectorized chains, as sweeps per second."""
    problem = problem_from_model_args((codes, N_CLUSTERS), {})
    keys = jax.random.split(jax.random.PRNGKey(SEED), num_chains)
    state = jax.jit(jax.vmap(lambda key: initial_state(problem, key)))(keys)
    run = jax.jit(lambda s: jax.lax.fori_loop(0, sweeps, lambda i, t: jax.vmap(lambda c: sweep(problem, c))(t), s))
    seconds = time_call(lambda: jax.block_until_ready(run(state)), repeat=3)
    return sweeps / seconds


@benchmark(
    "bcm_tokens_per_second",
    peers=("lda",),
    description=(
        "USPS 700 x 256 (70 per digit, 7 bins), S = K = 10, 100 sweeps of all N x P tokens (BCM: z, omega "
        "and prototype blocks) against `lda`'s collapsed Gibbs on the same tokens. Goal: ratio >= 1 on CPU "
        "with one chain. Also ESS per second of the log joint (4 chains x 500 draws)."
    ),
)
def tokens_per_second() -> list[Comparison]:
    lda = import_peer("lda", "pip install lda")
    usps = load_usps_bcm(70)
    codes = usps.X
    tokens = codes.size
    ours = SWEEPS / sweeps_per_second(codes, 1)
    counts = token_counts(codes, 7)
    peer = time_call(lambda: lda.LDA(n_topics=N_CLUSTERS, n_iter=SWEEPS, random_state=SEED, refresh=SWEEPS).fit(counts), repeat=3)
    rows = [
        Comparison(
            f"{SWEEPS} sweeps, 1 chain, {tokens} tokens",
            ours,
            "lda (collapsed Gibbs LDA)",
            peer,
            f"ours {tokens * SWEEPS / ours / 1e6:.2f} M tokens/s, lda {tokens * SWEEPS / peer / 1e6:.2f} M tokens/s",
        )
    ]
    for num_chains in (4, 16) if jax.default_backend() == "cpu" else (16, 256):
        rate = sweeps_per_second(codes, num_chains)
        rows.append(
            Comparison(
                f"{SWEEPS} sweeps, {num_chains} vectorized chains",
                SWEEPS / rate,
                "lda (1 chain)",
                peer * num_chains,
                f"ours {tokens * num_chains * rate / 1e6:.2f} M tokens/s over all chains",
            )
        )
    start = time.perf_counter()
    result = fit_bcm(codes, N_CLUSTERS, num_warmup=200, num_samples=500, num_chains=4, seed=SEED, store_z=False)
    elapsed = time.perf_counter() - start
    ess = float(az.ess(result.idata, var_names=["log_joint"])["log_joint"])
    rows.append(
        Comparison(
            "fit_bcm 4 chains x (200 + 500) sweeps", elapsed, "-", None,
            f"log joint ESS {ess:.0f}, {ess / elapsed:.1f} effective samples/s (including compilation)",
        )
    )
    return rows


@benchmark(
    "bcm_usps_digits",
    description=(
        "Paper fig. 2: USPS, 10-70 observations per digit, 7 bins, S = 10, alpha = 0.01, lambda = 1, c = 50, "
        "q = 0.8, 1000 sweeps from half the labels wrong. Notes: unsupervised accuracy against iterations "
        "(fig. 2b, best-log-joint chain) and 5-fold accuracy of a linear SVM on BCM's pi against one on "
        "scikit-learn LDA topic proportions with S topics (fig. 2a), in one run."
    ),
)
def usps_digits() -> list[Comparison]:
    from sklearn.decomposition import LatentDirichletAllocation
    from sklearn.model_selection import cross_val_score
    from sklearn.svm import LinearSVC

    rows = []
    for per_digit in (10, 40, 70):
        usps = load_usps_bcm(per_digit, seed=SEED)
        init = corrupt_half_labels(usps.y, N_CLUSTERS, seed=SEED)
        start = time.perf_counter()
        result = fit_bcm(usps.X, N_CLUSTERS, num_warmup=0, num_samples=1000, num_chains=1, seed=SEED, init=init, store_z=False)
        ours = time.perf_counter() - start
        accuracy = result.unsupervised_accuracy(usps.y)[0]
        start = time.perf_counter()
        topics = LatentDirichletAllocation(N_CLUSTERS, max_iter=100, random_state=SEED).fit_transform(token_counts(usps.X, 7))
        peer = time.perf_counter() - start
        folds = min(5, per_digit)
        svm = LinearSVC(C=1.0, max_iter=20000)
        bcm_svm = cross_val_score(svm, result.transform(), usps.y, cv=folds).mean()
        lda_svm = cross_val_score(svm, topics, usps.y, cv=folds).mean()
        trace = ", ".join(f"{it}: {accuracy[it - 1]:.2f}" for it in (1, 10, 100, 1000))
        rows.append(
            Comparison(
                f"{per_digit} per digit (N = {10 * per_digit}), 1000 sweeps",
                ours,
                "sklearn LDA (100 iterations)",
                peer,
                f"unsupervised accuracy by iteration {trace}; SVM accuracy BCM pi {bcm_svm:.3f} vs LDA {lda_svm:.3f}",
            )
        )
    return rows
