"""Bayesian Rule Lists on the bundled Titanic table, and ``izoo fit brl``."""

from __future__ import annotations


def cli_demo(**options) -> str:
    """Rule list for the bundled 2201-passenger Titanic table, with an R-hat table (the classifier's
    defaults, or ``options``)."""
    from interpretable_zoo.datasets import load_titanic_table
    from interpretable_zoo.diagnostics.inference_data import summary
    from interpretable_zoo.inference.brl import BayesianRuleListClassifier

    data = load_titanic_table()
    classifier = BayesianRuleListClassifier(**{"seed": 0, **options}).fit(data.X, data.y)
    table = summary(classifier.result_).to_string()
    return f"{classifier.explain(outcome='survival')}\n\n{table}"


def cli_fit(X, y, *, seed: int, progress=None, **options):
    """``izoo fit brl``: the classifier (mixed columns allowed) fitted with the command's options
    (``progress``: None, a bar outside CI); returns its :class:`BRLResult`."""
    from interpretable_zoo.inference.brl import BayesianRuleListClassifier

    if y is None:
        raise ValueError("y: BRL needs labels (--target)")
    classifier = BayesianRuleListClassifier(seed=seed, progress_bar=progress, **options)
    return classifier.fit(X, y).result_
