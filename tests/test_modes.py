"""Every capability check's whole outcome in both modes, pinned: a JAX release changing one fails.

The outcomes are :func:`~snippets.measure.mode_checks.outcomes.report`'s, computed once for this test and the choosing_a_mode guide
it shares them with (:mod:`snippets.cache.results`).
"""

import json
import re
import tomllib

import jax
import numpy as np
import pytest
from jax.sharding import AxisType

from snippets.hlo.counts import dot_flops
from snippets.measure import modes
from snippets.measure.mode_checks import outcomes
from snippets.measure.mode_checks.model import FIXES, train_step_loss
from snippets.measure.mode_checks.products import pinned_module
from snippets.measure.mode_checks.registry import CHECKS, ISOLATED, TRACKER, check

CPU = "device_kind=cpu, num_cores=None, platform=cpu"
AUTO_X = f"AbstractMesh('x': 4, axis_types=(Auto,), {CPU})"

PINNED = {
    "make_mesh_default": (
        "ok: the default",
        "ok: needs axis_types=(AxisType.Auto,)",
    ),
    "mesh_default": (
        "ok: needs axis_types=(AxisType.Explicit,)",
        "ok: the default",
    ),
    "typed_sharding": (
        "ok: float32[8@x,8]",
        "ok: float32[8,8]",
    ),
    "constraint_mismatch": (
        "AssertionError: `with_sharding_constraint` acts as an assert when all axes of mesh are of type `Explicit`. The array sharding: P('x', None) did not match the sharding provided: P(None, 'x'). Please use `jax.sharding.reshard` to shard your input to the sharding you want.",
        "ok: laid out as P(None, 'x')",
    ),
    "constraint_match": (
        "ok: StableHLO unchanged",
        "ok: adds 1 sharding_constraint",
    ),
    "constraint_without_set_mesh": (
        f"ValueError: The spec of NamedSharding passed to with_sharding_constraint can only refer to Auto axes of the mesh. Got spec=P(None, 'x') and mesh=AbstractMesh('x': 4, axis_types=(Explicit,), {CPU}). You probably meant to use `reshard` API?",
        "ok: laid out as P(None, 'x')",
    ),
    "unconstrained": (
        "ValueError: P(UNCONSTRAINED, None) cannot contain `P.UNCONSTRAINED` when no mesh axis_types are `Auto`. Got mesh axis_types: (Explicit,)",
        "ok: laid out as P('x', None)",
    ),
    "unreduced": (
        "ok: float32[2,8]{U:x}",
        f"ValueError: Unreduced axes can only refer to mesh axes that is of type `Explicit`. Got unreduced axes: frozenset({{'x'}}) and mesh: AbstractMesh('x': 4, axis_types=(Auto,), {CPU})",
    ),
    "reduced": (
        "ok: float32[1,8]{R:x}",
        "ValueError: Reduced axes can only refer to mesh axes that is of type `Explicit`. Got reduced axes: frozenset({'x'}) and mesh: Mesh('x': 4, axis_types=(Auto,))",
    ),
    "doubly_sharded_einsum": (
        "ShardingTypeError: dot_general operation with inputs: f32[2,8@x,8], f32[2,8@x,8] produces an illegally sharded result: f32[2,8@x,8@x]",
        "ok: float32[2,8,8]",
    ),
    "sharded_contraction": (
        "ShardingTypeError: Contracting dimensions are sharded and it is ambiguous how the output should be sharded. Please specify the output sharding via the `out_sharding` parameter. Got lhs_contracting_spec=('x',) and rhs_contracting_spec=('x',)",
        "ok: float32[8,8]",
    ),
    "out_sharding": (
        "ok: float32[8@x,8]",
        "ValueError: PartitionSpec passed to dot_general cannot contain axis names that are of type Auto or Manual. Got PartitionSpec: P('x', None) with axis name: x of type: AxisType.Auto. This error occurs at source:",
    ),
    "mismatched_layout": (
        "ShardingTypeError: add operation with inputs: f32[8@x,8], f32[8,8@x] produces an illegally sharded result: f32[8@x,8@x]",
        "ok: compiles with all-to-all",
    ),
    "pinned_intermediate": (
        "ok: 2,147,483,648 dot FLOPs per device",
        "ok: 1,073,741,824 dot FLOPs per device",
    ),
    "shard_map_check_vma": (
        "ok",
        "ok",
    ),
    "mixed_mesh": (
        "ok: float32[8@x,8]",
        "ok: float32[8,8]",
    ),
    "mixed_mesh_unreduced": (
        "ok: sums to 16",
        f"ValueError: Unreduced axes can only refer to mesh axes that is of type `Explicit`. Got unreduced axes: frozenset({{'y'}}) and mesh: AbstractMesh('x': 2, 'y': 2, axis_types=(Explicit, Auto), {CPU})",
    ),
    "auto_axes_keyword": (
        f"ValueError: For primitive dot_general, context mesh AbstractMesh('x': 4, axis_types=(Auto,), {CPU}) should match the aval mesh AbstractMesh('x': 4, axis_types=(Explicit,), {CPU}) for shape float32[8@x,8]. This error occurs at source:",
        "ok: float32[8,8]",
    ),
    "model_as_written": (
        "ShardingTypeError: Use `.at[...].get(out_sharding=)` to provide output PartitionSpec for the gather indexing as out sharding could not be resolved unambiguously (or would require collectives on inputs). Got operand=ShapedArray(float32[64@model,16]), indices=ShapedArray(int32[8@data,4,1])",
        "ok",
    ),
    "model_plus_embed_fix": (
        "ShardingTypeError: Contracting dimensions are sharded and it is ambiguous how the output should be sharded. Please specify the output sharding via the `out_sharding` parameter. Got lhs_contracting_spec=('model',) and rhs_contracting_spec=('model',)",
        "ok",
    ),
    "model_plus_down_fix": (
        "ShardingTypeError: Use `.at[...].get(out_sharding=)` to provide output PartitionSpec for the gather indexing as out sharding could not be resolved unambiguously (or would require collectives on inputs). Got operand=ShapedArray(float32[8@data,4,64@model]), indices=ShapedArray(int32[8@data,4,1,1])",
        "ValueError: PartitionSpec passed to dot_general cannot contain axis names that are of type Auto or Manual. Got PartitionSpec: P('data', None, None) with axis name: data of type: AxisType.Auto. This error occurs at source:  <source> (Linear.__call__)",
    ),
    "model_plus_loss_fix": (
        "ok",
        "ValueError: PartitionSpec passed to dot_general cannot contain axis names that are of type Auto or Manual. Got PartitionSpec: P('data', None, None) with axis name: data of type: AxisType.Auto. This error occurs at source:  <source> (Linear.__call__)",
    ),
    "index_column": (
        "ok: float32[8@x]",
        "ok: float32[8]",
    ),
    "gather_rows": (
        "ShardingTypeError: Use `.at[...].get(out_sharding=)` to provide output PartitionSpec for the gather indexing as out sharding could not be resolved unambiguously (or would require collectives on inputs). Got operand=ShapedArray(float32[8@x,8]), indices=ShapedArray(int32[8@x,1])",
        "ok: float32[8,8]",
    ),
    "gather_rows_out_sharding": (
        "ok: float32[8@x,8]",
        "ValueError: PartitionSpec passed to .get cannot contain axis names that are of type Auto or Manual. Got PartitionSpec: P('x', None) with axis name: x of type: AxisType.Auto. This error occurs at source:  <source> (gather_rows_out_sharding.<locals>.<lambda>)",
    ),
    "scatter_set": (
        "ok: float32[8@x,8]",
        "ok: float32[8,8]",
    ),
    "scatter_add": (
        "ShardingTypeError: Use `.at[...].set/add/mul/...(out_sharding=)` to provide output PartitionSpec for the scatter update as out sharding could not be resolved unambiguously (or would require collectives on inputs). Got operand=ShapedArray(float32[8@x,8]), indices=ShapedArray(int32[8@x,1]), updates=ShapedArray(float32[8@x,8])",
        "ok: float32[8,8]",
    ),
    "scatter_add_out_sharding": (
        "ok: float32[8@x,8]",
        "ValueError: PartitionSpec passed to .add cannot contain axis names that are of type Auto or Manual. Got PartitionSpec: P('x', None) with axis name: x of type: AxisType.Auto. This error occurs at source:  <source> (scatter_add_out_sharding.<locals>.<lambda>)",
    ),
    "repeat": (
        "ValueError: Please pass sharding to `jnp.repeat` via `out_sharding` parameter.",
        "ok: float32[16,8]",
    ),
    "repeat_out_sharding": (
        "ok: float32[16@x,8]",
        "ValueError: PartitionSpec passed to repeat cannot contain axis names that are of type Auto or Manual. Got PartitionSpec: P('x', None) with axis name: x of type: AxisType.Auto. This error occurs at source:  <source> (repeat_out_sharding.<locals>.<lambda>)",
    ),
    "map_batch_size": (
        "ok: float32[5,8@x]",
        "ok: float32[5,8]",
    ),
    "shard_map_some_axes": (
        "ok: float32[4@x,5]",
        "ok: float32[4,5]",
    ),
    "shard_map_closure": (
        "NotImplementedError: Closing over inputs to shard_map where the input is sharded on `Explicit` axes is not implemented. As a workaround, please pass those inputs as an argument to shard_map. Got input with shape f32[8]({Explicit: ('x',)})",
        "ok: float32[8,8]",
    ),
    "shard_map_closure_as_argument": (
        "ok: float32[8@x,8]",
        "ok: float32[8,8]",
    ),
    "auto_axes_in_shard_map": (
        "NotImplementedError: Going from `Manual` AxisType to `Auto` or `Explicit` AxisType is not allowed. Please file a bug at https://github.com/jax-ml/jax/issues with your use case",
        "NotImplementedError: Going from `Manual` AxisType to `Auto` or `Explicit` AxisType is not allowed. Please file a bug at https://github.com/jax-ml/jax/issues with your use case",
    ),
    "auto_axes_named_axes": (
        "ok: float32[4@x]",
        "ok: float32[4]",
    ),
    "cond_branch_shardings": (
        "TypeError: cond branches must have equal output types but they differ.\n\ntrue_fun is <lambda> at <source>\nfalse_fun is <lambda> at <source>\n\nThe output of true_fun has type float32[8@x,8] but the corresponding output of false_fun has type float32[8,8@x].\n\nRevise true_fun and/or false_fun so that all output types match.",
        "ok: float32[8,8]",
    ),
    "cond_branch_reshard": (
        "ok: float32[8@x,8]",
        "ValueError: PartitionSpec passed to reshard cannot contain axis names that are of type Auto or Manual. Got PartitionSpec: P('x', None) with axis name: x of type: AxisType.Auto. This error occurs at source:  <source> (cond_branch_reshard.<locals>.<lambda>)",
    ),
    "switch_mixed_operands": (
        "ok: float32[4@x]",
        "ok: float32[4]",
    ),
    "auto_axes_scan_grad": (
        "ok: 6.0",
        "ok: 6.0",
    ),
    "auto_axes_closure_scan_grad": (
        f"ValueError: For primitive mul, context mesh AbstractMesh('x': 4, axis_types=(Auto,), {CPU}) should match the aval mesh AbstractMesh('x': 4, axis_types=(Explicit,), {CPU}) for shape float32[8@x]. This error occurs at source:",
        "ok: float32[8]",
    ),
    "auto_axes_positional_scan_grad": (
        "ok: float32[8@x]",
        "ok: float32[8]",
    ),
    "reshape_split_dim": (
        "ok: float32[2@x,4,1]",
        "ok: float32[2,4,1]",
    ),
    "reshape_merge_split_dim": (
        "ShardingTypeError: This reshape is not supported. Please specify the sharding of the output via the `out_sharding` argument of jax.lax.reshape. Got operand type: float32[8,8@x], new sizes: (64,)",
        "ok: float32[64]",
    ),
    "reshape_out_sharding": (
        "ok: float32[64@x]",
        "ValueError: PartitionSpec passed to reshape cannot contain axis names that are of type Auto or Manual. Got PartitionSpec: P('x',) with axis name: x of type: AxisType.Auto. This error occurs at source:  <source> (reshape_out_sharding.<locals>.<lambda>)",
    ),
    "size_one_axis_concat": (
        "ok: float32[1@data,4@tensor,128]",
        "ok: float32[1,4,128]",
    ),
    "size_one_axis_out_sharding": (
        "ok: float32[1@data,4@tensor,128]",
        "ValueError: PartitionSpec passed to reshape cannot contain axis names that are of type Auto or Manual. Got PartitionSpec: P('data', 'tensor', None) with axis name: data of type: AxisType.Auto. This error occurs at source:  <source> (size_one_axis_out_sharding.<locals>.<lambda>)",
    ),
    "custom_partitioning_mesh": (
        "ok: the callback sees [(Auto,)]",
        "ok: the callback sees [(Auto,)]",
    ),
    "custom_partitioning_runs": (
        "JaxRuntimeError: NOT_FOUND: No registered implementation for untyped custom call to Sharding for Host",
        "ok: float32[8,8]",
    ),
    "random_out_sharding": (
        "ok: float32[8@x,8]",
        "ValueError: PartitionSpec passed to normal cannot contain axis names that are of type Auto or Manual. Got PartitionSpec: P('x', None) with axis name: x of type: AxisType.Auto. This error occurs at source:  <source> (random_out_sharding)",
    ),
    "random_out_shardings": (
        "ok: laid out as P('x', None)",
        "ok: laid out as P('x', None)",
    ),
    "no_sharding_rule": (
        "NotImplementedError: Explicit sharding inference for ragged_dot_general is not currently implemented. Please specify out_sharding.",
        "ok: float32[8,3]",
    ),
    "auto_axes_escape_hatch": (
        "ok: float32[8@x,3]",
        "ok: float32[8,3]",
    ),
}
"""Per check, its whole outcome under (explicit, auto) on JAX 0.12.0.1, every line of its message,
as this machine's CPU devices give it. :func:`~snippets.measure.mode_checks.outcomes.message` has already replaced source
locations (``<source>``) and addresses; :func:`normalised` drops the devices' description."""

DEVICES = re.compile(r", device_kind=[^,()]*, num_cores=\w+, platform=\w+")
"""An abstract mesh's description of its devices: the only part of an outcome that depends on
the machine (TPU chips where a host has enough, simulated CPUs elsewhere)."""


def normalised(outcome: str) -> str:
    """``outcome`` with every abstract mesh's device description replaced by ``<devices>``."""
    return DEVICES.sub(", <devices>", outcome)


@pytest.fixture(scope="module")
def report() -> dict[str, dict[str, str]]:
    """Every check's outcome in each mode, as choosing_a_mode runs them (``report()``)."""
    return outcomes.report()


def test_every_check_is_pinned():
    assert sorted(CHECKS) == sorted(PINNED)


@pytest.mark.needs_devices(4)
@pytest.mark.parametrize("mode", ["explicit", "auto"])
@pytest.mark.parametrize("name", sorted(PINNED))
def test_outcome_is_the_pinned_one(report, name, mode):
    pinned = PINNED[name][mode == "auto"]
    got = report[name][mode]
    assert normalised(got) == normalised(pinned), (
        f"{name} under {mode} on JAX {jax.__version__}: {got!r}, pinned {pinned!r}"
    )


@pytest.mark.needs_devices(4)
def test_make_mesh_defaults_to_explicit_axes_and_mesh_to_auto_ones():
    """choosing_a_mode's first sentence: without ``axis_types`` the constructor picks the mode."""
    assert jax.make_mesh((4,), ("x",)).axis_types == (AxisType.Explicit,)
    mesh = jax.sharding.Mesh(np.array(jax.devices()[:4]), ("x",))
    assert mesh.axis_types == (AxisType.Auto,)


def test_only_the_devices_description_is_normalised():
    tpu = AUTO_X.replace(CPU, "device_kind=TPU v5 lite, num_cores=1, platform=tpu")
    assert normalised(tpu) == normalised(AUTO_X) != AUTO_X
    assert normalised(AUTO_X.replace("'x': 4", "'x': 8")) != normalised(AUTO_X)
    assert normalised(PINNED["constraint_mismatch"][0]) == PINNED["constraint_mismatch"][0]


@pytest.mark.parametrize(
    "mutation",
    [
        pytest.param(lambda t: t.replace("to Auto axes", "to Explicit axes"), id="a word"),
        pytest.param(lambda t: t.replace("reshard", "reshard_to"), id="the last word"),
        pytest.param(lambda t: t + "\nSee the sharding docs.", id="a line added"),
        pytest.param(lambda t: t.replace("ValueError", "TypeError"), id="the type"),
    ],
)
def test_a_changed_message_fails_the_pin(mutation):
    """Any change outside the devices' description fails: the pins are whole messages."""
    pinned = PINNED["constraint_without_set_mesh"][0]
    assert normalised(mutation(pinned)) != normalised(pinned)


def test_the_closure_check_runs_in_a_fresh_interpreter():
    assert ISOLATED == {"shard_map_closure"} <= set(CHECKS)


def test_a_second_check_of_the_same_name_is_refused():
    with pytest.raises(ValueError, match="two capability checks are named 'typed_sharding'"):
        check(CHECKS["typed_sharding"])


def test_every_tracked_check_names_an_issue_and_its_state():
    tracker = tomllib.loads(TRACKER.read_text())
    tracked = [name for issue in tracker["issue"] for name in issue["checks"]]
    assert len(tracked) == len(set(tracked)), "a check is tracked twice"
    assert set(tracked) <= set(CHECKS)
    for issue in tracker["issue"]:
        assert re.fullmatch(r"https://github.com/jax-ml/jax/(issues|pull)/\d+", issue["url"])
        assert issue["state"] in {"open", "closed"}
    assert re.fullmatch(r"\d{4}-\d\d-\d\d", str(tracker["looked"]))


@pytest.mark.needs_devices(8)
def test_the_design_docs_mesh_gives_its_four_times_the_flops():
    """MaxText section 7.2: explicit's dot is ``f32[1024,2048]``, auto's operand is sliced first."""
    dots = {}
    for axis_type in (AxisType.Explicit, AxisType.Auto):
        text = pinned_module(axis_type, (2, 4))
        (dot,) = re.findall(r"= (f32\[[\d,]+\])\S* dot\(", text)
        dots[axis_type] = (dot, dot_flops(text))
    assert dots[AxisType.Explicit] == ("f32[1024,2048]", 2 * 1024 * 512 * 2048)
    assert dots[AxisType.Auto] == ("f32[256,2048]", 2 * 256 * 512 * 2048)


@pytest.mark.needs_devices(4)
def test_the_fixed_model_on_explicit_shows_the_loss_of_the_model_as_written_on_auto():
    """The page's claim: the two losses it shows are equal (the guide asserts they differ by
    less than 1e-6; this checks the six digits a reader sees)."""
    explicit = train_step_loss(AxisType.Explicit, FIXES)
    auto = train_step_loss(AxisType.Auto)
    assert f"{explicit:.6f}" == f"{auto:.6f}"


@pytest.mark.needs_devices(4)
def test_the_json_report_is_name_to_mode_to_outcome(capsys):
    modes.main(["--check", "typed_sharding", "--check", "unreduced", "--json"])
    report = json.loads(capsys.readouterr().out)
    pinned = {name: dict(zip(("explicit", "auto"), PINNED[name], strict=True)) for name in report}
    assert list(report) == ["typed_sharding", "unreduced"]
    assert {n: {m: normalised(o) for m, o in r.items()} for n, r in report.items()} == {
        n: {m: normalised(o) for m, o in r.items()} for n, r in pinned.items()
    }
