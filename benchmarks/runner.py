"""Benchmark registry, timing and the RESULTS.md writer.

A benchmark module ``benchmarks/bench_<name>.py`` registers functions with :func:`benchmark`; each runs
our implementation and a peer on the same data in the same process and returns :class:`Comparison`
rows. The runner rewrites, in ``benchmarks/RESULTS.md``, the section of every benchmark it ran (with
the machine, versions and command of that run) and keeps the sections of benchmarks it did not run.
"""

from __future__ import annotations

import importlib
import importlib.metadata
import json
import math
import os
import platform
import re
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path

RESULTS_PATH = Path(__file__).with_name("RESULTS.md")
_HEADER = (
    "# Benchmark results\n\n"
    "Written by `python -m benchmarks` (or `make bench`). Each section is one benchmark run side by side "
    "with its peer in one process; ratios are peer time / our time (above 1: we are faster). Absolute "
    "times hold only for the machine named in the section.\n\n"
)


class PeerUnavailable(Exception):
    """Raised by a benchmark whose peer package is not installed (install the `bench` extra)."""


def import_peer(module: str, install_hint: str):
    """Import a peer's module, or raise :class:`PeerUnavailable` saying how to install it."""
    try:
        return importlib.import_module(module)
    except ImportError as error:
        raise PeerUnavailable(f"{module} is not installed ({error}); {install_hint}") from error


@dataclass(frozen=True)
class Comparison:
    """One row: our time and the peer's on the same task, with free-form notes (accuracy, sizes...).

    ``columns``: extra named cells, (name, text) pairs, shown between the ratio and the notes; a NaN
    ``ours_seconds`` (a run that gave no time) shows as n/a."""

    task: str
    ours_seconds: float
    peer: str
    peer_seconds: float | None
    notes: str = ""
    columns: tuple[tuple[str, str], ...] = ()

    @property
    def speedup(self) -> float | None:
        if self.peer_seconds is None or not self.ours_seconds > 0:
            return None
        return self.peer_seconds / self.ours_seconds


@dataclass
class Benchmark:
    name: str
    function: Callable[[], list[Comparison]]
    description: str = ""
    peers: tuple[str, ...] = ()  # distribution names of the peer packages, for the versions line


REGISTRY: dict[str, Benchmark] = {}


def benchmark(name: str, *, peers: tuple[str, ...] = (), description: str = ""):
    """Register ``function() -> list[Comparison]`` under ``name`` (unique across benchmark modules).

    ``peers`` names the peer distributions whose versions the results record; the description
    defaults to the function's docstring and should state the goal the ratios are judged against.
    """

    def register(function):
        if name in REGISTRY:
            raise ValueError(f"name: benchmark {name!r} is registered twice")
        REGISTRY[name] = Benchmark(name, function, description or (function.__doc__ or "").strip(), peers)
        return function

    return register


def fresh_process_record(code: str) -> dict:
    """The last JSON line printed by ``python -c code``, run from the project's root in a new process with an
    empty persistent compilation cache; a RuntimeError with the end of its stderr when it fails or prints
    none, subprocess.TimeoutExpired when it runs past half an hour."""
    with tempfile.TemporaryDirectory() as cache:
        completed = subprocess.run(
            [sys.executable, "-c", code], cwd=RESULTS_PATH.parents[1], capture_output=True, text=True,
            env={**os.environ, "INTERPRETABLE_ZOO_CACHE_DIR": cache}, timeout=1800,
        )  # fmt: skip
    records = [line for line in completed.stdout.splitlines() if line.startswith("{")]
    if completed.returncode != 0 or not records:
        raise RuntimeError(f"exited with {completed.returncode}: {completed.stderr.strip()[-500:]}")
    return json.loads(records[-1])


def time_call(function: Callable[[], object], *, repeat: int = 5, warmup: int = 1) -> float:
    """Median wall time in seconds of ``function()`` over ``repeat`` calls after ``warmup`` untimed calls.

    The untimed calls absorb JIT compilation; results that are JAX arrays must be blocked on inside
    ``function`` (``jax.block_until_ready``) so the time covers the computation, not its dispatch.
    """
    if repeat < 1:
        raise ValueError(f"repeat: must be at least 1, got {repeat}")
    for _ in range(warmup):
        function()
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        function()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


SPEED_ROUNDS = 3
"""Rounds of :func:`interleaved_rounds` in the speed benchmarks, which report medians over them."""


def interleaved_rounds(timers: dict[str, Callable[[], float]], rounds: int) -> list[dict[str, float]]:
    """Every timer called once per round, for ``rounds`` rounds: the machine's speed drifts, and interleaving
    exposes every configuration to the same drift. Returns each round's seconds by timer name."""
    return [{name: timer() for name, timer in timers.items()} for _ in range(rounds)]


def median_of(rounds: list[dict[str, float]], name: str) -> float:
    """The median over ``rounds`` (:func:`interleaved_rounds`) of timer ``name``'s seconds."""
    return statistics.median(r[name] for r in rounds)


def rows_against(timers: dict[str, Callable[[], float]], peer: str, peer_label: str, task: str) -> list[Comparison]:
    """Every timer but ``peer`` against ``peer``, all timed in :data:`SPEED_ROUNDS` interleaved rounds: one
    row per timer, titled ``task.format(name)``, with medians and the per-round ratio range."""
    rounds = interleaved_rounds(timers, SPEED_ROUNDS)
    return [Comparison(task.format(name), median_of(rounds, name), peer_label, median_of(rounds, peer),
                       ratio_range(rounds, name, peer)) for name in timers if name != peer]


def ratio_range(rounds: list[dict[str, float]], ours: str, peer: str) -> str:
    """The lowest and highest per-round ratio of ``peer``'s seconds over ``ours``, as a note."""
    ratios = [r[peer] / r[ours] for r in rounds]
    return f"ratio per round {min(ratios):.2f}x-{max(ratios):.2f}x"


def machine_description() -> str:
    cpu = platform.processor() or platform.machine()
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    try:
        import jax

        devices = ", ".join(sorted({f"{d.platform}:{d.device_kind}" for d in jax.devices()}))
    except Exception as error:  # the description must not fail the run
        devices = f"unknown ({error})"
    return f"{platform.system()} {platform.machine()}, {cpu}, {os.cpu_count()} logical cores, JAX devices: {devices}"


def package_versions(extra: tuple[str, ...] = ()) -> str:
    names = ("jax", "jaxlib", "numpyro", "arviz", "numpy", "scipy", "scikit-learn", "numba", *extra)
    found = []
    for name in names:
        try:
            found.append(f"{name} {importlib.metadata.version(name)}")
        except importlib.metadata.PackageNotFoundError:
            found.append(f"{name} (not installed)")
    return f"Python {platform.python_version()}; " + ", ".join(found)


def format_seconds(seconds: float | None) -> str:
    if seconds is None or math.isnan(seconds):
        return "n/a"
    if seconds >= 1:
        return f"{seconds:.2f} s"
    if seconds >= 1e-3:
        return f"{seconds * 1e3:.2f} ms"
    if seconds >= 1e-6:
        return f"{seconds * 1e6:.1f} µs"
    return f"{seconds * 1e9:.1f} ns"


def backend_suffix() -> str:
    """``""`` on JAX's CPU backend, else ``"_gpu"`` (or the backend's name): results and plots of a run on an
    accelerator are kept beside the CPU ones, under the benchmark's name with this suffix."""
    import jax

    backend = jax.default_backend()
    return "" if backend == "cpu" else f"_{backend}"


def section_name(bench: Benchmark) -> str:
    """The RESULTS.md section a run of ``bench`` writes: its name, suffixed on an accelerator."""
    return bench.name + backend_suffix()


def render_section(bench: Benchmark, rows: list[Comparison], command: str, load_before: float) -> str:
    """The RESULTS.md section of one run; ``load_before`` is the 1-minute load average before it started
    (well above 0 means other work shared the cores and the absolute times are inflated)."""
    stamp = datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    name = section_name(bench)
    lines = [
        f"<!-- benchmark:{name} -->",
        f"## {name}",
        "",
        bench.description,
        "",
        f"- run: {stamp}, `{command}`",
        f"- machine: {machine_description()}; 1-minute load average before the run: {load_before:.1f}",
        f"- versions: {package_versions(bench.peers)}",
        "",
    ]
    extra = list(dict.fromkeys(name for row in rows for name, _ in row.columns))
    headers = ["task", "ours", "peer", "peer time", "peer / ours", *extra, "notes"]
    lines += ["| " + " | ".join(headers) + " |", "|" + "---|" * len(headers)]
    for row in rows:
        speedup = "n/a" if row.speedup is None else f"{row.speedup:.2f}x"
        cells = dict(row.columns)
        lines.append(
            f"| {row.task} | {format_seconds(row.ours_seconds)} | {row.peer} | "
            f"{format_seconds(row.peer_seconds)} | {speedup} | "
            + "".join(f"{cells.get(name, '')} | " for name in extra)
            + f"{row.notes} |"
        )
    lines += ["", f"<!-- end:{name} -->", ""]
    return "\n".join(lines)


_RUN_LINES = ("- run: ", "- machine: ", "- versions: ")
"""The bullets a run writes itself; a section's other bullets are notes written by hand."""


def hand_written_notes(section: str) -> list[str]:
    """The bullets of a RESULTS.md section that no run wrote (the code measured, earlier runs, trials), each
    with its indented continuation lines. The section's ``code:`` note described the run being replaced,
    so it comes back as a note on that run, dated by it."""
    header = section.split("\n| ", 1)[0]
    run = re.search(r"^- run: ([^,]+),", header, re.M)
    notes = []
    for bullet in re.findall(r"^- .*(?:\n  .*)*", header, re.M):
        if bullet.startswith(_RUN_LINES):
            continue
        if bullet.startswith("- code: ") and run:
            bullet = f"- before (the {run.group(1)} run): code: {bullet.removeprefix('- code: ')}"
        notes.append(bullet)
    return notes


def update_results(sections: dict[str, str], path: Path = RESULTS_PATH) -> None:
    """Replace (or append) the given sections in RESULTS.md, keeping every other section as it was, and the
    replaced section's hand-written notes (:func:`hand_written_notes`) below the new run's line."""
    text = path.read_text() if path.exists() else _HEADER
    for name, section in sections.items():
        pattern = re.compile(rf"<!-- benchmark:{re.escape(name)} -->\n.*?<!-- end:{re.escape(name)} -->\n", re.S)
        old = pattern.search(text)
        if old:
            lines = section.split("\n")
            after_run = next(i for i, line in enumerate(lines) if line.startswith("- run: ")) + 1
            section = "\n".join(lines[:after_run] + hand_written_notes(old.group(0)) + lines[after_run:])
            text = text[:old.start()] + section + text[old.end():]
        else:
            text = text.rstrip("\n") + "\n\n" + section
    path.write_text(text)


NARROWING_VARIABLES = (
    "CONVERGENCE_CASES", "CONVERGENCE_UNTEMPERED", "CONVERGENCE_SETTINGS", "TIME_TO_ANSWER_CASES", "SCALING_SIZES", "SCALING_QUERIES",
    "SCALING_CHAINS", "SCALING_CHAIN_ITERATIONS", "SCALING_TIMEOUT",
)  # fmt: skip
"""Environment variables that narrow or resize a benchmark's cases; those set are part of its command line."""


def command_line() -> str:
    settings = [f"{name}={os.environ[name]}" for name in NARROWING_VARIABLES if os.environ.get(name)]
    return " ".join([*settings, "python -m benchmarks", *sys.argv[1:]])
