"""Running a custom discrete kernel with NumPyro's ``MCMC``: chain layout, continuation.

The fast samplers (BCM collapsed Gibbs, BRL Metropolis-Hastings) are ``numpyro.infer.mcmc.MCMCKernel``
subclasses; this module runs them the same way: one seed gives the same chains on the same machine,
chains are vectorized on one device or sharded over several, progress bars come from NumPyro, and a
finished run can be continued (resumed) for more draws without another warm-up.
"""

from __future__ import annotations

import jax
from numpyro.infer import MCMC

from interpretable_zoo.inference.validation import check_positive_int, check_seed

CHAIN_METHODS = ("vectorized", "parallel", "sequential")


def default_chain_method(num_chains: int) -> str:
    """'parallel' (one chain per device) when there are enough devices, else 'vectorized' on one device."""
    return "parallel" if num_chains > 1 and jax.local_device_count() >= num_chains else "vectorized"


def run_mcmc(
    kernel,
    *,
    num_warmup: int,
    num_samples: int,
    num_chains: int = 4,
    seed: int = 0,
    model_args: tuple = (),
    model_kwargs: dict | None = None,
    init_params=None,
    chain_method: str | None = None,
    progress_bar: bool = True,
    extra_fields: tuple[str, ...] = ("potential_energy", "accept_prob"),
) -> MCMC:
    """Run ``kernel`` for ``num_warmup`` + ``num_samples`` iterations on ``num_chains`` chains.

    Returns the ``MCMC`` object (draws via ``get_samples(group_by_chain=True)``; convert with
    ``diagnostics.to_inference_data``). ``num_warmup`` may be 0 for kernels without adaptation.
    """
    num_warmup = check_positive_int(num_warmup, "num_warmup", minimum=0)
    num_samples = check_positive_int(num_samples, "num_samples")
    num_chains = check_positive_int(num_chains, "num_chains")
    seed = check_seed(seed)
    chain_method = chain_method or default_chain_method(num_chains)
    if chain_method not in CHAIN_METHODS:
        raise ValueError(f"chain_method: expected one of {CHAIN_METHODS}, got {chain_method!r}")
    mcmc = MCMC(
        kernel,
        num_warmup=num_warmup,
        num_samples=num_samples,
        num_chains=num_chains,
        chain_method=chain_method,
        progress_bar=progress_bar,
    )
    mcmc.run(
        jax.random.PRNGKey(seed),
        *model_args,
        init_params=init_params,
        extra_fields=extra_fields,
        **(model_kwargs or {}),
    )
    return mcmc


def continue_mcmc(mcmc: MCMC, num_samples: int | None = None, *, extra_fields=("potential_energy", "accept_prob")) -> MCMC:
    """Continue a finished run from its last state for ``num_samples`` more draws (default: as many again).

    No warm-up is repeated; the random stream continues from the last state's key, so continuing a run
    of n draws by m gives the same chains as one run of n + m draws with the same seed. Afterwards
    ``mcmc.get_samples()`` holds only the new draws.
    """
    if num_samples is not None:
        mcmc.num_samples = check_positive_int(num_samples, "num_samples")
    mcmc.post_warmup_state = mcmc.last_state
    mcmc.run(mcmc.post_warmup_state.rng_key, *mcmc._args, extra_fields=extra_fields, **mcmc._kwargs)
    return mcmc
