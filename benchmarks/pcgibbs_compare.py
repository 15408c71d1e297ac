"""The partially collapsed Gibbs kernel of BCM (``inference.bcm_pcgibbs``: phi explicit, all observations at
once) against the collapsed kernel (``inference.bcm_gibbs``) and the `lda` package, side by side in one process.

    INTERPRETABLE_ZOO_DATA=... python -m benchmarks.pcgibbs_compare sweeps     # USPS 70 per digit, 100 sweeps
    INTERPRETABLE_ZOO_DATA=... python -m benchmarks.pcgibbs_compare ess        # recipes, S = 4, untempered
    INTERPRETABLE_ZOO_DATA=... python -m benchmarks.pcgibbs_compare tempered   # recipes, S = 4, tempered

``sweeps``: 100 sweeps of 1 chain at beta = 1 from a prior draw, each program compiled first, then the
kernels and `lda` timed in turn, ``--repeats`` times interleaved; medians and ratios. ``ess``: 4 chains for about
``--seconds`` each (``inference.convergence.sample`` with one temperature and a fixed number of scans, set
from a short run of the same program), bulk ESS per second (compilation excluded) of the summaries both
kernels share: the sorted cluster sizes, the active subspace features and the collapsed log joint (the
collapsed kernel's ``log_joint``, the partially collapsed kernel's ``collapsed_log_joint``). ``tempered``:
both kernels at ``n_temperatures="auto"`` for ``--seconds`` each; R-hat, ESS, Lambda and round trips.
"""

from __future__ import annotations

import argparse
import logging
import statistics
import time

import jax
import jax.numpy as jnp
import numpy as np

from benchmarks.bench_bcm import token_counts
from benchmarks.bench_convergence import shared_diagnostics
from interpretable_zoo.datasets import load_recipes
from interpretable_zoo.datasets.smiley_faces import load_usps_bcm
from interpretable_zoo.inference import bcm_gibbs, bcm_pcgibbs, convergence
from interpretable_zoo.inference.bcm import _kernel as collapsed_kernel

SEED = 0
USPS_CLUSTERS, USPS_BINS, SWEEPS = 10, 7, 100
RECIPES_CLUSTERS = 4


def _sweep_program(module, static, data, n_sweeps: int):
    """A compiled run of ``n_sweeps`` sweeps of one chain at beta = 1 from a prior draw; returns a callable."""
    keys = jax.random.split(jax.random.PRNGKey(SEED), 1)
    states = jax.jit(jax.vmap(lambda key: module.init(static, data, key)))(keys)
    betas = jnp.ones(1)

    def sweep(i, states):
        return module.step(static, data, states, jax.vmap(lambda key: jax.random.fold_in(key, i))(keys), betas)[0]

    run = jax.jit(lambda s: jax.lax.fori_loop(0, n_sweeps, sweep, s)).lower(states).compile()
    return lambda: jax.block_until_ready(run(states))


def compare_sweeps(repeats: int) -> None:
    import lda

    logging.getLogger("lda").setLevel(logging.WARNING)
    codes = load_usps_bcm(70).X
    counts = token_counts(codes, USPS_BINS)
    n_values = np.full(codes.shape[1], USPS_BINS)
    programs = {
        "partially collapsed": _sweep_program(bcm_pcgibbs, *bcm_pcgibbs.make_target(codes, USPS_CLUSTERS, n_values=n_values), SWEEPS),
        "collapsed, no split-merge": _sweep_program(
            bcm_gibbs, *bcm_gibbs.make_target(codes, USPS_CLUSTERS, n_values=n_values, split_merge_clusters=0), SWEEPS),
        "collapsed, split-merge every 4th": _sweep_program(
            bcm_gibbs, *bcm_gibbs.make_target(codes, USPS_CLUSTERS, n_values=n_values), SWEEPS),
        "lda": lambda: lda.LDA(n_topics=USPS_CLUSTERS, n_iter=SWEEPS, random_state=SEED, refresh=SWEEPS).fit(counts),
    }
    seconds = {name: [] for name in programs}
    for _ in range(repeats):
        for name, program in programs.items():
            start = time.perf_counter()
            program()
            seconds[name].append(time.perf_counter() - start)
    median = {name: statistics.median(values) for name, values in seconds.items()}
    print(f"USPS {codes.shape[0]} x {codes.shape[1]}, S = {USPS_CLUSTERS}, {SWEEPS} sweeps, 1 chain, beta = 1, "
          f"{repeats} interleaved repeats (medians)")
    for name, value in median.items():
        print(f"  {name:34s} {value:7.3f} s  ({codes.size * SWEEPS / value / 1e6:5.2f} M tokens/s)  "
              f"speed vs lda {median['lda'] / value:5.2f}x  vs partially collapsed {median['partially collapsed'] / value:5.2f}x  "
              f"all: {', '.join(f'{v:.3f}' for v in seconds[name])}")


def _kernels(recipes):
    """name -> (kernel, static, data, name of the collapsed log joint among its summaries)."""
    return {
        "collapsed": (collapsed_kernel(store_z=False), *bcm_gibbs.make_target(recipes.X, RECIPES_CLUSTERS), "log_joint"),
        "partially collapsed": (bcm_pcgibbs.KERNEL, *bcm_pcgibbs.make_target(recipes.X, RECIPES_CLUSTERS),
                                "collapsed_log_joint"),
    }


def compare_ess(seconds: float, num_chains: int) -> None:
    recipes = load_recipes()
    print(f"recipes {recipes.X.shape}, S = {RECIPES_CLUSTERS}, {num_chains} chains, one temperature, ~{seconds:.0f} s each")
    for name, (kernel, static, data, log_joint_name) in _kernels(recipes).items():
        options = dict(num_chains=num_chains, seed=SEED, n_temperatures=1, tuning_rounds=0, scans_per_chunk=256,
                       progress_bar=False)
        convergence.sample(kernel, static, data, num_samples=256, **options)  # compiles the program
        probe = convergence.sample(kernel, static, data, num_samples=512, **options)
        per_scan = probe.seconds["sampling"] / probe.n_scans
        n_scans = int(seconds / per_scan)
        run = convergence.sample(kernel, static, data, num_samples=n_scans, max_draws=n_scans, **options)
        spent = run.seconds["sampling"]
        table = shared_diagnostics(run.summaries, log_joint_name)
        print(f"  {name}: {n_scans} scans in {spent:.1f} s ({n_scans / spent:.1f} scans/s)")
        for summary, (rhat, ess) in table.items():
            print(f"    {summary:22s} R-hat {rhat:6.3f}  bulk ESS {ess:8.1f}  ESS/s {ess / spent:7.2f}  "
                  f"ESS per 1000 scans {1000 * ess / n_scans:6.2f}")


def compare_tempered(seconds: float, num_chains: int) -> None:
    recipes = load_recipes()
    print(f"recipes {recipes.X.shape}, S = {RECIPES_CLUSTERS}, {num_chains} chains, n_temperatures='auto', {seconds:.0f} s each")
    for name, (kernel, static, data, log_joint_name) in _kernels(recipes).items():
        target = convergence.ConvergenceTarget(max_seconds=seconds)
        run = convergence.sample(kernel, static, data, num_chains=num_chains, seed=SEED, target=target,
                                 progress_bar=False)
        table = shared_diagnostics(run.summaries, log_joint_name)
        rhat, ess = convergence.worst(table)
        print(f"  {name}: {run.n_temperatures} rungs, Lambda {run.barrier:.2f}, {run.round_trip_rate:.4f} round trips "
              f"per scan and chain, {run.n_scans} scans, {run.seconds['sampling']:.1f} s sampling + "
              f"{run.seconds['compile']:.1f} s compile; worst R-hat {rhat:.3f}, worst bulk ESS {ess:.1f}")
        for summary, (r, e) in table.items():
            print(f"    {summary:22s} R-hat {r:6.3f}  bulk ESS {e:8.1f}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("part", choices=("sweeps", "ess", "tempered"))
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--seconds", type=float, default=None, help="per kernel (default 60 for ess, 120 for tempered)")
    parser.add_argument("--chains", type=int, default=4)
    args = parser.parse_args()
    if args.part == "sweeps":
        compare_sweeps(args.repeats)
    elif args.part == "ess":
        compare_ess(args.seconds or 60.0, args.chains)
    else:
        compare_tempered(args.seconds or 120.0, args.chains)


if __name__ == "__main__":
    main()
