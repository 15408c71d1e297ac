"""The documentation site builds offline with no warning, and a broken cross-reference fails its build."""

import subprocess
import sys
from pathlib import Path

DOCS = Path(__file__).parents[1] / "docs"


def sphinx_build(source: Path, out: Path) -> subprocess.CompletedProcess:
    """``make docs``'s build (nitpicky, warnings as errors) of ``source`` with the site's configuration."""
    command = [sys.executable, "-m", "sphinx", "-b", "html", "-n", "-W", "--keep-going", "-q", "-c", str(DOCS),
               str(source), str(out)]  # fmt: skip
    return subprocess.run(command, capture_output=True, text=True, timeout=900)


def test_the_site_builds_without_a_warning(tmp_path):
    build = sphinx_build(DOCS, tmp_path / "html")
    assert build.returncode == 0, build.stderr[-5000:]
    for page in ["index.html", "getting-started.html", "guides/convergence.html", "api/index.html",
                 "examples/notebooks/bcm.html", "decisions/bcm-sampler.html"]:  # fmt: skip
        assert (tmp_path / "html" / page).is_file(), page
    reference = (tmp_path / "html" / "api/generated/interpretable_zoo.inference.bcm.fit_bcm.html").read_text()
    assert "run until the log joint" in reference  # the API reference is the docstring


def test_a_broken_cross_reference_fails_the_build(tmp_path):
    """The negative control: the same configuration refuses a reference to an object that does not exist."""
    source = tmp_path / "source"
    source.mkdir()
    (source / "index.md").write_text("# Page\n\nSee {func}`interpretable_zoo.inference.bcm.fit_nothing`.\n")
    build = sphinx_build(source, tmp_path / "html")
    assert build.returncode != 0
    assert "fit_nothing" in build.stderr
