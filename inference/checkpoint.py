"""Checkpoints of a tempered run (``inference.convergence``), and saving and loading fitted results.

A run given ``checkpoint=`` writes its state after a chunk of scans at most every ``every_seconds``: where
it is (tuning round r, or the sampling round of n scans), the ladder (every replica's state and random
key), the schedule, the kernel's learned proposal (if any), and the chunks of the current round (and,
when sampling, of the round before it). A later call with the same checkpoint, kernel, data and settings
resumes there: the chunks from then on are the ones the uninterrupted run computes, so the same seed gives
the same draws whether a run went in one go or was stopped (Ctrl-C, a killed process) and resumed. A
finished run removes its checkpoint. A checkpoint of another kernel, data set or settings is refused
(ValueError), never silently continued. With several processes (``jax.distributed``), process 0 writes it,
on the clock every process reads alike (``tempering.now``), and it must lie where every process sees it. It
holds the whole run on the host, so it resumes on any number of devices or processes, with the same draws.

Files are Python pickles (a checkpoint holds NumPy arrays; a saved result, the result object with its
trace, kernel tables and final ladder, so a loaded result predicts, explains and ``extend``s as before)
behind a one-line header: the format tag, the pickle's length in bytes and its SHA-256. A file is checked
against its header before it is unpickled, and refused by name when it is not one of these files, of
another kind or layout, truncated or corrupted. The checksum catches damage, not tampering: load only files
you trust, as unpickling runs code. ``result.idata.to_netcdf`` remains the interchange format of the trace
alone.
"""

from __future__ import annotations

import hashlib
import math
import os
import pickle
from dataclasses import dataclass
from pathlib import Path

import jax
import numpy as np

from interpretable_zoo.inference import tempering

CHECKPOINT_FORMAT = ("interpretable-zoo checkpoint", 4)
RESULT_FORMAT = ("interpretable-zoo result", 4)
"""The tag of a saved result; its number goes up when a result's layout changes (2: BRL's neighbour relation
in compressed rows; 3: tempered runs' move rates per rung; 4: the checked header), so that a file of another
layout is refused by name, not misread. A checkpoint's tag goes up likewise (2: the move statistics of its
chunks; 3: the checked header)."""

HEADER_LIMIT = 256
"""The most bytes a header line takes (tag, length and a hexadecimal SHA-256)."""


def _write_atomically(path: Path, tag: tuple, value) -> None:
    """``value`` pickled behind its header line "<kind> <layout> <length> <sha256>", written to a temporary file
    and then moved over ``path``, so that a reader never meets half a file."""
    payload = pickle.dumps(value, protocol=pickle.HIGHEST_PROTOCOL)
    header = f"{tag[0]} {tag[1]} {len(payload)} {hashlib.sha256(payload).hexdigest()}\n".encode("ascii")
    temporary = path.with_name(path.name + ".partial")
    temporary.write_bytes(header + payload)
    os.replace(temporary, path)


def _read_checked(path: Path, tag: tuple, argument: str, what: str):
    """The unpickled contents of a file written by ``_write_atomically`` with ``tag``, after its header
    says it is one (``what``, e.g. "a result saved by interpretable_zoo.save_result") in this layout, and its
    length and checksum match the bytes that follow; otherwise a ValueError naming ``argument``, the file and
    the problem, raised before anything is unpickled or a claimed length allocated."""
    if path.is_dir():
        raise ValueError(f"{argument}: {path} is a folder, not {what}")
    with path.open("rb") as file:
        header = file.readline(HEADER_LIMIT)
        fields = header.decode("ascii", errors="replace").rstrip("\n").rsplit(" ", 3)
        if not (header.startswith(b"interpretable-zoo ") and header.endswith(b"\n") and len(fields) == 4
                and fields[1].isdigit() and fields[2].isdigit()):
            raise ValueError(f"{argument}: {path} is not {what} (files of earlier versions, before format "
                             f"{tag[1]}, carry no header: write it again with this version)")
        kind, layout, length, digest = fields[0], int(fields[1]), int(fields[2]), fields[3]
        if kind != tag[0]:
            raise ValueError(f"{argument}: {path} is an {kind} file, not {what}")
        if layout != tag[1]:
            raise ValueError(f"{argument}: {path} has the layout {layout} of another version of this package (this "
                             f"one reads {tag[1]}); write it again with this version")
        held = os.fstat(file.fileno()).st_size - len(header)
        if held < length:
            raise ValueError(f"{argument}: {path} is truncated: it holds {held} of the {length} bytes its header "
                             "announces")
        payload = file.read(length)
    if held > length or hashlib.sha256(payload).hexdigest() != digest:
        raise ValueError(f"{argument}: {path} is corrupted: its contents do not match the checksum in its header")
    try:
        return pickle.loads(payload)
    except (pickle.UnpicklingError, EOFError, AttributeError, ImportError, TypeError) as error:
        raise ValueError(f"{argument}: {path} cannot be read by this version of interpretable_zoo "
                         f"({type(error).__name__}: {error}); write it again with this version") from error


@dataclass(frozen=True)
class Checkpoint:
    """Where a run keeps its checkpoint (``path``, replaced atomically) and how often it writes it: after
    the first chunk of scans that ends ``every_seconds`` after the last write (0: after every chunk)."""

    path: str | os.PathLike
    every_seconds: float = 60.0

    def __post_init__(self):
        if not isinstance(self.path, (str, os.PathLike)):
            raise ValueError(f"checkpoint: expected a file path or a Checkpoint, got {type(self.path).__name__}")
        seconds = self.every_seconds
        if isinstance(seconds, bool) or not isinstance(seconds, (int, float)) or not (math.isfinite(seconds) and seconds >= 0):
            raise ValueError(f"checkpoint: every_seconds must be a number >= 0, got {seconds!r}")


def as_checkpoint(value) -> Checkpoint | None:
    """None, a :class:`Checkpoint`, or a path (a :class:`Checkpoint` with the default interval)."""
    if value is None or isinstance(value, Checkpoint):
        return value
    return Checkpoint(value)


def fingerprint(kernel, static, data, settings: dict, initial_states=None) -> str:
    """A digest of what a run's draws depend on: the kernel's functions, ``static``, the ``data`` arrays, the
    chains' initial states (when given) and the sampling settings (seed, chains, rungs, rounds, chunk size,
    kept draws, convergence target)."""
    digest = hashlib.sha256()
    for function in kernel:
        name = "None" if function is None else f"{function.__module__}.{function.__qualname__}"
        digest.update(f"{name};".encode())
    digest.update(repr(static).encode())
    for leaf in jax.tree.leaves((data, initial_states)):
        leaf = np.asarray(leaf)
        digest.update(f"{leaf.dtype}{leaf.shape};".encode())
        digest.update(np.ascontiguousarray(leaf).tobytes())
    matched = ("num_chains", "seed", "n_temperatures", "max_temperatures", "num_samples", "tuning_rounds",
               "scans_per_chunk", "max_draws", "target")
    digest.update(repr([settings[name] for name in matched]).encode())
    return digest.hexdigest()


class CheckpointWriter:
    """Writes and reads one run's checkpoint (see the module docstring)."""

    def __init__(self, checkpoint: Checkpoint, digest: str):
        self.path = Path(checkpoint.path)
        self.every_seconds = checkpoint.every_seconds
        self.digest = digest
        self.last_write = tempering.now()

    def load(self) -> dict | None:
        """The saved position, or None when there is no checkpoint file; ValueError when it belongs to
        another run, or when only some processes of a ``jax.distributed`` run see it (they would start from
        different places: every process must resume, or none)."""
        exists = self.path.exists()
        if jax.process_count() > 1:
            from jax.experimental import multihost_utils

            seen = np.asarray(multihost_utils.process_allgather(np.int32(exists)))
            if seen.min() != seen.max():
                raise ValueError(f"checkpoint: {self.path} is seen by processes {np.flatnonzero(seen).tolist()} of "
                                 f"{len(seen)} only; give a path on a file system that every process sees")
        if not exists:
            return None
        saved = _read_checked(self.path, CHECKPOINT_FORMAT, "checkpoint", "a checkpoint of this package")
        if saved["fingerprint"] != self.digest:
            raise ValueError(
                f"checkpoint: {self.path} was written by a run with another kernel, data or sampling settings "
                "(seed, chains, temperatures, rounds, num_samples, convergence target); remove it or give another path"
            )
        return saved

    def maybe_write(self, position: dict, elapsed: float) -> None:
        """Write ``position`` (stage, round, ladder, schedule, chunks) when ``every_seconds`` have passed (on
        the clock that every process reads alike, ``tempering.now``: gathering the state is a collective)."""
        if tempering.now() - self.last_write < self.every_seconds:
            return
        state = {"fingerprint": self.digest, "elapsed": elapsed,
                 **jax.tree.map(lambda x: tempering.to_host(x) if hasattr(x, "shape") else x, position)}
        if jax.process_index() == 0:  # every process holds the whole state; one writes it
            _write_atomically(self.path, CHECKPOINT_FORMAT, state)
        self.last_write = tempering.now()

    def remove(self) -> None:
        self.path.unlink(missing_ok=True)


def save_result(result, path) -> None:
    """Save a fitted result (``BRLResult``, ``BCMResult``, ``MGMResult``, ``PrototypeSelection``,
    ``BayesianSetsResult``) to ``path`` as a pickle behind a header with its format tag, length and SHA-256
    (module docstring); :func:`~interpretable_zoo.inference.checkpoint.load_result` checks the header, then reads it.

    Example:
        >>> data = iz.datasets.load_titanic_table()
        >>> X, names = iz.datasets.one_hot(data.X)  # binary items such as sex=female
        >>> result = iz.fit_brl(X, data.y, feature_names=names, min_support=0.3, num_samples=50, num_warmup=20,
        ...                     num_chains=2, n_temperatures=1, progress_bar=False)
        >>> iz.save_result(result, "titanic_brl.pkl")
        >>> loaded = iz.load_result("titanic_brl.pkl")
        >>> loaded.explain() == result.explain()
        True
    """
    from interpretable_zoo import __version__

    if not hasattr(result, "explain"):
        raise TypeError(f"result: expected a fitted result of this package, got {type(result).__name__}")
    _write_atomically(Path(path), RESULT_FORMAT, {"version": __version__, "result": result})


def load_result(path):
    """A result saved by :func:`~interpretable_zoo.inference.checkpoint.save_result` (a trusted file only: unpickling runs code).

    Example:
        >>> data = iz.datasets.load_titanic_table()
        >>> X, names = iz.datasets.one_hot(data.X)  # binary items such as sex=female
        >>> result = iz.fit_brl(X, data.y, feature_names=names, min_support=0.3, num_samples=50, num_warmup=20,
        ...                     num_chains=2, n_temperatures=1, progress_bar=False)
        >>> iz.save_result(result, "titanic_brl.pkl")
        >>> loaded = iz.load_result("titanic_brl.pkl")  # predicts, explains and extends as before
        >>> print(loaded.explain().splitlines()[0])
        if sex=female and not class=3rd then y=1 probability ...% (...%-...%)
        >>> loaded.predict(X[:2])
        array([0, 0])
    """
    what = "a result saved by interpretable_zoo.save_result"
    saved = _read_checked(Path(path), RESULT_FORMAT, "path", what)
    if not isinstance(saved, dict) or not hasattr(saved.get("result"), "explain"):
        raise ValueError(f"path: {path} holds no fitted result, so it is not {what}")
    return saved["result"]
