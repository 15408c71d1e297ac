"""BCM collapsed Gibbs against the `lda` package's collapsed-Gibbs LDA, the paper's digits experiment
(fig. 2) and the recipes of fig. 4b.

Needs the real datasets (INTERPRETABLE_ZOO_DATA) for USPS and the recipes; peers: `pip install lda`
(scikit-learn's LatentDirichletAllocation is the LDA of the fig. 2a comparison).
"""

from __future__ import annotations

import statistics
import time
import warnings

import jax
import jax.numpy as jnp
import numpy as np
import numpyro.distributions as dist

from benchmarks.runner import (SPEED_ROUNDS, Comparison, benchmark, import_peer, interleaved_rounds, median_of,
                               ratio_range, rows_against)
from interpretable_zoo.datasets import load_recipes
from interpretable_zoo.datasets.smiley_faces import load_usps_bcm
from interpretable_zoo.inference.bcm import corrupt_half_labels, fit_bcm
from interpretable_zoo.inference import bcm_gibbs
from interpretable_zoo.models import bcm

N_CLUSTERS = 10
SWEEPS = 100
SEED = 0
DIGIT_SWEEPS = 1000
DIGITS_PER_CLASS = (10, 40, 70)
"""USPS observations per digit in the fig. 2 benchmarks, as in the paper's fig. 2b."""
HALF_WRONG_CHAINS, TRUE_LABEL_CHAINS = 4, 2


def token_counts(codes: np.ndarray, n_values: int) -> np.ndarray:
    """Documents = observations, words = (feature, value) pairs: the same N x P tokens as BCM's."""
    n_obs, n_features = codes.shape
    counts = np.zeros((n_obs, n_features * n_values), np.int64)
    counts[np.arange(n_obs)[:, None], np.arange(n_features) * n_values + codes] = 1
    return counts


def sweep_timer(codes, num_chains: int, sweeps: int = SWEEPS, split_merge: bool = True, tempered: bool = False):
    """A function timing ``sweeps`` sweeps of ``num_chains`` vectorized chains (compiled here) and returning
    seconds; with ``split_merge`` the fits' schedule (a split-merge move on every
    ``DEFAULT_SPLIT_MERGE_EVERY``-th sweep), without it none (the blocks that update single tokens and
    observations, and omega and prototypes). The chains run at inverse temperature 1, or with ``tempered``
    at inverse temperatures spread evenly over [0, 1], as the rungs of a tempered fit."""
    split_merge_clusters = bcm_gibbs.DEFAULT_SPLIT_MERGE_CLUSTERS if split_merge else 0
    static, data = bcm_gibbs.make_target(codes, N_CLUSTERS, split_merge_clusters=split_merge_clusters)
    keys = jax.random.split(jax.random.PRNGKey(SEED), num_chains)
    state = jax.jit(jax.vmap(lambda key: bcm_gibbs.init(static, data, key)))(keys)
    betas = jnp.linspace(0.0, 1.0, num_chains) if tempered else jnp.ones(num_chains)

    def sweep(i, states):
        return bcm_gibbs.step(static, data, states, jax.vmap(lambda key: jax.random.fold_in(key, i))(keys), betas)[0]

    run = jax.jit(lambda s: jax.lax.fori_loop(0, sweeps, sweep, s))
    jax.block_until_ready(run(state))

    def seconds():
        start = time.perf_counter()
        jax.block_until_ready(run(state))
        return time.perf_counter() - start

    return seconds


def sweeps_per_second(codes, num_chains: int, sweeps: int = SWEEPS, split_merge: bool = True) -> float:
    """Median rate of :func:`sweep_timer` over 3 calls, in sweeps per second."""
    timer = sweep_timer(codes, num_chains, sweeps, split_merge)
    return sweeps / statistics.median(timer() for _ in range(3))


ONE_CHAIN_ROWS = {
    "1 chain, {tokens} tokens, no split-merge": {"split_merge": False},
    "1 chain, {tokens} tokens, split-merge every fourth sweep": {"split_merge": True},
}
FIT_ROW = "1 chain through fit_bcm, untempered, split-merge every fourth sweep"


@benchmark(
    "bcm_tokens_per_second",
    peers=("lda",),
    description=(
        "USPS 700 x 256 (70 per digit, 7 bins), S = K = 10, 100 sweeps against `lda`'s collapsed Gibbs on the "
        "same N x P tokens. One BCM sweep (`bcm_gibbs.step` at inverse temperature 1) = eq. (1) for every "
        "token, one whole-observation re-split move per observation, the prototypes and omega (eq. (2)) jointly, and "
        "in the fits' schedule a cluster split-merge move on every fourth sweep; it counts as N x P token "
        "updates, all blocks included. Goal: ratio >= 1 on CPU with one chain without the split-merge move "
        "(the work of LDA's sweep and more); the rows with it show what a fit's sweep costs, and the fit_bcm "
        "row what the sampling engine adds to it (the difference of untempered fits of 100 and 10 scans, one "
        "sweep per scan, so that set-up and result cancel out); the tempered row what a tempered fit's rungs "
        "cost, its replicas at inverse temperatures spread evenly over [0, 1]. The one-chain rows and lda are "
        "timed once per round, in 3 interleaved rounds (medians; the notes give the lowest and highest ratio of a "
        "round); vectorized chains run as one scan over the stacked count tables, timed once. Convergence "
        "(effective samples per second): `convergence_bcm_recipes`, `convergence_bcm_usps40`, `convergence_bcm_usps70`."
    ),
)
def tokens_per_second() -> list[Comparison]:
    lda = import_peer("lda", "pip install lda")
    codes = load_usps_bcm(70).X
    tokens = codes.size
    counts = token_counts(codes, 7)

    def lda_seconds():
        start = time.perf_counter()
        lda.LDA(n_topics=N_CLUSTERS, n_iter=SWEEPS, random_state=SEED, refresh=SWEEPS).fit(counts)
        return time.perf_counter() - start

    fit = ScanTimer(codes, N_CLUSTERS, SWEEPS, num_chains=1, n_temperatures=1)
    timers = {
        **{task: sweep_timer(codes, 1, **options) for task, options in ONE_CHAIN_ROWS.items()},
        FIT_ROW: lambda: fit() * SWEEPS,
        "lda": lda_seconds,
    }
    rounds = interleaved_rounds(timers, SPEED_ROUNDS)
    peer = median_of(rounds, "lda")
    rows = []
    for task in timers:
        if task != "lda":
            ours = median_of(rounds, task)
            rows.append(Comparison(
                f"{SWEEPS} sweeps, {task.format(tokens=tokens)}", ours, "lda (collapsed Gibbs LDA)", peer,
                f"{ratio_range(rounds, task, 'lda')}; ours {tokens * SWEEPS / ours / 1e6:.2f} M tokens/s, "
                f"lda {tokens * SWEEPS / peer / 1e6:.2f} M tokens/s",
            ))  # fmt: skip
    for num_chains in (4, 16) if jax.default_backend() == "cpu" else (16, 256):
        ours = sweep_timer(codes, num_chains)()
        rows.append(Comparison(
            f"{SWEEPS} sweeps, {num_chains} vectorized chains, split-merge every fourth sweep", ours, "lda (1 chain)",
            peer * num_chains, f"ours {tokens * num_chains * SWEEPS / ours / 1e6:.2f} M tokens/s over all chains",
        ))  # fmt: skip
    num_chains = 16
    ours = sweep_timer(codes, num_chains, split_merge=False, tempered=True)()
    rows.append(Comparison(
        f"{SWEEPS} sweeps, {num_chains} vectorized replicas at inverse temperatures 0 to 1, no split-merge", ours,
        "lda (1 chain)", peer * num_chains,
        f"ours {tokens * num_chains * SWEEPS / ours / 1e6:.2f} M tokens/s over all replicas",
    ))  # fmt: skip
    return rows


def _plain_sweeps(X, n_clusters, init, num_chains, **options):
    """DIGIT_SWEEPS plain Gibbs sweeps (one rung, no tuning) from the given starts: the paper's protocol."""
    return fit_bcm(
        X,
        n_clusters,
        num_warmup=0,
        num_samples=DIGIT_SWEEPS,
        num_chains=num_chains,
        seed=SEED,
        init=init,
        n_temperatures=1,
        progress_bar=False,
        **options,
    )


def _fit_digits(usps, init, num_chains):
    return _plain_sweeps(usps.X, N_CLUSTERS, init, num_chains, n_values=7)  # 7 bins, seen in the subsample or not


def _final_log_joint(result) -> np.ndarray:
    """Per chain: mean log joint (collapsed, the sampler's target) over the last 100 sweeps."""
    return result.idata.posterior["log_joint"].values[:, -100:].mean(1)


def _default_fit(X, n_clusters, **options):
    """fit_bcm at its defaults (the not-converged warning silenced: the row reports the run's message)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return fit_bcm(X, n_clusters, seed=SEED, progress_bar=False, **options)


def _against_paper_like(default, reference, y) -> str:
    """Notes comparing a default fit's chains (mean log joint over the kept draws) with chains started at the
    paper's clustering (every observation in the cluster of its label; mean of the last 100 sweeps)."""
    default_log_joint = default.run.summaries["log_joint"].mean(1)
    reference_log_joint = _final_log_joint(reference)
    return (
        f"started at the labels ({len(reference_log_joint)} chains x {DIGIT_SWEEPS} plain sweeps): accuracy per chain "
        f"{_listed(reference.unsupervised_accuracy(y)[:, -100:].mean(1))}, log joint {_listed(reference_log_joint, 0)}; "
        f"best of these minus best default chain {reference_log_joint.max() - default_log_joint.max():+.0f} "
        "(above 0: the default chains have not found the labels' mode; below 0: the posterior favours other modes)"
    )


def _listed(values, digits=2) -> str:
    return "[" + ", ".join(f"{v:.{digits}f}" for v in values) + "]"


@benchmark(
    "bcm_usps_digits",
    description=(
        "Paper fig. 2: USPS train split, 10-70 observations per digit, 7 bins, S = 10, alpha = 0.01, lambda = 1, "
        "c = 50, q = 0.8, 1000 sweeps. Rows 'half wrong': 4 chains from the paper's start (a random half of the "
        "observations with all tokens in a wrong cluster, the rest in the cluster of their digit; omega and "
        "prototypes then drawn from their conditionals). Fig. 2b: accuracy of the chain with the highest log "
        "joint after 1, 10, 100, 1000 sweeps, each observation labelled by its dominant cluster's prototype; "
        "final accuracy of every chain, also per token (the authors' code's measure). Fig. 2a: linear SVM "
        "trained on the fitted rows and tested on as many held-out rows (USPS test split), on BCM's pi "
        "(`transform`, fold-in, best chain) vs scikit-learn LDA topic proportions (S topics, 100 iterations; "
        "its time is the peer column). Rows 'true labels': 2 chains started with every observation in its "
        "digit's cluster, a reference: if their log joint (mean of the last 100 sweeps per chain) is above "
        "the half-wrong chains', those are stuck in lower modes (mixing); if not, the posterior itself does "
        "not favour the digit clustering."
    ),
)
def usps_digits() -> list[Comparison]:
    from sklearn.decomposition import LatentDirichletAllocation
    from sklearn.svm import LinearSVC

    rows = []
    for per_digit in DIGITS_PER_CLASS:
        usps = load_usps_bcm(per_digit, seed=SEED)
        held_out = load_usps_bcm(per_digit, split="test", seed=SEED)
        start = time.perf_counter()
        result = _fit_digits(usps, corrupt_half_labels(usps.y, N_CLUSTERS, seed=SEED), HALF_WRONG_CHAINS)
        ours = time.perf_counter() - start
        log_joint = _final_log_joint(result)
        accuracy = result.unsupervised_accuracy(usps.y)
        best = accuracy[np.argmax(log_joint)]
        start = time.perf_counter()
        lda = LatentDirichletAllocation(N_CLUSTERS, max_iter=100, random_state=SEED)
        lda_train = lda.fit_transform(token_counts(usps.X, 7))
        peer = time.perf_counter() - start
        lda_test = lda.transform(token_counts(held_out.X, 7))
        svm = LinearSVC(C=1.0, max_iter=20000)
        bcm_svm = svm.fit(result.transform(usps.X), usps.y).score(result.transform(held_out.X), held_out.y)
        lda_svm = svm.fit(lda_train, usps.y).score(lda_test, held_out.y)
        curve = ", ".join(f"{it}: {best[it - 1]:.2f}" for it in (1, 10, 100, DIGIT_SWEEPS))
        # the start puts digit s in cluster s: how many clusters begin with a prototype of their digit
        first_prototypes = result.idata.posterior_sites["prototype"].values[:, 0]
        right_digit = (usps.y[first_prototypes] == np.arange(N_CLUSTERS)).sum(-1)
        rows.append(
            Comparison(
                f"{per_digit} per digit (N = {10 * per_digit}), half wrong, {HALF_WRONG_CHAINS} chains",
                ours,
                "sklearn LDA (100 iterations)",
                peer,
                f"prototypes of their cluster's digit after sweep 1: {right_digit.tolist()} of 10 per chain; "
                f"fig. 2b best chain {curve}; final accuracy per chain {_listed(accuracy[:, -1])}, per token "
                f"{_listed(result.unsupervised_accuracy(usps.y, per='token')[:, -1])}; log joint per chain "
                f"{_listed(log_joint, 0)}; fig. 2a held-out SVM accuracy BCM pi {bcm_svm:.3f} vs LDA {lda_svm:.3f}",
            )
        )
        start = time.perf_counter()
        reference = _fit_digits(usps, usps.y, TRUE_LABEL_CHAINS)
        elapsed = time.perf_counter() - start
        reference_log_joint = _final_log_joint(reference)
        rows.append(
            Comparison(
                f"{per_digit} per digit, true labels, {TRUE_LABEL_CHAINS} chains",
                elapsed,
                "-",
                None,
                f"final accuracy per chain {_listed(reference.unsupervised_accuracy(usps.y)[:, -1])}; log joint per "
                f"chain {_listed(reference_log_joint, 0)}, best minus best half-wrong chain "
                f"{reference_log_joint.max() - log_joint.max():+.0f}",
            )
        )
    return rows


@benchmark(
    "bcm_recipes",
    description=(
        "Fig. 4b: the 56 recipes x 147 ingredients, S = 4, paper priors, fit_bcm's defaults (4 chains of "
        "parallel tempering from prior draws, until converged or 300 s). Accuracy: each recipe labelled by "
        "its dominant cluster's prototype's category "
        "(pasta / chili / brownies / punch), averaged over a chain's kept draws; chance (all pasta) is 0.43. "
        "Reported for every chain and for the chain holding the highest log joint (a label-free choice); "
        "notes list that draw's prototypes with the ingredients of their subspaces that they contain. Beside "
        "it, 2 chains of 1000 plain sweeps started at the four categories: whether the posterior favours the "
        "paper's clustering over the modes the default chains found."
    ),
)
def recipes() -> list[Comparison]:
    import pandas as pd

    data = load_recipes()
    frame = pd.DataFrame(data.X, columns=data.feature_names, index=data.sample_names)
    start = time.perf_counter()
    result = _default_fit(frame, 4)
    elapsed = time.perf_counter() - start
    accuracy = result.unsupervised_accuracy(data.y).mean(1)
    log_joint = result.run.summaries["log_joint"].mean(1)
    table = result.explain_frame(hide_value="0")
    prototypes = "; ".join(
        f"{row.prototype_name} ({data.target_names[data.y[row.prototype]]}, share {row.share:.2f}): {row.subspace}"
        for row in table.itertuples()
    )
    return [
        Comparison(
            f"recipes S = 4, defaults ({result.run.message()})",
            elapsed,
            "-",
            None,
            f"accuracy of the highest-log-joint chain {accuracy[result.best_chain]:.3f}; per chain "
            f"{_listed(accuracy)} (mean log joint {_listed(log_joint, 0)}); prototypes and subspaces: {prototypes}; "
            + _against_paper_like(result, _plain_sweeps(frame, 4, data.y, TRUE_LABEL_CHAINS), data.y),
        )
    ]


@benchmark(
    "bcm_usps_defaults",
    description=(
        "Fig. 2b on default fits: USPS train split, 10, 40 and 70 per digit, 7 bins, S = 10, paper priors, "
        "fit_bcm's defaults (4 chains of parallel tempering from prior draws, until converged or 300 s). "
        "Accuracy: each observation labelled by its dominant cluster's prototype's digit, averaged over a chain's "
        "kept draws (per observation, the paper's text; per token, the authors' code); the chain holding the "
        "highest log joint is the label-free choice. Beside each fit, 2 chains of 1000 plain sweeps started at "
        "the digit clustering: whether the posterior favours it over the modes the default chains found. Ours: "
        "the default fit's wall time (compilation included)."
    ),
)
def usps_defaults() -> list[Comparison]:
    rows = []
    for per_digit in DIGITS_PER_CLASS:
        usps = load_usps_bcm(per_digit, seed=SEED)
        start = time.perf_counter()
        result = _default_fit(usps.X, N_CLUSTERS, n_values=7)
        elapsed = time.perf_counter() - start
        accuracy = result.unsupervised_accuracy(usps.y).mean(1)
        per_token = result.unsupervised_accuracy(usps.y, per="token").mean(1)
        notes = (
            f"accuracy of the highest-log-joint chain {accuracy[result.best_chain]:.3f}; per chain "
            f"{_listed(accuracy)}, per token {_listed(per_token)}; mean log joint per chain "
            f"{_listed(result.run.summaries['log_joint'].mean(1), 0)}; "
            + _against_paper_like(result, _fit_digits(usps, usps.y, TRUE_LABEL_CHAINS), usps.y)
        )
        rows.append(Comparison(f"{per_digit} per digit (N = {10 * per_digit}), defaults ({result.run.message()})",
                               elapsed, "-", None, notes))  # fmt: skip
    return rows


HYPERPRIOR_SCANS = 200
HYPERPRIOR_RUNGS = 8
"""The first tuning round's ladder of a default fit (``inference.convergence``)."""


class ScanTimer:
    """Seconds per scan and chain of ``fit_bcm(X, n_clusters, num_chains=num_chains, **options)`` without
    tuning: the difference of fits of ``scans`` and ``scans // 10`` scans, so that the set-up (tables, the
    fit-time check, compilation once cached) and the result cancel out."""

    def __init__(self, X, n_clusters, scans, num_chains=4, **options):
        self.X, self.n_clusters, self.scans, self.num_chains = X, n_clusters, scans, num_chains
        self.options = {"num_warmup": 0, "progress_bar": False, "seed": SEED, "num_chains": num_chains, **options}
        self._fit(scans // 10)  # compiles

    def _fit(self, scans):
        start = time.perf_counter()
        fit_bcm(self.X, self.n_clusters, num_samples=scans, **self.options)
        return time.perf_counter() - start

    def __call__(self):
        short, long = self._fit(self.scans // 10), self._fit(self.scans)
        return (long - short) / (self.scans - self.scans // 10) / self.num_chains


@benchmark(
    "bcm_hyperprior_cost",
    description=(
        "The cost of sampling q ~ Beta(2, 2) within the chain (its conjugate draw given omega and the omega "
        "prior's table rebuilt from it, on every replica of every scan), and of sampling alpha ~ Gamma(1, 10) "
        "beside it (slice sampling on log alpha given z), and of sampling lam ~ Gamma(2, 2) and c ~ Gamma(5, 0.1) "
        "instead (slice sampling on the log of each given the state, the likelihood's tables rebuilt per replica), "
        "against the same fit with q = 0.5, alpha = 0.1, lam = 1 and c = 50 fixed (the hyperpriors' means): fit_bcm on the recipes (56 x 147, S = 4), 4 chains x 8 rungs (the first "
        "tuning round's ladder), no tuning; seconds per scan and chain from the difference of fits of 200 and 20 "
        "scans. All are timed once per round, in 3 interleaved rounds; the table gives medians. Goal: the fit "
        "with q sampled costs at most 1.2x the fixed one (ratio fixed / sampled >= 0.83)."
    ),
)
def hyperprior_cost() -> list[Comparison]:
    X = load_recipes().X
    ladder = dict(num_chains=4, n_temperatures=HYPERPRIOR_RUNGS)
    q, alpha = dist.Beta(2.0, 2.0), dist.Gamma(1.0, 10.0)
    lam, c = dist.Gamma(2.0, 2.0), dist.Gamma(5.0, 0.1)
    priors = {"q": bcm.Priors(q=q, alpha=0.1), "q and alpha": bcm.Priors(q=q, alpha=alpha),
              "lam and c": bcm.Priors(q=0.5, alpha=0.1, lam=lam, c=c), "fixed": bcm.Priors(q=0.5, alpha=0.1)}
    timers = {name: ScanTimer(X, 4, HYPERPRIOR_SCANS, priors=value, **ladder) for name, value in priors.items()}
    return rows_against(timers, "fixed", "the same fit, q = 0.5, alpha = 0.1, lam = 1 and c = 50 fixed",
                        "s / scan / chain, {} sampled")
