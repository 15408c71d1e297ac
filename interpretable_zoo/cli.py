"""The ``izoo`` command: demo every model on bundled data, fit a model from a file, summarise a run.

Each model registers here its module of :mod:`interpretable_zoo.demos`, which implements the
command-line entry points: ``cli_demo(data_home) -> str`` (a run on bundled data, returning the
explanation and, for MCMC models, an R-hat table) and, for models with a posterior (``fits=True``),
``cli_fit(X, y, args) -> InferenceData``; ``izoo fit`` offers only those. A model whose module is
``None`` does not exist yet; asking for it is answered with a clear message.

Errors are one line on stderr, never a traceback: a bad command line or file (exit status 2), or a
library's ValueError, OSError or MemoryError about the data or settings (exit status 1).
"""

from __future__ import annotations

import argparse
import importlib.metadata
import os
import sys
import zipfile
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType

from interpretable_zoo.demos import bayesian_sets, bcm, brl, mgm, prototype_selection


@dataclass(frozen=True)
class ModelEntry:
    title: str
    module: ModuleType | None  # implements cli_demo and, when ``fits``, cli_fit
    fits: bool = False  # has a posterior that ``izoo fit`` writes


MODELS: dict[str, ModelEntry] = {
    "bcm": ModelEntry("Bayesian Case Model (Kim, Rudin, Shah 2014)", bcm, fits=True),
    "brl": ModelEntry("Bayesian Rule Lists (Letham et al. 2015)", brl, fits=True),
    "mgm": ModelEntry("Mind the Gap (Kim, Shah, Doshi-Velez 2015)", mgm),
    "bayesian_sets": ModelEntry("Bayesian Sets (Ghahramani, Heller 2005)", bayesian_sets),
    "prototype_selection": ModelEntry("Prototype selection (Bien, Tibshirani 2011)", prototype_selection),
}


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


def read_table(path: Path, target: str | None):
    """Read X (and y when ``target`` names a column) from .csv, .npy or .npz (arrays ``X`` and ``y``)."""
    import numpy as np
    import pandas as pd

    if not path.is_file():
        raise CliError(f"--data: no such file: {path}")
    suffix = path.suffix.lower()
    if suffix == ".csv":
        try:
            frame = pd.read_csv(path)
        except ValueError as error:  # pandas' ParserError and EmptyDataError, UnicodeDecodeError
            raise CliError(
                f"--data: cannot read {path.name} as a CSV table with a header row ({one_line(error)})"
            ) from None
        if frame.empty:
            raise CliError(f"--data: {path.name} has no data rows")
        if target is None:
            return frame, None
        if target not in frame.columns:
            raise CliError(f"--target: column {target!r} not in {path.name} (columns: {list(frame.columns)})")
        return frame.drop(columns=[target]), frame[target].to_numpy()
    if suffix not in (".npy", ".npz"):
        raise CliError(f"--data: unsupported file type {suffix!r}; use .csv, .npy or .npz")
    if suffix == ".npy" and target is not None:
        raise CliError("--target: a .npy file holds X only; use .csv or .npz with arrays X and y")
    try:
        if suffix == ".npy":
            return np.load(path), None
        with np.load(path) as archive:
            if "X" not in archive:
                raise CliError(f"--data: {path.name} has no array named 'X' (has {sorted(archive.files)})")
            return archive["X"], archive["y"] if "y" in archive else None
    except (ValueError, OSError, EOFError, zipfile.BadZipFile) as error:
        raise CliError(
            f"--data: cannot read {path.name} as a NumPy {suffix} file of numeric arrays ({one_line(error)})"
        ) from None


def writable_output(path: Path) -> Path:
    """``path`` if a file can be written there, else a CliError naming --out (checked before any fitting)."""
    folder = path.parent
    if path.is_dir():
        raise CliError(f"--out: {path} is a folder; give a file name such as run.nc")
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
        print(_model_module(name).cli_demo(args.data_home), flush=True)
    if missing:
        print("Not available yet: " + "; ".join(missing))


def command_fit(args) -> None:
    module = _model_module(args.model)
    out = writable_output(Path(args.out))
    X, y = read_table(Path(args.data), args.target)
    idata = module.cli_fit(X, y, args)
    idata.to_netcdf(out)
    print(f"wrote {out}")


def command_summary(args) -> None:
    import arviz as az
    import pandas as pd

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
    table = diagnostics.summary(idata, var_names=args.var_names)
    with pd.option_context("display.max_rows", None, "display.width", 120):
        print(table)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="izoo", description="interpretable-zoo: interpretable models in NumPyro.")
    parser.add_argument("--version", action="version", version=f"izoo {importlib.metadata.version('interpretable-zoo')}")
    sub = parser.add_subparsers(dest="command", required=True, metavar="{demo,fit,summary}")

    demo = sub.add_parser("demo", help="run every available model on bundled data and print its explanation")
    demo.add_argument("models", nargs="*", choices=[[], *MODELS], metavar="MODEL", help="restrict to these models")
    demo.add_argument("--data-home", default=None, help="folder of real datasets (default: $INTERPRETABLE_ZOO_DATA)")
    demo.set_defaults(handler=command_demo)

    fit = sub.add_parser("fit", help="fit a model to a data file and write the InferenceData as NetCDF")
    fitting = [name for name, entry in MODELS.items() if entry.fits]
    fit.add_argument("model", choices=fitting, metavar="MODEL", help=", ".join(fitting))
    fit.add_argument("--data", required=True, help="X as .csv (header row), .npy, or .npz with arrays X and y")
    fit.add_argument("--target", default=None, help="CSV column holding the labels y (classifiers)")
    fit.add_argument("--n-clusters", type=int, default=None, help="number of clusters (clustering models)")
    fit.add_argument("--num-warmup", type=int, default=500)
    fit.add_argument("--num-samples", type=int, default=1000)
    fit.add_argument("--num-chains", type=int, default=4)
    fit.add_argument("--seed", type=int, default=0)
    fit.add_argument(
        "--progress", action=argparse.BooleanOptionalAction, default=None, help="progress bar (default: on outside CI)"
    )
    fit.add_argument("--out", required=True, help="output NetCDF file, e.g. run.nc")
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
    return 0


if __name__ == "__main__":
    sys.exit(main())
