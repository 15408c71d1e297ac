"""The izoo command: help, clear messages for unavailable models and bad files, summary of a run file."""

import argparse
import importlib.metadata
import inspect
import json
import re
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from numpyro.infer import NUTS

from interpretable_zoo import cli, diagnostics
from interpretable_zoo.inference.bcm import fit_bcm
from interpretable_zoo.inference.brl import fit_brl
from interpretable_zoo.inference.mcmc import run_mcmc
from tests.test_diagnostics_inference_data import normal_model

ROOT = Path(__file__).parents[1]


@pytest.fixture
def unavailable_model(monkeypatch):
    monkeypatch.setitem(cli.MODELS, "bcm", cli.ModelEntry("Bayesian Case Model", None, fits=True))
    return "bcm"


def test_fit_of_an_unavailable_model_is_a_clear_message_not_a_traceback(unavailable_model, tmp_path, capsys):
    data = tmp_path / "x.csv"
    data.write_text("a,b\n0,1\n1,0\n")
    status = cli.main(["fit", unavailable_model, "--data", str(data), "--out", str(tmp_path / "run.nc")])
    assert status == 2
    assert "not available yet" in capsys.readouterr().err


def test_ctrl_c_in_a_fit_that_keeps_nothing_ends_izoo_with_one_line(monkeypatch, tmp_path, capsys):
    """An optimiser's fit (MGM, prototype selection) has no draws to keep: Ctrl-C ends `izoo fit` with one
    line and status 130, as a shell reports SIGINT, instead of a traceback, and writes nothing."""

    def interrupted(*args, **kwargs):
        raise KeyboardInterrupt

    monkeypatch.setattr(cli.MODELS["mgm"].module, "cli_fit", interrupted)
    data = tmp_path / "x.csv"
    data.write_text("a,b\n0,1\n1,0\n")
    out = tmp_path / "fit.pkl"
    status = cli.main(["fit", "mgm", "--data", str(data), "--n-clusters", "2", "--out", str(out)])
    assert (status, capsys.readouterr().err) == (130, "izoo: interrupted\n") and not out.exists()


def test_demo_names_the_models_that_are_not_there_yet(unavailable_model, capsys):
    assert cli.main(["demo", unavailable_model]) == 0
    assert "Not available yet: bcm" in capsys.readouterr().out


def test_fit_offers_every_model_with_a_fit_and_netcdf_only_for_traces(capsys):
    fitting = [name for name, entry in cli.MODELS.items() if hasattr(entry.module, "cli_fit")]
    assert fitting == [name for name, entry in cli.MODELS.items() if entry.fits]
    assert fitting == ["bcm", "brl", "mgm", "prototype_selection"]
    assert [name for name, entry in cli.MODELS.items() if entry.trace] == ["bcm", "brl"]
    with pytest.raises(SystemExit) as exit_status:
        cli.main(["fit", "--help"])
    assert exit_status.value.code == 0
    help_text = capsys.readouterr().out
    assert "bcm, brl, mgm, prototype_selection" in help_text and "--max-seconds" in help_text
    defaults = {name: inspect.signature(fit).parameters for name, fit in (("brl", fit_brl), ("bcm", fit_bcm))}
    flat = " ".join(help_text.split())
    for option, parameter in (("chains", "num_chains"), ("time budget of a run until converged", "max_seconds")):
        stated = ", ".join(f"{name} {defaults[name][parameter].default:g}" for name in defaults)
        assert f"{option} (default: {stated})" in flat, (option, stated)  # the help states the fits' defaults
    with pytest.raises(SystemExit) as exit_status:
        cli.main(["fit", "bayesian_sets", "--data", "x.csv", "--out", "run.json"])
    assert exit_status.value.code == 2
    assert "invalid choice: 'bayesian_sets'" in capsys.readouterr().err


@pytest.mark.parametrize(
    "content, suffix, target, message",
    [
        (None, ".csv", None, "no such file"),
        ("a,b\n0,1\n", ".csv", "label", "--target: column 'label'"),
        ("a b", ".txt", None, "unsupported file type"),
    ],
)
def test_read_table_errors_name_the_option(tmp_path, content, suffix, target, message):
    path = tmp_path / f"data{suffix}"
    if content is not None:
        path.write_text(content)
    with pytest.raises(cli.CliError, match=message):
        cli.read_table(path, target)


def test_read_table_splits_the_target_column(tmp_path):
    path = tmp_path / "data.csv"
    path.write_text("a,b,label\n0,1,yes\n1,0,no\n")
    X, y = cli.read_table(path, "label")
    assert list(X.columns) == ["a", "b"]
    assert list(y) == ["yes", "no"]
    np.savez(tmp_path / "data.npz", X=np.eye(3), y=np.arange(3))
    X, y = cli.read_table(tmp_path / "data.npz", None)
    assert X.shape == (3, 3) and list(y) == [0, 1, 2]
    pd.DataFrame({"a": [0, 1], "b": [1, 0], "label": ["yes", "no"]}).to_parquet(tmp_path / "data.parquet")
    X, y = cli.read_table(tmp_path / "data.parquet", "label")
    assert list(X.columns) == ["a", "b"] and list(y) == ["yes", "no"]


def test_a_column_with_a_different_value_in_every_row_is_flagged_as_an_identifier(tmp_path, capsys):
    """Integer and text columns unique in every row are named on stderr (the table is still read); a
    numeric feature of distinct real values, the target, and a short table are not."""
    rows = 20
    frame = pd.DataFrame({"id": np.arange(100, 100 + rows), "name": [f"r{i}" for i in range(rows)],
                          "size": np.linspace(0, 1, rows), "colour": ["red", "blue"] * (rows // 2),
                          "label": np.arange(rows)})  # fmt: skip
    frame.to_csv(tmp_path / "data.csv", index=False)
    X, _ = cli.read_table(tmp_path / "data.csv", "label")
    warnings = capsys.readouterr().err.splitlines()
    assert list(X.columns) == ["id", "name", "size", "colour"] and len(warnings) == 2
    assert warnings[0].startswith("izoo: warning: column 'id' of data.csv holds a different value in each of its 20 rows")
    assert "column 'name'" in warnings[1]
    frame.head(cli.IDENTIFIER_MIN_ROWS - 1).to_csv(tmp_path / "short.csv", index=False)
    cli.read_table(tmp_path / "short.csv", "label")
    assert capsys.readouterr().err == ""


CLI_GUIDE = (Path(__file__).parents[1] / "docs" / "guides" / "cli.md").read_text()
EXAMPLES = dict(re.findall(r"^\| `(\w+)` \|.*\| `izoo (fit .*?)` \|$", CLI_GUIDE, re.M))
"""The command-line guide's example command of each model, from its table of data files."""


def test_the_guide_gives_an_example_file_per_model_that_fits():
    assert sorted(EXAMPLES) == sorted(name for name, entry in cli.MODELS.items() if entry.fits)
    for name, command in EXAMPLES.items():
        args = cli.build_parser().parse_args(command.split())
        assert args.model == name
        X, y = cli.read_table(ROOT / args.data, args.target)
        assert cli.model_options(args, name) == ({"n_clusters": 3} if name in ("bcm", "mgm") else {})
        assert all(not column.isdigit() for column in X.columns)  # named features
        assert (y is not None) == (name in ("brl", "prototype_selection"))


def test_the_kernel_option_offers_fit_bcms_kernels():
    from interpretable_zoo.inference.bcm import KERNELS

    parser = cli.build_parser()
    args = parser.parse_args(["fit", "bcm", "--data", "x.csv", "--out", "bcm.json", "--n-clusters", "2",
                              "--kernel", "partially_collapsed"])
    assert cli.model_options(args, "bcm") == {"n_clusters": 2, "kernel": "partially_collapsed"}
    commands = next(action for action in parser._actions if isinstance(action, argparse._SubParsersAction))
    kernel_option = next(action for action in commands.choices["fit"]._actions if action.dest == "kernel")
    assert tuple(kernel_option.choices) == KERNELS


def fit_example(name: str, out: Path, *options: str) -> int:
    """``izoo fit`` of the command-line guide's example of ``name``, writing ``out``, with ``options`` added."""
    argv = EXAMPLES[name].split()
    argv[argv.index("--out") + 1] = str(out)
    argv[argv.index("--data") + 1] = str(ROOT / argv[argv.index("--data") + 1])
    return cli.main([*argv, *options])


def test_prototype_selection_example_prints_and_writes_json_and_pickle(tmp_path, capsys):
    from interpretable_zoo import load_result

    assert fit_example("prototype_selection", tmp_path / "p.json") == 0
    printed = capsys.readouterr().out
    written = json.loads((tmp_path / "p.json").read_text())
    assert printed.startswith("Prototype selection") and f"wrote {tmp_path / 'p.json'}" in printed
    assert {row["class"] for row in written["prototypes"]} == {"a", "b", "c"}
    assert fit_example("prototype_selection", tmp_path / "p.pkl", "--eps", "1.0", "--method", "lp") == 0
    loaded = load_result(tmp_path / "p.pkl")
    assert loaded.method == "lp" and loaded.eps == 1.0
    assert fit_example("prototype_selection", tmp_path / "p.json", "--restarts", "2") == 2
    assert "--restarts: not an option of izoo fit prototype_selection" in capsys.readouterr().err


def test_brl_example_writes_a_trace_that_summary_reads(tmp_path, capsys):
    out = tmp_path / "rules.nc"
    assert fit_example("brl", out, "--num-samples", "200", "--num-warmup", "100", "--num-chains", "2") == 0
    printed = capsys.readouterr().out
    assert printed.startswith("if ") and "sex=" in printed
    assert cli.main(["summary", str(out)]) == 0
    summary = capsys.readouterr().out
    assert "..." not in summary  # every column shown
    assert all(column in summary for column in ("hdi_3%", "hdi_97%", "ess_bulk", "ess_tail", "r_hat", "log_posterior"))


def test_summary_prints_rhat_and_ess_of_a_run_file(tmp_path, capsys):
    mcmc = run_mcmc(NUTS(normal_model), num_warmup=100, num_samples=100, num_chains=2, progress_bar=False)
    idata = diagnostics.to_inference_data(mcmc)
    path = tmp_path / "run.nc"
    idata.to_netcdf(path)
    assert cli.main(["summary", str(path)]) == 0
    out = capsys.readouterr().out
    assert "r_hat" in out and "ess_bulk" in out and "mu[0]" in out and "..." not in out
    assert cli.main(["summary", str(tmp_path / "missing.nc")]) == 2


def test_version_and_progress_options(capsys):
    with pytest.raises(SystemExit) as exit_info:
        cli.main(["--version"])
    assert exit_info.value.code == 0
    assert capsys.readouterr().out.strip() == f"izoo {importlib.metadata.version('interpretable-zoo')}"
    arguments = ["fit", "brl", "--data", "x.csv", "--out", "run.nc"]
    assert cli.build_parser().parse_args(arguments).progress is None  # the estimators' default: on outside CI
    assert cli.build_parser().parse_args([*arguments, "--no-progress"]).progress is False
    assert cli.build_parser().parse_args([*arguments, "--progress"]).progress is True
