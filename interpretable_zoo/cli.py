"""The ``izoo`` command: demo every model on bundled data, fit a model from a file, summarise a run.

Each model registers here its module of :mod:`interpretable_zoo.demos`, which implements the
command-line entry points: ``cli_demo() -> str`` (a run on bundled data, returning the
explanation and, for MCMC models, an R-hat table) and, for models fitted to a data file
(``fits=True``), ``cli_fit(X, y, *, seed, **options) -> result`` with the model's own ``options``.
``izoo fit`` writes the result by the suffix of ``--out``: ``.json`` (the explanation as data),
``.pkl`` (the whole result, for :func:`~interpretable_zoo.load_result`) or, for MCMC models
(``trace=True``), ``.nc`` (the InferenceData). A model whose module is ``None`` does not exist yet;
asking for it is answered with a clear message.

Errors are one line on stderr, never a traceback: a bad command line or file (exit status 2), or a
library's ValueError, OSError or MemoryError about the data or settings (exit status 1).
"""

from __future__ import annotations

import argparse
import importlib.metadata
import math
import os
import sys
import zipfile
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType

from interpretable_zoo.demos import bayesian_sets, bcm, brl, mgm, prototype_selection


MCMC_OPTIONS = ("num_warmup", "num_samples", "num_chains", "max_seconds", "progress")


@dataclass(frozen=True)
class ModelEntry:
    title: str
    module: ModuleType | None  # implements cli_demo and, when ``fits``, cli_fit
    fits: bool = False  # ``izoo fit`` fits it to a data file
    trace: bool = False  # its result holds an MCMC trace, which ``--out run.nc`` writes
    options: tuple[str, ...] = ()  # the model-specific options of ``izoo fit`` that cli_fit reads


MODELS: dict[str, ModelEntry] = {
    "bcm": ModelEntry(
        "Bayesian Case Model (Kim, Rudin, Shah 2014)", bcm, fits=True, trace=True, options=("n_clusters", "kernel", *MCMC_OPTIONS)
    ),
    "brl": ModelEntry(
        "Bayesian Rule Lists (Letham et al. 2015)", brl, fits=True, trace=True,
        options=("min_support", "max_cardinality", *MCMC_OPTIONS),
    ),  # fmt: skip
    "mgm": ModelEntry("Mind the Gap (Kim, Shah, Doshi-Velez 2015)", mgm, fits=True, options=("n_clusters", "restarts")),
    "bayesian_sets": ModelEntry("Bayesian Sets (Ghahramani, Heller 2005)", bayesian_sets),
    "prototype_selection": ModelEntry(
        "Prototype selection (Bien, Tibshirani 2011)", prototype_selection, fits=True,
        options=("eps", "metric", "method", "progress"),
    ),
}
OUTPUT_SUFFIXES = (".json", ".pkl", ".nc")
FIT_OPTIONS = frozenset(name for entry in MODELS.values() for name in entry.options)


class CliError(Exception):
    """A user error reported as one line on stderr with exit status 2."""


def _model_module(name: str) -> ModuleType:
    entry = MODELS[name]
    if entry.module is None:
        raise CliError(f"model {name!r} ({entry.title}) is not available yet in this version")
    return entry.module


def one_line(error: BaseException) -> str:
    """An exception's message on one line (its type when the message is empty)."""
    return " ".join(str(error).split()) or type(error).__name__


OTHER_SEPARATORS = (";", "\t", "|")
"""Separators other than the comma: a CSV read as one column whose header holds one of them is read again
with its separator sniffed (a semicolon-separated export would otherwise be fitted as one column)."""


def _read_frame(path: Path):
    """A .csv (header row) or .parquet file as a DataFrame, or a CliError naming --data."""
    import pandas as pd

    if path.suffix.lower() == ".csv":
        try:
            frame = pd.read_csv(path)
            if frame.shape[1] == 1 and any(separator in str(frame.columns[0]) for separator in OTHER_SEPARATORS):
                frame = pd.read_csv(path, sep=None, engine="python")  # the separator sniffed from the file
            return frame
        except ValueError as error:  # pandas' ParserError and EmptyDataError, UnicodeDecodeError
            raise CliError(
                f"--data: cannot read {path.name} as a CSV table with a header row ({one_line(error)})"
            ) from None
    try:
        return pd.read_parquet(path)
    except ImportError:
        raise CliError(
            f"--data: reading {path.name} needs a Parquet engine: pip install pyarrow (or interpretable-zoo[parquet])"
        ) from None
    except (ValueError, OSError) as error:  # pyarrow's ArrowInvalid is a ValueError
        raise CliError(f"--data: cannot read {path.name} as a Parquet table ({one_line(error)})") from None


IDENTIFIER_MIN_ROWS = 10
"""Tables of at least this many rows are checked for columns that look like row identifiers."""


def warn_of_identifiers(frame, name: str) -> None:
    """A line on stderr for each integer or text column of ``frame`` (at least :data:`IDENTIFIER_MIN_ROWS`
    rows) with a different value in every row: most likely an identifier, which a model would take as a
    feature of as many categories as rows (slow, and meaningless)."""
    import pandas as pd

    if len(frame) < IDENTIFIER_MIN_ROWS:
        return
    for column in frame.columns:
        values = frame[column]
        kind_of_label = pd.api.types.is_integer_dtype(values) or not pd.api.types.is_numeric_dtype(values)
        if kind_of_label and values.nunique() == len(frame):
            print(f"izoo: warning: column {column!r} of {name} holds a different value in each of its {len(frame)} "
                  "rows, like an identifier; it is fitted as a feature (drop it from the table if it names the rows)",
                  file=sys.stderr)


def read_table(path: Path, target: str | None):
    """Read X (and y when ``target`` names a column) from .csv (header row), .parquet, .npy or .npz
    (arrays ``X`` and ``y``). Tables come back as DataFrames, whose columns name the features."""
    import numpy as np

    if not path.is_file():
        raise CliError(f"--data: no such file: {path}")
    suffix = path.suffix.lower()
    if suffix in (".csv", ".parquet"):
        frame = _read_frame(path)
        if frame.empty:
            raise CliError(f"--data: {path.name} has no data rows")
        if target is not None and target not in frame.columns:
            raise CliError(f"--target: column {target!r} not in {path.name} (columns: {list(frame.columns)})")
        X = frame if target is None else frame.drop(columns=[target])
        warn_of_identifiers(X, path.name)
        return X, None if target is None else frame[target].to_numpy()
    if suffix not in (".npy", ".npz"):
        raise CliError(f"--data: unsupported file type {suffix!r}; use .csv, .parquet, .npy or .npz")
    if suffix == ".npy" and target is not None:
        raise CliError("--target: a .npy file holds X only; use .csv, .parquet or .npz with arrays X and y")
    try:
        if suffix == ".npy":
            _check_npy_size(path)
            return np.load(path), None
        with np.load(path) as archive:
            if "X" not in archive:
                raise CliError(f"--data: {path.name} has no array named 'X' (has {sorted(archive.files)})")
            return archive["X"], archive["y"] if "y" in archive else None
    except (ValueError, OSError, EOFError, zipfile.BadZipFile) as error:
        raise CliError(
            f"--data: cannot read {path.name} as a NumPy {suffix} file of numeric arrays ({one_line(error)})"
        ) from None


def _check_npy_size(path: Path) -> None:
    """A CliError naming --data when the .npy file's header claims more bytes than the file holds (read
    before anything is allocated); a header that cannot be read is left to ``np.load``'s message."""
    import numpy as np

    with open(path, "rb") as file:
        try:
            version = np.lib.format.read_magic(file)
            read_header = np.lib.format.read_array_header_1_0 if version == (1, 0) else np.lib.format.read_array_header_2_0
            shape, _, dtype = read_header(file)
        except ValueError:
            return
        held = path.stat().st_size - file.tell()
    claimed = math.prod(shape) * dtype.itemsize
    if claimed > held:
        raise CliError(f"--data: {path.name} claims an array of shape {shape} ({dtype}, {claimed:,} bytes) "
                       f"but holds {held:,} bytes after its header; the file is truncated or its header is wrong")


def writable_output(path: Path, model: str) -> Path:
    """``path`` if ``model``'s result can be written there, else a CliError naming --out (checked before
    any fitting)."""
    folder = path.parent
    if path.is_dir():
        raise CliError(f"--out: {path} is a folder; give a file name such as run.json")
    suffix = path.suffix.lower()
    if suffix not in OUTPUT_SUFFIXES or (suffix == ".nc" and not MODELS[model].trace):
        offered = [s for s in OUTPUT_SUFFIXES if s != ".nc" or MODELS[model].trace]
        raise CliError(
            f"--out: {model} writes {', '.join(offered)} files (.json: the explanation as data, .pkl: the result"
            + (", .nc: the InferenceData" if MODELS[model].trace else "") + f"), not {path.name!r}"
        )
    if not folder.is_dir():
        raise CliError(f"--out: the folder {folder} does not exist")
    if not os.access(path if path.exists() else folder, os.W_OK):
        raise CliError(f"--out: cannot write {path} (permission denied)")
    return path


def command_demo(args) -> None:
    missing = []
    for name, entry in MODELS.items():
        if args.models and name not in args.models:
            continue
        if entry.module is None:
            missing.append(f"{name} ({entry.title})")
            continue
        print(f"=== {entry.title} ===", flush=True)
        print(_model_module(name).cli_demo(), flush=True)
    if missing:
        print("Not available yet: " + "; ".join(missing))


def model_options(args, model: str) -> dict:
    """The model-specific options given on the command line, as keyword arguments; a CliError names an
    option that ``model`` does not take."""
    given = {name: value for name, value in vars(args).items() if name in FIT_OPTIONS and value is not None}
    for name in given:
        if name not in MODELS[model].options:
            raise CliError(f"--{name.replace('_', '-')}: not an option of izoo fit {model}")
    return given


def write_result(result, path: Path) -> None:
    """Write a fitted result by the suffix of ``path`` (see :data:`OUTPUT_SUFFIXES`)."""
    import json

    from interpretable_zoo.inference.checkpoint import save_result

    suffix = path.suffix.lower()
    if suffix == ".nc":
        result.idata.to_netcdf(path)
    elif suffix == ".pkl":
        save_result(result, path)
    else:
        path.write_text(json.dumps(result.to_dict(), indent=1) + "\n")


def command_fit(args) -> None:
    module = _model_module(args.model)
    options = model_options(args, args.model)
    out = writable_output(Path(args.out), args.model)
    X, y = read_table(Path(args.data), args.target)
    result = module.cli_fit(X, y, **options, seed=args.seed)
    print(result.explain(), flush=True)
    write_result(result, out)
    print(f"wrote {out}")


def command_summary(args) -> None:
    import arviz as az

    from interpretable_zoo import diagnostics

    path = Path(args.run)
    if not path.is_file():
        raise CliError(f"run: no such file: {path}")
    try:
        idata = az.from_netcdf(path)
    except (OSError, ValueError) as error:
        raise CliError(f"run: {path} is not a NetCDF file written by `izoo fit` ({one_line(error)})") from None
    if "posterior" not in idata.groups():
        raise CliError(f"run: {path} has no posterior group; give a file written by `izoo fit`")
    unknown = [name for name in args.var_names or () if name not in idata.posterior.data_vars]
    if unknown:
        raise CliError(f"--var-names: no variable {unknown[0]!r} in the posterior of {path.name}; it holds "
                       f"{', '.join(map(str, idata.posterior.data_vars))}")
    print(diagnostics.summary(idata, var_names=args.var_names).to_string())  # every row and column


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="izoo", description="interpretable-zoo: interpretable models in NumPyro.")
    parser.add_argument("--version", action="version", version=f"izoo {importlib.metadata.version('interpretable-zoo')}")
    sub = parser.add_subparsers(dest="command", required=True, metavar="{demo,fit,summary}")

    demo = sub.add_parser("demo", help="run every available model on bundled data and print its explanation")
    demo.add_argument("models", nargs="*", choices=[[], *MODELS], metavar="MODEL", help="restrict to these models")
    demo.set_defaults(handler=command_demo)

    fitting = [name for name, entry in MODELS.items() if entry.fits]
    fit = sub.add_parser(
        "fit",
        help="fit a model to a data file, print its explanation and write the result",
        epilog="Options after --seed apply to the models named in brackets. "
        "See docs/guides/cli.md, 'Data files', for what each model's file holds.",
    )
    fit.add_argument("model", choices=fitting, metavar="MODEL", help=", ".join(fitting))
    fit.add_argument(
        "--data", required=True, help="a table: .csv or .parquet with a header row (naming the features), "
        ".npy, or .npz with arrays X and y",
    )  # fmt: skip
    fit.add_argument("--target", default=None, help="the table's column holding the labels y (brl, prototype_selection)")
    fit.add_argument(
        "--out", required=True, help="output file: .json (the explanation as data), .pkl (the whole result, "
        "for interpretable_zoo.load_result) or .nc (the InferenceData; bcm, brl)",
    )  # fmt: skip
    fit.add_argument("--seed", type=int, default=0)
    fit.add_argument("--n-clusters", type=int, help="number of clusters [bcm, mgm]")
    fit.add_argument("--kernel", choices=["collapsed", "partially_collapsed"],
                     help="the sampler (default: collapsed) [bcm]")
    fit.add_argument("--num-samples", type=int, help="scans per chain (default: until converged) [bcm, brl]")
    fit.add_argument("--num-warmup", type=int, help="tuning scans (default: chosen by the run) [bcm, brl]")
    fit.add_argument("--num-chains", type=int, help="chains (default: brl 8, bcm 4) [bcm, brl]")
    fit.add_argument("--max-seconds", type=float, help="time budget of a run until converged (default: brl 60, bcm 300)"
                     " [bcm, brl]")  # fmt: skip
    fit.add_argument("--progress", action=argparse.BooleanOptionalAction,
                     help="progress bar (default: on outside CI) [bcm, brl, prototype_selection]")
    fit.add_argument("--min-support", type=float, help="antecedent mining: support per class (default 0.1) [brl]")
    fit.add_argument("--max-cardinality", type=int, help="antecedent mining: conditions per rule (default 2) [brl]")
    fit.add_argument("--restarts", type=int, help="restarts of the search (default 5) [mgm]")
    fit.add_argument("--eps", type=float, help="ball radius (default: by 10-fold cross-validation) [prototype_selection]")
    fit.add_argument("--metric", help="l1, l2 (default) or cosine [prototype_selection]")
    fit.add_argument("--method", help="greedy (default) or lp [prototype_selection]")
    fit.set_defaults(handler=command_fit)

    summary = sub.add_parser("summary", help="print an ArviZ summary (mean, sd, ess, r_hat) of a run file")
    summary.add_argument("run", help="NetCDF file written by `izoo fit`")
    summary.add_argument("--var-names", nargs="+", default=None, help="variables (default: label-free summaries)")
    summary.set_defaults(handler=command_summary)
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        args.handler(args)
    except CliError as error:
        print(f"izoo: {one_line(error)}", file=sys.stderr)
        return 2
    except (ValueError, OSError, MemoryError) as error:
        print(f"izoo: {one_line(error)}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:  # a fit with no draws to keep (an optimiser), or before its first chunk ended
        print("izoo: interrupted", file=sys.stderr)
        return 130  # as a shell reports a process ended by SIGINT
    return 0


if __name__ == "__main__":
    sys.exit(main())
