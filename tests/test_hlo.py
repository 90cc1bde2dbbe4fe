"""The HLO readers on hand-written module text, including what they must not match."""

import jax
import jax.numpy as jnp
import pytest
from jax.sharding import AxisType, NamedSharding
from jax.sharding import PartitionSpec as P

from find_barriers import read_hlo
from snippets.hlo.collectives import collectives, group_size
from snippets.hlo.counts import dot_flops, opcode_counts, relayouts, sharding_call_count
from snippets.hlo.gradients import _called, kernel_relayouts
from snippets.hlo.passes import algsimp_fates, pass_order

COMPILED = """
HloModule jit_step, entry_computation_layout={(f32[2,1]{1,0})->f32[1,2]{1,0}}

%region_0.0 (x: f32[], y: f32[]) -> f32[] {
  %x = f32[] parameter(0)
  %y = f32[] parameter(1)
  ROOT %add.0 = f32[] add(%x, %y)
}

ENTRY %main (p: f32[8,32]) -> f32[2,32] {
  %p = f32[8,32]{1,0} parameter(0), sharding={devices=[4,1]<=[4]}
  %ar = f32[8,32]{1,0} all-reduce(%p), channel_id=1, replica_groups=[1,4]<=[4], to_apply=%region_0.0
  %rs = f32[2,32]{1,0} reduce-scatter(%p), channel_id=2, replica_groups={{0,1,2,3}}, dimensions={0}, to_apply=%region_0.0
  %ag = f32[8,32]{1,0} all-gather(%rs), channel_id=3, replica_groups=mesh['x'=4] {'x'}, dimensions={0}
  %ags = (f32[2,32]{1,0}, bf16[8,32]{1,0}) all-gather-start(%rs), channel_id=4, replica_groups={{0,1,2,3}}, dimensions={0}
  %agd = bf16[8,32]{1,0} all-gather-done(%ags)
  %t = (f32[2]{0}, s32[]) tuple(%p, %p)
  ROOT %ds = f32[2,32]{1,0} dynamic-slice(%ar, %c, %c), dynamic_slice_sizes={2,32}
}
"""


def test_collectives_kinds_ranks_and_bytes():
    found = [(c.kind, c.ranks, c.bytes_per_rank) for c in collectives(COMPILED)]
    assert found == [
        ("all-reduce", 4, 1536),  # 2 * 3/4 * 1024
        ("reduce-scatter", 4, 768),  # 3/4 of the full 1024
        ("all-gather", 4, 768),
        ("all-gather", 4, 384),  # async start: the bf16 result counts
    ]


def test_no_collectives_in_a_module_without_them():
    assert collectives("%a = f32[2] add(%x, %y)\n%b = f32[2] all-reduce-done(%a)") == []


def test_group_size_rejects_what_it_cannot_read():
    with pytest.raises(ValueError, match="No replica_groups"):
        group_size("channel_id=1, dimensions={0}")


def test_opcode_counts_does_not_count_prefixes():
    counts = opcode_counts(COMPILED, "all-gather", "dynamic-slice", "slice")
    assert counts == {"all-gather": 1, "dynamic-slice": 1, "slice": 0}


CALLS = """
ENTRY main.1 {
  a = f32[8,16]{1,0} parameter(0)
  g = f32[8,32]{1,0} parameter(1)
  d = f32[32,16]{1,0} dot(g, a), lhs_contracting_dims={0}, rhs_contracting_dims={0}
  s = f32[32,16]{1,0} custom-call(d), custom_call_target="Sharding", sharding={replicated}
  t = f32[16,32]{0,1} transpose(s), dimensions={1,0}
  c = f32[16,32]{1,0} copy(t)
  u = f32[16,8]{0,1} transpose(a), dimensions={1,0}
  ROOT f = f32[16,32]{1,0} custom-call(c), custom_call_target="xla.sdy.FuncResultSharding"
}
"""


def test_sharding_calls_are_counted_by_target_only():
    assert sharding_call_count(CALLS) == 1  # not the FuncResultSharding call
    assert sharding_call_count(COMPILED) == 0


def test_relayouts_list_transposes_and_copies_with_shapes():
    found = [(r.opcode, r.shape) for r in relayouts(CALLS, dims=(16, 32))]
    assert found == [("transpose", "f32[16,32]{0,1}"), ("copy", "f32[16,32]{1,0}")]
    assert len(relayouts(CALLS)) == 3  # and the parameter's transpose
    assert relayouts(COMPILED) == []


def dump(index, pipeline, after, before):
    return f"module_0001.jit_step.{index:04d}.{pipeline}.after_{after}.before_{before}.txt"


PIPELINES = {
    # XLA:CPU with one partition per device, as dumped here (partitioner first).
    "cpu": (
        {
            dump(3, "spmd-partitioner", "pipeline-start", "shardy-xla"): "partitioned",
            dump(4, "spmd-partitioner", "shardy-xla", "spmd-partitioning"): "partitioned",
            dump(14, "simplification", "pipeline-start", "algsimp"): "seen by algsimp",
        },
        (3, 14, True, "shardy-xla"),
    ),
    # XLA:GPU: spmd-simplify's algsimp, then ShardyXLA and the partitioner
    # (xla/service/gpu/gpu_spmd_pipeline.cc).
    "gpu": (
        {
            dump(2, "spmd-simplify", "pipeline-start", "algsimp"): "seen by algsimp",
            dump(6, "spmd-partitioner", "conditional-simplifier", "shardy-xla"): "partitioned",
            dump(7, "spmd-partitioner", "shardy-xla", "spmd-partitioning"): "partitioned",
        },
        (6, 2, False, "shardy-xla"),
    ),
    # TPU, as its dumps are quoted upstream: algsimp in simplification-1 at 0008-0009,
    # the partitioner at 0012-0016.
    "tpu": (
        {
            dump(8, "simplification-1", "pipeline-start", "algsimp"): "seen by algsimp",
            dump(9, "simplification-1", "algsimp", "dce"): "simplified",
            dump(12, "xla-partitioner", "pipeline-start", "sharding-propagation"): "partitioned",
        },
        (12, 8, False, "xla-partitioner"),
    ),
}


@pytest.mark.parametrize("pipeline", PIPELINES)
def test_pass_order_names_each_backends_passes(pipeline):
    files, (partitioner, algsimp, partitioner_first, name) = PIPELINES[pipeline]
    order = pass_order({**files, "module_0001.jit_step.ir-no-opt.ll": "ignored"})
    assert (order["first_spmd_partitioner"], order["first_algsimp"]) == (partitioner, algsimp)
    assert order["partitioner_first"] is partitioner_first
    assert order["partitioner_pass"] == name
    assert order["module_before_first_algsimp"] == "seen by algsimp"


def test_pass_order_with_unknown_names_says_unknown():
    order = pass_order({dump(1, "p", "pipeline-start", "dce"): "z"})
    assert order["first_algsimp"] is None
    assert order["partitioner_first"] is None
    assert order["module_before_first_algsimp"] == order["module_after_first_algsimp"] == ""


def test_pass_order_returns_what_the_first_algsimp_received_and_returned():
    order = pass_order(
        {
            dump(2, "simp", "dce", "algsimp"): "before",
            dump(3, "simp", "algsimp", "cse"): "after",
            dump(4, "simp", "cse", "algsimp"): "later",
        }
    )
    assert (order["module_before_first_algsimp"], order["module_after_first_algsimp"]) == (
        "before",
        "after",
    )


def test_pass_order_without_dumps_is_an_error():
    with pytest.raises(ValueError, match="No per-pass HLO dumps found"):
        pass_order({"module_0001.jit_step.cpu_after_optimizations.txt": ""})


GRADIENT_PATH = """
HloModule jit_step

%fused_transpose (param_0: f32[16,8]) -> f32[8,16] {
  %param_0 = f32[16,8]{1,0} parameter(0)
  ROOT %transpose.1 = f32[8,16]{0,1} transpose(%param_0), dimensions={1,0}
}

%fused_dot (a: f32[4,16], b: f32[4,8]) -> f32[16,8] {
  %a = f32[4,16]{1,0} parameter(0)
  %b = f32[4,8]{1,0} parameter(1)
  ROOT %d = f32[16,8]{1,0} dot(%a, %b), lhs_contracting_dims={0}, rhs_contracting_dims={0}
}

ENTRY %main (g: f32[4,16], x: f32[4,8], table: f32[16,8]) -> (f32[8,16], f32[16,8]) {
  %g = f32[4,16]{1,0} parameter(0)
  %x = f32[4,8]{1,0} parameter(1)
  %table = f32[16,8]{1,0} parameter(2)
  %grad = f32[16,8]{1,0} fusion(%g, %x), kind=kCustom, calls=%fused_dot
  %ar = (f32[16,8]{1,0}, f32[]) all-reduce(%grad, %x), channel_id=1, to_apply=%fused_dot
  %gte = f32[16,8]{1,0} get-tuple-element(%ar), index=0
  %moved = f32[8,16]{0,1} fusion(%gte), kind=kLoop, calls=%fused_transpose
  %relaid = f32[8,16]{1,0} copy(%moved)
  %table_copy = f32[16,8]{0,1} copy(%table)
  ROOT %out = (f32[8,16]{1,0}, f32[16,8]{0,1}) tuple(%relaid, %table_copy)
}
"""


def test_kernel_relayouts_follow_the_data_not_the_sizes():
    """The same-sized table's copy feeds another output, so the kernel's path leaves it out."""
    found = kernel_relayouts(GRADIENT_PATH, (0,), {128})
    assert [(inst.name, [op.name for op in ops]) for inst, ops in found.items()] == [
        ("relaid", ["relaid"]),
        ("moved", ["transpose.1"]),  # the fusion, with the transpose inside it
    ]


def test_a_parameter_relaid_on_the_way_to_an_output_counts():
    """As an optimizer's moments are copied in and out of the gradient's layout."""
    found = kernel_relayouts(GRADIENT_PATH, (1,), {128})
    assert [(inst.name, inst.opcode) for inst in found] == [("table_copy", "copy")]


def test_kernel_relayouts_need_an_entry_root():
    with pytest.raises(ValueError, match="No entry computation with a ROOT"):
        kernel_relayouts("HloModule m", (0,), {1})


SHARED_CALLEE = """HloModule m

%add (a: f32[], b: f32[]) -> f32[] {
  %a = f32[] parameter(0)
  %b = f32[] parameter(1)
  ROOT %s = f32[] add(f32[] %a, f32[] %b)
}

%fused (p: f32[4]) -> (f32[], f32[]) {
  %p = f32[4] parameter(0)
  %c = f32[] constant(0)
  %r1 = f32[] reduce(f32[4] %p, f32[] %c), dimensions={0}, to_apply=%add
  %r2 = f32[] reduce(f32[4] %p, f32[] %c), dimensions={0}, to_apply=%add
  ROOT %t = (f32[], f32[]) tuple(%r1, %r2)
}

ENTRY %main (x: f32[4]) -> (f32[], f32[]) {
  %x = f32[4] parameter(0)
  ROOT %f = (f32[], f32[]) fusion(f32[4] %x), kind=kLoop, calls=%fused
}
"""


def test_a_computation_called_twice_is_read_once():
    program = read_hlo(SHARED_CALLEE)
    fusion = next(inst for inst in program.computations["main"] if inst.opcode == "fusion")
    assert [inst.name for inst in _called(fusion, program.computations)] == [
        "p",
        "c",
        "r1",
        "a",
        "b",
        "s",
        "r2",
        "t",
    ]


NESTED_LOOPS = """
HloModule m

%inner_body (s: (s32[], f32[8])) -> (s32[], f32[8]) {
  %s = (s32[], f32[8]) parameter(0)
  %i = s32[] get-tuple-element(%s), index=0
  %x = f32[8] get-tuple-element(%s), index=1
  %r = f32[8] all-reduce(%x), replica_groups={{0,1}}, to_apply=%add
  ROOT %t = (s32[], f32[8]) tuple(%i, %r)
}

%inner_cond (s: (s32[], f32[8])) -> pred[] {
  %s = (s32[], f32[8]) parameter(0)
  ROOT %p = pred[] constant(true)
}

%outer_body (s: (s32[], f32[8])) -> (s32[], f32[8]) {
  %s = (s32[], f32[8]) parameter(0)
  ROOT %w = (s32[], f32[8]) while(%s), condition=%inner_cond, body=%inner_body, backend_config={"known_trip_count":{"n":"4"}}
}

%outer_cond (s: (s32[], f32[8])) -> pred[] {
  %s = (s32[], f32[8]) parameter(0)
  ROOT %p = pred[] constant(true)
}

%add (a: f32[], b: f32[]) -> f32[] {
  %a = f32[] parameter(0)
  %b = f32[] parameter(1)
  ROOT %c = f32[] add(%a, %b)
}

ENTRY %main (s: (s32[], f32[8])) -> (s32[], f32[8]) {
  %s = (s32[], f32[8]) parameter(0)
  %once = f32[8] all-reduce(%s), replica_groups={{0,1}}, to_apply=%add
  ROOT %w = (s32[], f32[8]) while(%s), condition=%outer_cond, body=%outer_body, backend_config={"known_trip_count":{"n":"3"}}
}
"""


def test_a_collective_in_nested_loops_runs_the_product_of_their_trip_counts():
    inner, once = collectives(NESTED_LOOPS)  # in text order
    assert (inner.trips, once.trips) == (12, 1)  # 3 outer x 4 inner; outside the loops
    assert inner.bytes_per_step == 12 * inner.bytes_per_rank == 12 * 32  # 2 ranks: (N-1)/N * 2 * 32
    unknown = NESTED_LOOPS.replace('backend_config={"known_trip_count":{"n":"4"}}', "")
    assert collectives(unknown)[0].trips == 3  # a loop of unknown count counts once


@pytest.mark.needs_devices(4)
def test_collectives_in_a_compiled_scan_run_once_per_step_of_the_loop():
    """XLA:CPU writes ``known_trip_count`` on the compiled loop; ``trips`` weighs by it."""
    mesh = jax.make_mesh((4,), ("x",), axis_types=(AxisType.Explicit,))

    def step(total, x):
        return total + jax.lax.psum(x, "x"), None

    def scanned(first, xs):
        return jax.lax.scan(step, jax.lax.psum(first, "x"), xs)[0]

    specs = (P("x"), P(None, "x"))
    program = jax.jit(jax.shard_map(scanned, mesh=mesh, in_specs=specs, out_specs=P()))
    args = [
        jax.device_put(jnp.ones(shape), NamedSharding(mesh, spec))
        for shape, spec in zip(((4, 8), (5, 4, 8)), specs, strict=True)
    ]
    found = collectives(program.lower(*args).compile().as_text())
    assert sorted((c.kind, c.trips) for c in found) == [("all-reduce", 1), ("all-reduce", 5)]
    assert {c.bytes_per_rank for c in found} == {2 * 3 / 4 * 32}  # f32[1,8] over 4 ranks
    assert sorted(c.bytes_per_step for c in found) == [48, 5 * 48]


ALGSIMP_BEFORE = """
ENTRY main {
  a = f32[8,2]{1,0} parameter(0)
  b = f32[8,4]{1,0} parameter(1)
  d1 = f32[4,2]{1,0} dot(b, a), lhs_contracting_dims={0}, rhs_contracting_dims={0}
  t1 = f32[2,4]{0,1} transpose(d1), dimensions={1,0}
  d2 = f32[4,2]{1,0} dot(b, a), lhs_contracting_dims={0}, rhs_contracting_dims={0}
  s2 = f32[4,2]{1,0} custom-call(d2), custom_call_target="Sharding"
  t2 = f32[2,4]{0,1} transpose(s2), dimensions={1,0}
  d3 = f32[4,2]{1,0} dot(c, e), lhs_batch_dims={0,1}, rhs_batch_dims={0,1}
  t3 = f32[2,4]{0,1} transpose(d3), dimensions={1,0}
  ROOT r = (f32[2,4]{0,1}, f32[2,4]{0,1}, f32[2,4]{0,1}) tuple(t1, t2, t3)
}
"""

ALGSIMP_AFTER = """
ENTRY main {
  a = f32[8,2]{1,0} parameter(0)
  b = f32[8,4]{1,0} parameter(1)
  folded = f32[2,4]{1,0} dot(a, b), lhs_contracting_dims={0}, rhs_contracting_dims={0}
  d2 = f32[4,2]{1,0} dot(b, a), lhs_contracting_dims={0}, rhs_contracting_dims={0}
  s2 = f32[4,2]{1,0} custom-call(d2), custom_call_target="Sharding"
  t2 = f32[2,4]{0,1} transpose(s2), dimensions={1,0}
  d3 = f32[4,2]{1,0} multiply(c, e)
  t3 = f32[2,4]{0,1} transpose(d3), dimensions={1,0}
  ROOT r = (f32[2,4]{0,1}, f32[2,4]{0,1}, f32[2,4]{0,1}) tuple(folded, t2, t3)
}
"""


def test_algsimp_fates_tell_a_fold_from_a_kept_transpose_and_a_rewritten_dot():
    assert algsimp_fates(ALGSIMP_BEFORE, ALGSIMP_AFTER) == {
        "t1": {"folded": True, "after_algsimp": "folded: the dot writes the transposed shape"},
        "t2": {"folded": False, "after_algsimp": "kept: dot -> Sharding -> transpose"},
        "t3": {"folded": False, "after_algsimp": "kept; its dot became a multiply"},
    }


@pytest.mark.needs_devices(4)
def test_dot_flops_agree_with_xla_cost_analysis():
    mesh = jax.make_mesh((4,), ("x",), axis_types=(AxisType.Explicit,))
    with jax.set_mesh(mesh):
        x = jax.device_put(jnp.ones((8, 32)), P("x", None))
        compiled = jax.jit(lambda a, b: a @ b).lower(x, jnp.ones((32, 16))).compile()
    assert dot_flops(compiled.as_text()) == 2 * 2 * 32 * 16
    assert dot_flops(compiled.as_text()) == compiled.cost_analysis()["flops"]
