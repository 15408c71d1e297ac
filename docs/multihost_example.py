"""Chains of one BRL fit split over the devices of several hosts (``jax.distributed``).

Start one process per host, each with the same arguments except ``--process-id``::

    python docs/multihost_example.py --coordinator host0:1234 --num-processes 2 --process-id 0   # on host0
    python docs/multihost_example.py --coordinator host0:1234 --num-processes 2 --process-id 1   # on host1

After ``jax.distributed.initialize`` every process sees the devices of all hosts in ``jax.devices()``;
``fit_brl(..., devices=None)`` splits its chains over the most of them that divide ``num_chains``, each
process runs its share, and each process receives every chain's draws. Every process must run the same
calls with the same data and seed. The draws equal those of the same fit on one device.

This script has not been run on several hosts by the project's tests (they run on one machine); the
single-host half of it, chains split over several devices, is tested in ``tests/test_devices.py``.
"""

import argparse

import jax
import numpy as np


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--coordinator", required=True, help="address:port of process 0")
    parser.add_argument("--num-processes", type=int, required=True)
    parser.add_argument("--process-id", type=int, required=True)
    parser.add_argument("--chains-per-device", type=int, default=4)
    args = parser.parse_args()
    jax.distributed.initialize(args.coordinator, args.num_processes, args.process_id)

    import interpretable_zoo as iz
    from interpretable_zoo.datasets.planted_rule_lists import planted_rule_lists

    data = planted_rule_lists(seed=0)
    num_chains = args.chains_per_device * len(jax.devices())
    result = iz.fit_brl(data.X, data.y, antecedents=data.extras["antecedents"], num_chains=num_chains, seed=0,
                        progress_bar=args.process_id == 0)
    if args.process_id == 0:
        print(f"{num_chains} chains on {len(jax.devices())} devices of {jax.process_count()} hosts")
        print(result.run.message())
        print(result.explain())
        print("mean list length per chain:", np.round(result.run.summaries["length"].mean(1), 2))


if __name__ == "__main__":
    main()
