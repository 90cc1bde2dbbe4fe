"""Steps compiled for a TPU v5p slice on this machine (libtpu, no TPU). The flagship's: explicit
mode adds the six copies of the head kernel's shard the design doc's §4.3 lists, auto none, and
the kernel-order fix none; the page renders what ``--record`` wrote, which a fresh compile
repeats. A dense layer's: find-barriers' estimate from the CPU module is the copies the compile
adds, kernel by kernel. And a head's reduce-scatter, which no shape rule predicts.

libtpu is the ``tpu`` extra: ``nox -s tpu`` installs it and runs these; elsewhere they skip."""

import json

import jax
import jax.numpy as jnp
import pytest
from jax.sharding import NamedSharding
from jax.sharding import PartitionSpec as P

from find_barriers import find_sites, read_hlo
from snippets.devices import make_mesh
from snippets.hlo.compiled import kernel_copies, reduce_scatters
from snippets.hlo.dense_relayouts import copies_by_kernel, dense_step, estimated_copies
from snippets.hlo.tpu_relayouts import RECORD, STEP, compile_runs
from snippets.lowering import build_step
from snippets.tpu_compile import compile_for_tpu, libtpu_version, tpu_devices

pytestmark = [
    pytest.mark.needs_devices(4),
    pytest.mark.skipif(
        libtpu_version() is None,
        reason="libtpu is not installed here: `nox -s tpu` installs the `tpu` extra and runs these",
    ),
]


@pytest.fixture(scope="module")
def compiled() -> dict:
    return compile_runs()


def test_explicit_copies_the_head_kernel_shard_in_and_out_three_times_and_auto_never(compiled):
    shards = compiled["EV explicit"]["kernel_copies"]
    assert (
        sorted(shards)
        == ["f32[128,32000]{0,1:T(8,128)}"] * 3 + ["f32[128,32000]{1,0:T(8,128)}"] * 3
    )
    assert compiled["EV auto"]["kernel_copies"] == []
    assert compiled["auto-axes explicit"]["kernel_copies"] == []  # fix 1 removes them


def test_the_recorded_compile_is_what_this_libtpu_makes(compiled):
    recorded = json.loads(RECORD.read_text())
    if recorded["versions"]["libtpu"] != libtpu_version():
        pytest.skip(f"recorded with libtpu {recorded['versions']['libtpu']}: run --record again")
    assert (recorded["step"], recorded["compiled"]) == (STEP.model_dump(), compiled)


def test_a_step_without_a_blocked_fold_compiles_without_the_copies():
    step = build_step(STEP.replace(mode="auto", optimizer="none"))
    assert kernel_copies(compile_for_tpu(step), STEP.kernel_dims) == []


@pytest.mark.parametrize("vocab", [32000, 32064])
def test_find_barriers_estimates_the_copies_the_compiler_makes(vocab):
    """A shard of 8,016 columns fills no whole 128-element tiles: TPU stores it transposed, as the
    gradient comes, and copies nothing; find-barriers' estimate, read from the CPU module, agrees."""
    step = build_step(STEP.replace(vocab=vocab))
    compiled = kernel_copies(compile_for_tpu(step), (STEP.emb, vocab))
    module = read_hlo(step.lower().as_text(dialect="hlo", debug_info=True))
    (head,) = [site for site in find_sites(module) if site.blocked]
    assert head.cost.relayout_copies == len(compiled) == (6 if vocab == 32000 else 0)


@pytest.mark.parametrize(
    "sizes",
    [{}, {"head_dim": 64}, {"emb": 256}, {"emb": 1024, "mlp": 1000}, {"emb": 256, "head_dim": 64}],
    ids=["shrink", "head_dim_64", "emb_256", "mlp_1000", "neither_fills"],
)
def test_find_barriers_estimates_each_dense_kernels_added_copies(sizes):
    """A decoder layer's kernels, not scanned: what explicit mode copies over auto, kernel by
    kernel, is what find-barriers estimates from the CPU module. At the doc's shrink the query
    adds three (auto copies it out too), the rest six. Where exactly one of the kernel's stored
    minor-most dimension and the one its gradient's dot writes minor-most fills whole 128-element
    tiles, TPU keeps that one minor-most and copies nothing."""
    compiled = {
        mode: copies_by_kernel(compile_for_tpu(dense_step(mode, **sizes)), **sizes)
        for mode in ("auto", "explicit")
    }
    added = {name: compiled["explicit"][name] - compiled["auto"][name] for name in compiled["auto"]}
    assert estimated_copies(dense_step("explicit", **sizes)) == added
    if not sizes:
        assert added == {"query": 3, "out": 6, "mlp_in": 6, "mlp_out": 6}


def _head_gradient_reduce_scatters(vocab: int) -> int:
    """Reduce-scatters in auto mode's compiled step of an ``[512, vocab]`` bf16 head, FSDP on
    its first dimension: 3 where XLA:TPU turns the gradient's all-reduce into one, else 0."""
    mesh = make_mesh((4,), ("fsdp",), "auto", tpu_devices())

    def step(w, x):
        return w - 0.1 * jax.grad(lambda w: jnp.mean(jnp.square(x @ w).astype(jnp.float32)))(w)

    w = jax.ShapeDtypeStruct((512, vocab), jnp.bfloat16, sharding=NamedSharding(mesh, P("fsdp")))
    x = jax.ShapeDtypeStruct((4096, 512), jnp.bfloat16, sharding=NamedSharding(mesh, P("fsdp")))
    return reduce_scatters(jax.jit(step, donate_argnums=0).lower(w, x).compile().as_text())


def test_whether_the_head_gets_a_reduce_scatter_is_not_a_matter_of_size():
    """qwen3's vocabulary, 151,936, gets an all-reduce in auto mode too (the doc's §4.2 and the
    field's compile); one of 152,064, larger, gets the reduce-scatter, as 129,280 does."""
    found = {vocab: _head_gradient_reduce_scatters(vocab) for vocab in (129280, 151936, 152064)}
    assert found == {129280: 3, 151936: 0, 152064: 3}
