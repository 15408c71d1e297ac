"""Diagnostics: ArviZ conversion, summaries and trace plots; exact-enumeration, goodness-of-fit and SBC helpers."""

from interpretable_zoo.diagnostics.exact import GOFResult, enumerate_posterior, exact_gof_test, state_index
from interpretable_zoo.diagnostics.inference_data import (
    add_posterior_variables,
    default_var_names,
    plot_trace,
    summary,
    to_inference_data,
)
from interpretable_zoo.diagnostics.sbc import SBCResult, simulation_based_calibration

__all__ = [
    "GOFResult",
    "SBCResult",
    "add_posterior_variables",
    "default_var_names",
    "enumerate_posterior",
    "exact_gof_test",
    "plot_trace",
    "simulation_based_calibration",
    "state_index",
    "summary",
    "to_inference_data",
]
