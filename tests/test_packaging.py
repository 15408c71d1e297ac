"""Packaging: the import name and its subpackages, the console script, and editable-install behaviour."""

import os
import shutil
import subprocess
import sys
import sysconfig
from pathlib import Path

import pytest

import interpretable_zoo as iz

ROOT = Path(__file__).parents[1]


def test_public_subpackages_exist():
    for name in ("datasets", "diagnostics", "inference", "models"):
        module = getattr(iz, name)
        assert module.__name__ == f"interpretable_zoo.{name}"


def test_subpackages_are_the_top_level_folders_not_generic_names():
    assert Path(iz.models.__file__).parent == ROOT / "models"
    assert Path(iz.datasets.__file__).parent == ROOT / "datasets"
    # nothing is importable under the generic folder names themselves
    site = Path(sysconfig.get_paths()["purelib"])
    for generic in ("models", "datasets", "inference", "diagnostics"):
        assert not (site / generic).exists()


def test_console_script_lists_subcommands():
    izoo = Path(sys.executable).parent / "izoo"
    out = subprocess.run([str(izoo), "--help"], capture_output=True, text=True, check=True).stdout
    for command in ("demo", "fit", "summary"):
        assert command in out


@pytest.fixture
def checkout_copy(tmp_path):
    """A copy of the project sources (no virtual environment) in a temporary folder."""
    copy = tmp_path / "checkout"
    ignore = shutil.ignore_patterns(".venv", ".git", "__pycache__", "*.egg-info", "build", "notebooks", "tests")
    shutil.copytree(ROOT, copy, ignore=ignore)
    return copy


def test_editable_install_picks_up_model_edits_without_reinstalling(checkout_copy, tmp_path):
    """Install the copy in editable mode into a fresh environment, edit a model file, import again."""
    env_dir = tmp_path / "env"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(env_dir)], check=True)
    python = env_dir / "bin" / "python"
    env_site = Path(
        subprocess.run(
            [str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
            capture_output=True, text=True, check=True,
        ).stdout.strip()
    )
    # the dependencies come from this environment; the package itself only from the editable install
    (env_site / "dependencies.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")
    subprocess.run(
        [sys.executable, "-m", "pip", "--python", str(python), "install", "--quiet", "--no-deps", "-e", str(checkout_copy)],
        check=True, capture_output=True,
    )
    model_file = checkout_copy / "models" / "editable_probe.py"
    read_back = [str(python), "-c", "from interpretable_zoo.models import editable_probe as m; print(m.PRIOR_SCALE)"]
    clean_env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}

    model_file.write_text("PRIOR_SCALE = 1.0\n")
    first = subprocess.run(read_back, capture_output=True, text=True, check=True, cwd=tmp_path, env=clean_env)
    model_file.write_text("PRIOR_SCALE = 2.5\n")
    second = subprocess.run(read_back, capture_output=True, text=True, check=True, cwd=tmp_path, env=clean_env)
    assert (first.stdout.strip(), second.stdout.strip()) == ("1.0", "2.5")
