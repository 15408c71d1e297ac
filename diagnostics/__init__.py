"""Diagnostics: ArviZ conversion and summaries; leave-one-out over discrete posteriors; plots of results; exact-enumeration, goodness-of-fit and SBC helpers."""

from interpretable_zoo.compilation_cache import configure
from interpretable_zoo.lazy import lazy_attributes

configure()  # the persistent compilation cache is set before any helper compiles

__all__ = [
    "GOFResult",
    "SBCResult",
    "add_posterior_variables",
    "default_var_names",
    "discrete_loo",
    "enumerate_posterior",
    "exact_gof_test",
    "plot_elbo_sweep",
    "plot_gap_heatmap",
    "plot_prototype_images",
    "plot_prototypes",
    "plot_rule_list",
    "plot_set_completion",
    "plot_subspaces",
    "plot_trace",
    "simulation_based_calibration",
    "state_index",
    "summary",
    "to_inference_data",
]

__getattr__, __dir__ = lazy_attributes(
    __name__,
    {
        ".exact": ("GOFResult", "enumerate_posterior", "exact_gof_test", "state_index"),
        ".inference_data": ("add_posterior_variables", "default_var_names", "summary", "to_inference_data"),
        ".loo": ("discrete_loo",),
        ".plots": ("plot_elbo_sweep", "plot_gap_heatmap", "plot_prototype_images", "plot_prototypes", "plot_rule_list",
                   "plot_set_completion", "plot_subspaces", "plot_trace"),
        ".sbc": ("SBCResult", "simulation_based_calibration"),
    },
)
