"""BRL and BCM fits whose chains are split over the devices of several processes (``jax.distributed``).

Start one process per host, each with the same arguments except ``--process-id``::

    python docs/multihost_example.py --coordinator host0:1234 --num-processes 2 --process-id 0   # on host0
    python docs/multihost_example.py --coordinator host0:1234 --num-processes 2 --process-id 1   # on host1

Under SLURM, ``jax.distributed.initialize()`` reads the coordinator, the number of processes and each one's id
from the job's environment, so the script takes none of them (a batch script)::

    #!/bin/bash
    #SBATCH --nodes=2 --ntasks-per-node=1
    srun python docs/multihost_example.py --checkpoints "$SCRATCH/multihost"

The processes may share one machine. On CPUs, each process can show several host devices, and the
processes exchange arrays through gloo (JAX's CPU default; ``JAX_CPU_COLLECTIVES_IMPLEMENTATION=gloo``
selects it where it is not); this runs 2 processes of 2 devices each::

    export XLA_FLAGS=--xla_force_host_platform_device_count=2
    python docs/multihost_example.py --coordinator 127.0.0.1:1234 --num-processes 2 --process-id 0 &
    python docs/multihost_example.py --coordinator 127.0.0.1:1234 --num-processes 2 --process-id 1

After ``jax.distributed.initialize`` every process sees the devices of all of them in ``jax.devices()``;
each fit splits its 8 chains over the most of them that divide 8 (``devices=None``), each device runs its
own chains, and every process receives every chain's draws. Every process must make the same calls with
the same data and seed. The draws equal those of the same fits in one process, on one device or several:
``tests/test_multiprocess.py`` runs :func:`fit_models` as 2 processes of 2 CPU devices, until converged,
for a fixed number of draws and under a time budget, and compares the draws of the processes with each
other and with those of one process on 1 device (for the fixed number, on 4 devices too).

``--checkpoints FOLDER``, a folder that every process sees: each fit keeps its checkpoint there, which
process 0 writes; after a stopped job, the same command resumes the fits where they were, with the draws
of an uninterrupted run (on any number of processes or devices).

On CPUs gloo first reports its connections ("[Gloo] Rank 0 is connected to 3 peer ranks..."); process 0
then shows a progress bar per fit (on stderr) and prints, here for 2 processes of 2 CPU devices each::

    8 chains on 4 devices of 2 processes
    BRL converged: worst R-hat 1.008, worst bulk ESS 797 over 8 chains x 256 draws (every 1 scans), 4 temperatures (0.0537 round trips per scan and chain)
    if x3 then y=1 probability 83% (75%-89%)
    else y=1 probability 15% (9%-23%)
    BCM converged: worst R-hat 1.009, worst bulk ESS 437 over 8 chains x 64 draws (every 1 scans), 8 temperatures (0.00391 round trips per scan and chain)
    BCM: 3 clusters, each a prototype and its subspace (highest-log-joint draw)
    cluster 0 (33% of tokens): prototype 23 (23); subspace of 4: x0=2 (0.99), x1=2 (0.99), x2=0 (0.98), x3=1 (0.97)
    cluster 1 (33% of tokens): prototype 12 (12); subspace of 4: x0=1 (1.00), x1=1 (0.99), x2=1 (0.97), x3=1 (0.98)
    cluster 2 (33% of tokens): prototype 1 (1); subspace of 4: x0=0 (1.00), x1=0 (1.00), x2=0 (0.96), x3=0 (0.98)
"""

import argparse
from pathlib import Path

import jax
import numpy as np

CHAINS = 8


def fit_models(*, checkpoints=None, checkpoint_seconds: float = 60.0, **options) -> dict:
    """{"brl": BRLResult, "bcm": BCMResult}: BRL on planted rule lists (200 samples, 5 features) and BCM (3
    clusters) on three groups of 10 categorical observations, :data:`CHAINS` chains each, seed 0, split over
    every device of every process. ``options`` go to both fits (e.g. ``num_samples``, ``max_seconds``,
    ``devices``); ``checkpoints``: a folder (made if missing) for their checkpoints (``brl.ckpt``,
    ``bcm.ckpt``), written at most every ``checkpoint_seconds``."""
    import interpretable_zoo as iz
    from interpretable_zoo.inference.checkpoint import Checkpoint

    rules = iz.datasets.planted_rule_lists(n_samples=200, n_features=5, seed=0)
    codes = np.repeat([[0, 0, 0, 0], [1, 1, 1, 1], [2, 2, 0, 1]], 10, axis=0)
    options = {"num_chains": CHAINS, "seed": 0, "progress_bar": None if jax.process_index() == 0 else False, **options}

    if checkpoints is not None:
        Path(checkpoints).mkdir(parents=True, exist_ok=True)

    def checkpoint(name):
        return None if checkpoints is None else Checkpoint(Path(checkpoints) / f"{name}.ckpt", checkpoint_seconds)

    return {
        "brl": iz.fit_brl(rules.X, rules.y, antecedents=rules.extras["antecedents"], checkpoint=checkpoint("brl"),
                          **options),
        "bcm": iz.fit_bcm(codes, 3, checkpoint=checkpoint("bcm"), **options),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--coordinator", help="address:port of process 0 (default: from the cluster's environment)")
    parser.add_argument("--num-processes", type=int)
    parser.add_argument("--process-id", type=int)
    parser.add_argument("--checkpoints", help="a folder that every process sees, for the fits' checkpoints")
    args = parser.parse_args()
    jax.distributed.initialize(args.coordinator, args.num_processes, args.process_id)

    results = fit_models(checkpoints=args.checkpoints)
    if jax.process_index() == 0:
        print(f"{CHAINS} chains on {len(jax.devices())} devices of {jax.process_count()} processes")
        for name, result in results.items():
            print(f"{name.upper()} {result.run.message()}")
            print(result.explain())


if __name__ == "__main__":
    main()
