"""Progress bars: on by default outside CI, off under CI=true, refused unless a bool; the MGM search and sweep
and the prototype cross-validation count their steps."""

import re

import numpy as np
import pytest

from interpretable_zoo.datasets.gaussian_mixture import make_gaussian_mixture
from interpretable_zoo.inference import mgm, progress
from interpretable_zoo.inference.prototype_selection import PrototypeClassifier


def test_default_is_on_outside_ci_and_off_under_ci(monkeypatch):
    monkeypatch.delenv("CI", raising=False)
    bar = progress.bar(None, "fit", total=3)
    assert bar is not None and bar.total == 3
    bar.close()
    monkeypatch.setenv("CI", "true")
    assert progress.bar(None, "fit") is None
    assert progress.bar(True, "fit") is not None and progress.bar(False, "fit") is None
    with pytest.raises(ValueError, match="^progress_bar: expected True or False, got 'yes'"):
        progress.bar("yes", "fit")


def test_prototype_cross_validation_counts_every_selection(capsys):
    data = make_gaussian_mixture(20, seed=1)
    levels = [0.1, 0.2, 0.3]
    classifier = PrototypeClassifier(cv=3, eps_quantiles=levels, progress_bar=True).fit(data.X, data.y)
    err = capsys.readouterr().err
    assert "cross-validating eps: 100%" in err and "9/9" in err, err
    PrototypeClassifier(cv=3, eps_quantiles=levels, progress_bar=False).fit(data.X, data.y)
    assert "cross-validating" not in capsys.readouterr().err
    assert len(classifier.cv_results_["eps"]) == 3


def test_mgm_sweep_bar_counts_the_numbers_of_clusters_searched(monkeypatch):
    """The compiled search replaced by a stand-in of the right shape: the bar advances by the numbers of
    clusters of each batched call, the padded repeat of the last call not counted."""

    class Recorder:
        def __init__(self):
            self.updates, self.labels = [], []

        def update(self, n):
            self.updates.append(n)

        def set_postfix_str(self, text):
            self.labels.append(text)

    def search_batch(keys, W, observed, features, active, *, priors, config, on_merges=None):
        return {"elbo": np.zeros(len(keys))}

    monkeypatch.setattr(mgm.mgm_vi, "search_batch", search_batch)
    recorder = Recorder()
    results = mgm._search(np.zeros((6, 2)), [2, 3, 4], 4, 2, restarts=2, seed=0, priors=None,
                          config=mgm.mgm_vi.SearchConfig(), bar=recorder)
    assert sorted(results) == [2, 3, 4] and results[4]["elbo"].shape == (2,)
    assert recorder.updates == [2, 1] and recorder.labels == ["2 clusters", "4 clusters"]


def test_mgm_search_bar_counts_the_merge_iterations(capsys):
    """The restarts' merge iterations run together (each call runs an iteration of every restart not yet
    stopped), so the bar ends at the most iterations of a restart, out of at most ``max_iter``."""
    faces = np.repeat(np.kron(np.eye(3), [[1, 0], [0, 1], [1, 1]]), 5, axis=0)  # 3 clusters of OR pairs
    result = mgm.fit_mgm(faces, 3, restarts=2, progress_bar=True)
    iterations = max(len(trace) for trace in result.elbo_traces) - 2
    err = capsys.readouterr().err
    assert iterations > 0 and re.search(rf"MGM search: .*\| {iterations}/40 \[[^\r]*\n$", err), err
    mgm.fit_mgm(faces, 3, restarts=2, progress_bar=False)
    assert "MGM search" not in capsys.readouterr().err
