"""XLA's CPU backend compiles BRL's steps as one function (interpretable_zoo.xla_flags): the package raises
XLA's threshold for whole loops when it is imported, leaving a user's own backend options alone; an
untempered fit's compiled scans hold no loop that XLA runs operation by operation, and a ladder's (neighbour
moves, swaps, hyperpriors) only its loop over scans. Negative control: a loop with a scatter stays one."""

import os
import re
import subprocess
import sys

import jax
import jax.numpy as jnp
import numpy as np
import numpyro.distributions as dist
import pytest
from test_brl_sampler import ANTECEDENTS, CARDINALITIES, tiny_problem

from interpretable_zoo import xla_flags
from interpretable_zoo.inference import brl_mh, hyperpriors, tempering
from interpretable_zoo.inference.brl import KERNEL
from interpretable_zoo.inference.rule_mining import antecedent_neighbours
from interpretable_zoo.models import brl

OPTION = f"--xla_backend_extra_options={xla_flags.WHOLE_LOOP_OPTION}={xla_flags.WHOLE_LOOP_BYTES}"


@pytest.mark.parametrize("flags, expected", [
    ("", OPTION),
    ("--xla_backend_optimization_level=0", f"--xla_backend_optimization_level=0 {OPTION}"),
    ("--xla_backend_extra_options=xla_cpu_small_while_loop_byte_threshold=1024",
     "--xla_backend_extra_options=xla_cpu_small_while_loop_byte_threshold=1024"),  # the user's choice stands
    ("--xla_backend_extra_options=xla_cpu_disable_loop_unrolling=true",
     "--xla_backend_extra_options=xla_cpu_disable_loop_unrolling=true"),
])
def test_the_whole_loop_threshold_joins_the_flags_unless_they_pass_backend_options(flags, expected):
    assert xla_flags.with_whole_loops(flags) == expected
    environ = {"XLA_FLAGS": flags} if flags else {}
    assert xla_flags.compile_loops_whole(environ) == (expected != flags)
    assert environ == {"XLA_FLAGS": expected}


@pytest.mark.parametrize("flags", [None, "--xla_backend_extra_options=xla_cpu_small_while_loop_byte_threshold=1024"])
def test_importing_the_package_sets_the_flags_unless_they_pass_backend_options(flags):
    env = {name: value for name, value in os.environ.items() if name != "XLA_FLAGS"}
    if flags is not None:
        env["XLA_FLAGS"] = flags
    code = "import os, interpretable_zoo; print(os.environ['XLA_FLAGS'])"
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True).stdout
    assert out.strip() == (OPTION if flags is None else flags)


@pytest.mark.parametrize("before_import, warned", [
    ("import jax; jax.numpy.ones(1).block_until_ready()", True),
    ("import jax", False),  # control: JAX imported, its backend not started
    ("", False),
])
def test_importing_the_package_after_jax_started_its_backend_warns_that_the_option_cannot_act(before_import, warned):
    env = {name: value for name, value in os.environ.items() if name != "XLA_FLAGS"}
    code = f"{before_import}\nimport interpretable_zoo, jax\njax.numpy.ones(1).block_until_ready()"
    err = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True).stderr
    assert ("imported after JAX had started its CPU backend" in err) == warned


USER_COMPILER_OPTIONS = {"xla_backend_optimization_level": 3, "xla_cpu_use_fusion_emitters": True}
"""XLA's defaults, which the test command lowers for speed (Makefile): at level 0 XLA rewrites some scatters
into operations that a whole loop may hold, so a scatter would pass unseen."""


def loops_run_operation_by_operation(lowered) -> list[str]:
    """The op names of the loops of a lowered CPU program, compiled as users compile it, that XLA did not
    compile whole: those outside the functions marked ``xla_cpu_small_call`` and what they call."""
    text = lowered.compile(USER_COMPILER_OPTIONS).as_text()
    computations = dict(re.findall(r"^(?:ENTRY )?%([\w.\-]+) [^\n]*\{\n(.*?)^\}", text, re.S | re.M))
    whole = set(re.findall(r"to_apply=%([\w.\-]+), frontend_attributes=\{xla_cpu_small_call=\"true\"\}", text))
    frontier = list(whole)
    while frontier:
        called = set(re.findall(r"%([\w.\-]+)", computations[frontier.pop()])) & computations.keys()
        frontier += called - whole
        whole |= called
    return [re.search(r'op_name="([^"]*)"', line).group(1) for name, body in computations.items() if name not in whole
            for line in body.splitlines() if " while(" in line]


def brl_ladder_program(n_rungs: int, hyper: bool = False):
    """fit_brl's compiled scans (neighbour moves, 10 steps a scan, 2 chains of ``n_rungs`` rungs) on the tests'
    tiny problem, with lam and eta sampled under Gamma hyperpriors when ``hyper``."""
    truth_table, y = tiny_problem()
    priors = brl.Priors(lam=dist.Gamma(2.0, 1.0), eta=dist.Gamma(2.0, 2.0)) if hyper else brl.Priors()
    kernel_target = brl_mh.make_target(truth_table, CARDINALITIES, 2, y, hyperpriors.at_point(priors), 5,
                                       steps_per_call=10, neighbours=antecedent_neighbours(ANTECEDENTS),
                                       tempered=n_rungs > 1)
    kernel, (static, data) = KERNEL, kernel_target
    if hyper:
        kernel = hyperpriors.with_hyperpriors(KERNEL)
        static, data = hyperpriors.target(hyperpriors.BRL, kernel_target, priors)
        data = data._replace(inner=brl_mh.per_chain(data.inner, 2))
    else:
        data = brl_mh.per_chain(data, 2)  # each chain's proposal, as fit_brl's
    ladder = tempering.initial_ladder(kernel, static, data, tempering.chain_keys(0, 2), n_rungs)
    schedule = jnp.linspace(0.0, 1.0, n_rungs)
    return tempering.ladder_scans.lower(kernel, static, data, ladder, schedule, jnp.int32(8), 8)


CPU_ONLY = pytest.mark.skipif(jax.default_backend() != "cpu",
                              reason="the whole-loop threshold is an option of XLA's CPU backend")


@CPU_ONLY
def test_an_untempered_brl_fit_s_scans_compile_as_one_function():
    assert loops_run_operation_by_operation(brl_ladder_program(1)) == []


@CPU_ONLY
@pytest.mark.parametrize("hyper", [False, True], ids=["fixed priors", "hyperpriors"])
def test_a_brl_ladder_s_steps_compile_as_one_function_within_its_loop_over_scans(hyper):
    """The loop over scans runs operation by operation (its swap round's scatter, inference.tempering), every
    loop within it, the Metropolis-Hastings steps and the hyperparameters' slice sampler, as one function."""
    assert loops_run_operation_by_operation(brl_ladder_program(3, hyper)) == ["jit(ladder_scans)/while"]


@CPU_ONLY
def test_negative_control_a_loop_with_a_scatter_runs_operation_by_operation():
    """Rows written with a dynamic update at a batched row, as brl_mh.label_counts wrote its table before
    its select: vmapped, that is a scatter, which keeps XLA from compiling the loop whole."""

    def counts(first, n_rows):
        def body(i, table):
            return jax.lax.dynamic_update_slice_in_dim(table, jnp.ones((1, 3), jnp.int32) * i, first + i, axis=0)

        return jax.lax.fori_loop(0, n_rows, body, jnp.zeros((8, 3), jnp.int32))

    program = jax.jit(jax.vmap(counts, (0, None)))
    assert loops_run_operation_by_operation(program.lower(jnp.arange(2), 4)) == ["jit(counts)/vmap()/while"]
    np.testing.assert_array_equal(program(jnp.arange(2), 4)[1, 1:5, 0], np.arange(4))
