"""Run registered benchmarks and rewrite their sections of benchmarks/RESULTS.md.

Usage: ``python -m benchmarks [-k SUBSTRING] [--list]``. Benchmark modules are the files
``benchmarks/bench_*.py``; a benchmark whose peer is not installed is reported and skipped
(install the peers with ``pip install -e '.[bench]'``, which ``make bench`` does), and so is one
whose data folder or file is missing (set INTERPRETABLE_ZOO_DATA). On an accelerator (JAX's default
backend not the CPU) a benchmark writes its section under its name with the backend as suffix (``_gpu``),
beside the CPU results. Variables such as CONVERGENCE_CASES or SCALING_CHAINS narrow a run (see each benchmark);
a narrowed run rewrites its section with the cases it ran, and the section's command line names the variables.
A rewritten section keeps the notes written by hand below its run line (``runner.hand_written_notes``).
"""

from __future__ import annotations

import argparse
import importlib
import os
import sys
from pathlib import Path

from interpretable_zoo.datasets import DataHomeMissing

from benchmarks.runner import REGISTRY, PeerUnavailable, command_line, render_section, section_name, update_results


def discover() -> None:
    for path in sorted(Path(__file__).parent.glob("bench_*.py")):
        importlib.import_module(f"benchmarks.{path.stem}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks", description=__doc__.splitlines()[0])
    parser.add_argument("-k", dest="keyword", default=None, help="run only benchmarks whose name contains this")
    parser.add_argument("--list", action="store_true", help="list the registered benchmarks and exit")
    args = parser.parse_args(argv)

    discover()
    selected = [b for name, b in REGISTRY.items() if args.keyword is None or args.keyword in name]
    if args.list or not selected:
        print("\n".join(REGISTRY) if REGISTRY else "no benchmarks registered")
        return 0 if args.list or not args.keyword else 1

    sections, failed = {}, []
    for bench in selected:
        print(f"--- {bench.name}", flush=True)
        load_before = os.getloadavg()[0]
        try:
            rows = bench.function()
        except (PeerUnavailable, FileNotFoundError, DataHomeMissing) as reason:  # a peer or the data is missing
            print(f"skipped: {reason}")
            failed.append(bench.name)
            continue
        for row in rows:
            speedup = "n/a" if row.speedup is None else f"{row.speedup:.2f}x"
            print(f"{row.task}: ours {row.ours_seconds:.4g} s, {row.peer} {row.peer_seconds} s, {speedup} {row.notes}")
        sections[section_name(bench)] = render_section(bench, rows, command_line(), load_before)
    if sections:
        update_results(sections)
        print(f"updated {len(sections)} section(s) of benchmarks/RESULTS.md")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
