"""The izoo command: help, clear messages for unavailable models and bad files, summary of a run file."""

import importlib.metadata

import numpy as np
import pytest
from numpyro.infer import NUTS

from interpretable_zoo import cli, diagnostics
from interpretable_zoo.inference.mcmc import run_mcmc
from tests.test_diagnostics_inference_data import normal_model


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


def test_demo_names_the_models_that_are_not_there_yet(unavailable_model, capsys):
    assert cli.main(["demo", unavailable_model]) == 0
    assert "Not available yet: bcm" in capsys.readouterr().out


def test_fit_offers_exactly_the_models_with_a_posterior(capsys):
    fitting = [
        name for name, entry in cli.MODELS.items() if hasattr(entry.module, "cli_fit")
    ]
    assert fitting == [name for name, entry in cli.MODELS.items() if entry.fits] == ["bcm", "brl"]
    with pytest.raises(SystemExit) as exit_status:
        cli.main(["fit", "--help"])
    assert exit_status.value.code == 0
    help_text = capsys.readouterr().out
    assert "bcm, brl" in help_text and "mgm" not in help_text and "prototype_selection" not in help_text
    with pytest.raises(SystemExit) as exit_status:
        cli.main(["fit", "mgm", "--data", "x.csv", "--out", "run.nc"])
    assert exit_status.value.code == 2
    assert "invalid choice: 'mgm'" in capsys.readouterr().err


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


def test_summary_prints_rhat_and_ess_of_a_run_file(tmp_path, capsys):
    mcmc = run_mcmc(NUTS(normal_model), num_warmup=100, num_samples=100, num_chains=2, progress_bar=False)
    idata = diagnostics.to_inference_data(mcmc)
    path = tmp_path / "run.nc"
    idata.to_netcdf(path)
    assert cli.main(["summary", str(path)]) == 0
    out = capsys.readouterr().out
    assert "r_hat" in out and "ess_bulk" in out and "mu[0]" in out
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
