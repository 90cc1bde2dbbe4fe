"""find_barriers.jax: the sites of a lowered step, read from its StableHLO module, are those
find-barriers finds in XLA's dump of the same step, with each output named by the step's tree."""

from __future__ import annotations

import dataclasses
import inspect
from pathlib import Path

import jax
import jax.numpy as jnp
import pytest

import find_barriers
from find_barriers import TransposeSite, find_sites, read_hlo, read_module
from find_barriers._frames import readable
from find_barriers._rules import rule_of
from find_barriers._stablehlo import StableHLOProgram
from find_barriers.jax import lowered_sites, output_names
from tests_jax import jax_steps
from tests_jax.jax_steps import LAYERS, STEPS, Param, lowered


def dumped(step: jax.stages.Lowered, folder: Path) -> Path:
    """XLA's dump of ``step`` compiled: the module as JAX handed it over, before any pass."""
    step.compile(compiler_options={"xla_dump_to": str(folder), "xla_dump_hlo_as_text": True})
    (dump,) = folder.glob("module_*.before_optimizations.txt")
    return dump


def lines(sites: list[TransposeSite], names: list[str]) -> list[str]:
    """Each site as find-barriers prints it, its output named as ``lowered_sites`` names it."""
    named = (
        dataclasses.replace(site, output=names[site.output])
        if isinstance(site.output, int)
        else site
        for site in sites
    )
    return [
        f"{site}  {site.output} {site.placed_by} {site.placed_at} {site.cost}" for site in named
    ]


@pytest.mark.parametrize("step", STEPS)
def test_the_sites_are_those_of_the_dump_and_of_the_printed_hlo(step, tmp_path):
    names = output_names(lowered(step))
    found = lowered_sites(lowered(step))
    assert found
    dump = find_sites(read_module(str(dumped(lowered(step), tmp_path))))
    printed = find_sites(read_hlo(lowered(step).as_text(dialect="hlo", debug_info=True)))
    assert lines(found, names) == lines(dump, names) == lines(printed, names)
    assert [site.stack for site in found] == [site.stack for site in dump]


@pytest.mark.parametrize(("mode", "between"), [("explicit", ("Sharding",)), ("auto", ())])
def test_a_mesh_steps_weight_gradients_are_blocked_in_explicit_mode_only(mode, between):
    found = lowered_sites(lowered(mode))
    assert [(site.output, site.between, site.blocked) for site in found] == [
        ("head.kernel", between, bool(between)),
        ("layer.kernel", between, bool(between)),
    ]
    assert {site.role for site in found} == {"weight gradient"}


def test_a_query_kernels_gradient_on_an_explicit_mesh_is_pinned_and_named_by_its_parameter():
    """The einsum's weight gradient keeps its transpose for the dot's wide lhs (``dq``'s heads
    and head_dim), and the ``Sharding`` call between pins it: FB001, at the query's line."""
    (site,) = lowered_sites(lowered("explicit_query"))
    assert (site.verdict, site.blocked, site.wide_swap) == ("pinned", True, True)
    assert (site.parameter, site.output, site.role) == (
        "params['query']['kernel'].value",
        "query.kernel",
        "weight gradient",
    )
    assert site.chain == "dot f32[2,16,64] -> Sharding -> transpose f32[64,2,16]"
    assert rule_of(site).code == "FB001"
    assert site.cost.basis[:2] == ("4.3", "4.7")  # copied in only: its lhs is the wide one
    einsum = '    return jnp.tanh(jnp.einsum("bse,ehd->bshd", x, kernel)).sum()'
    line = inspect.getsource(jax_steps).splitlines().index(einsum) + 1
    assert readable(site.user_line) == f"tests_jax/jax_steps.py:{line}"


def test_a_donated_parameter_names_the_gradient_that_updates_it():
    found = lowered_sites(lowered("donated"))
    assert [(site.output, site.blocked) for site in found] == [
        ("head.kernel", True),
        ("layer.kernel", True),
    ]
    assert all(site.cost is not None for site in found)


def test_outputs_are_named_as_a_reader_writes_the_parameter():
    outputs = (jnp.ones(()), {"head": {"kernel": Param(jnp.ones(2))}}, [2, 3], {"layers": [4]})
    step = jax.jit(lambda: outputs).lower()
    names = ["result[0]", "head.kernel", "result[2][0]", "result[2][1]", "layers.0"]
    assert output_names(step) == names
    assert output_names(jax.jit(lambda: jnp.ones(2)).lower()) == ["result"]


def test_a_plain_gradient_names_its_line_function_and_output():
    (site,) = lowered_sites(lowered("plain"))
    assert (site.chain, site.between, site.output) == (
        "dot f32[4,3] -> transpose f32[3,4]",
        (),
        "result",
    )
    assert not site.blocked
    here = "tests_jax/jax_steps.py"
    line = inspect.getsourcelines(jax_steps.plain)[1] + 2
    assert [(readable(frame), frame.function) for frame in site.user_stack[:2]] == [
        (f"{here}:{inspect.getsourcelines(jax_steps.helper)[1] + 1}", "helper"),
        (f"{here}:{line}", "plain.<locals>.<lambda>"),
    ]


@pytest.mark.parametrize(
    ("step", "trips"), [("loops", [3, None]), ("called", [5]), ("scanned", [LAYERS])]
)
def test_a_site_in_a_loop_or_a_called_function_counts_its_runs(step, trips):
    assert sorted((site.trips for site in lowered_sites(lowered(step))), key=str) == trips


def test_a_program_without_a_site_has_none():
    step = jax.jit(lambda a, b: a @ b).lower(jnp.ones((2, 3)), jnp.ones((3, 4)))
    assert lowered_sites(step) == []


def test_the_stablehlo_reading_makes_records_only_for_what_it_reaches():
    step = jax.jit(jax.grad(lambda w, x: jnp.sin(x @ w).sum())).lower(
        jnp.ones((3, 4)), jnp.ones((2, 3))
    )
    program = StableHLOProgram(step.compiler_ir())
    (site,) = find_sites(program)
    assert site.between == ()
    operations = str(step.compiler_ir()).count(" = ")
    assert 0 < len(program.by_name.made) < operations  # the sine's ops are never read


def test_find_sites_of_a_lowered_step_says_to_call_lowered_sites():
    with pytest.raises(
        TypeError, match=r"not a jax\.stages\.Lowered: find_barriers\.jax\.lowered_sites\(lowered\)"
    ):
        find_barriers.find_sites(lowered("plain"))
