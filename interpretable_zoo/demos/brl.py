"""Bayesian Rule Lists on the bundled Titanic table, and ``izoo fit brl``."""

from __future__ import annotations


def cli_demo(data_home=None, **options) -> str:
    """Rule list for the bundled 2201-passenger Titanic table, with an R-hat table (the classifier's
    defaults, or ``options``)."""
    from interpretable_zoo.datasets import load_titanic_table
    from interpretable_zoo.diagnostics.inference_data import summary
    from interpretable_zoo.inference.brl import BayesianRuleListClassifier

    data = load_titanic_table()
    classifier = BayesianRuleListClassifier(**{"seed": 0, **options}).fit(data.X, data.y)
    table = summary(classifier.result_).to_string()
    return f"{classifier.explain(outcome='survival')}\n\n{table}"


def cli_fit(X, y, args):
    """Fit a classifier to a table (mixed columns allowed) and return the InferenceData."""
    from interpretable_zoo.inference.brl import BayesianRuleListClassifier

    if y is None:
        raise ValueError("y: BRL needs labels (--target)")
    classifier = BayesianRuleListClassifier(
        num_warmup=args.num_warmup,
        num_samples=args.num_samples,
        num_chains=args.num_chains,
        seed=args.seed,
        progress_bar=getattr(args, "progress", None),  # --progress / --no-progress; None: on outside CI
    )
    return classifier.fit(X, y).result_.idata
