"""Diagnostics: ArviZ conversion, summaries and trace plots; exact-enumeration, goodness-of-fit and SBC helpers."""

from interpretable_zoo.diagnostics.inference_data import (
    add_posterior_variables,
    default_var_names,
    plot_trace,
    summary,
    to_inference_data,
)

__all__ = [
    "add_posterior_variables",
    "default_var_names",
    "plot_trace",
    "summary",
    "to_inference_data",
]
