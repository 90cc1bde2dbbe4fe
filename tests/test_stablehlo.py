"""The StableHLO reading agrees with the HLO text reading, site for site, on real programs."""

import jax
import jax.numpy as jnp
import pytest

from find_barriers.program import read_hlo
from find_barriers.sites import TransposeSite, find_sites
from snippets.hlo.maxtext_decoder import DecoderConfig, lower_decoder
from snippets.hlo.stablehlo import StableHLOProgram
from snippets.lowering import StepConfig, build_step


def facts(site: TransposeSite) -> tuple:
    """Everything a site says except the instruction names, which each reading makes up."""
    return (
        site.dot_shape,
        site.shape,
        site.between,
        site.verdict,
        site.output,
        site.op_name,
        site.source,
        site.trips,
    )


def both_readings(lowered: jax.stages.Lowered) -> tuple[list[tuple], list[tuple]]:
    """The sites read from the StableHLO module, and from the HLO text XLA converts it to."""
    from_stablehlo = find_sites(StableHLOProgram(lowered.compiler_ir()))
    from_text = find_sites(read_hlo(lowered.as_text(dialect="hlo", debug_info=True)))
    return [facts(site) for site in from_stablehlo], [facts(site) for site in from_text]


@pytest.mark.needs_devices(4)
@pytest.mark.parametrize("mesh", ["dp", "dp_fsdp"])
@pytest.mark.parametrize("mode", ["explicit", "auto"])
def test_the_guides_step_reads_the_same_both_ways(mode, mesh):
    stablehlo, text = both_readings(build_step(StepConfig(mode=mode, mesh=mesh)).lower())
    assert stablehlo == text
    assert len(stablehlo) == 1
    assert stablehlo[0][2] == (("Sharding",) if mode == "explicit" else ())


@pytest.mark.needs_devices(4)
@pytest.mark.parametrize("scan", [False, True], ids=["unrolled", "scan"])
@pytest.mark.parametrize("mode", ["explicit", "auto"])
def test_maxtext_decoder_reads_the_same_both_ways(mode, scan):
    lowered = lower_decoder(DecoderConfig(layers=2, scan=scan), mode).lowered
    stablehlo, text = both_readings(lowered)
    assert stablehlo == text
    assert len(stablehlo) == (24 if scan else 44)  # a layer's sites once in the loop body
    weight_gradients = [site for site in stablehlo if site[4] is not None]
    assert weight_gradients
    if scan:  # in the 2-layer loop, or not; the layers' weight gradients leave the loop
        assert {site[7] for site in stablehlo} == {1, 2}
        assert any(site[7] == 2 for site in weight_gradients)
    assert all(("Sharding" in site[2]) == (mode == "explicit") for site in stablehlo)


def loops(x: jax.Array, n: int) -> jax.Array:
    """A transpose of a dot in two loops: one of 3 trips, one of ``n`` known only at run time."""

    def body(_, x):
        return jnp.transpose(x @ x) + 1.0

    return jax.lax.fori_loop(0, n, body, jax.lax.fori_loop(0, 3, body, x))


def test_loops_of_known_and_unknown_trip_count_read_the_same_both_ways():
    lowered = jax.jit(loops).lower(jnp.ones((4, 4)), 5)
    stablehlo, text = both_readings(lowered)
    assert stablehlo == text
    assert len(stablehlo) == 2
    assert {site[7] for site in stablehlo} == {3, None}


def test_the_stablehlo_reading_makes_records_only_for_what_it_reaches():
    lowered = jax.jit(jax.grad(lambda w, x: jnp.sin(x @ w).sum())).lower(
        jnp.ones((3, 4)), jnp.ones((2, 3))
    )
    program = StableHLOProgram(lowered.compiler_ir())
    (site,) = find_sites(program)
    assert site.between == ()
    operations = str(lowered.compiler_ir()).count(" = ")
    assert 0 < len(program.by_name.made) < operations  # the sine's ops are never read


def test_a_function_called_in_a_loop_and_twice_outside_runs_five_times_both_ways():
    inner = jax.jit(lambda x: jnp.transpose(x @ x))  # lowered once, as a function it calls

    def outer(x):
        y = jax.lax.fori_loop(0, 3, lambda _, x: inner(x) + 1.0, x)
        return inner(y) + inner(2.0 * y)

    stablehlo, text = both_readings(jax.jit(outer).lower(jnp.ones((4, 4))))
    assert stablehlo == text
    assert [site[7] for site in stablehlo] == [5]  # 3 trips of the loop, and 2 calls after


def test_a_value_entering_a_loop_goes_through_its_state_tuple_both_ways():
    lowered = jax.jit(loops).lower(jnp.ones((4, 4)), 5)
    text = read_hlo(lowered.as_text(dialect="hlo"))
    for program in (StableHLOProgram(lowered.compiler_ir()), text):
        for index in (0, 1):  # x and n: each a part of a loop's state
            ((state, _),) = program.users(program.parameter(program.entry, index))
            assert state.opcode == "tuple"
            assert [user.opcode for user, _ in program.users(state.name)] == ["while"]
