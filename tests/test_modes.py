"""Every capability check's whole outcome in both modes, pinned: a JAX release changing one fails."""

import json
import re

import jax
import numpy as np
import pytest
from jax.sharding import AxisType

from snippets.measure import modes

GATHER = (
    "ShardingTypeError: Use `.at[...].get(out_sharding=)` to provide output PartitionSpec for "
    "the gather indexing as out sharding could not be resolved unambiguously (or would require "
    "collectives on inputs). Got operand=ShapedArray({operand}), indices=ShapedArray({indices})"
)
AMBIGUOUS = (
    "ShardingTypeError: Contracting dimensions are sharded and it is ambiguous how the output "
    "should be sharded. Please specify the output sharding via the `out_sharding` parameter. "
    "Got lhs_contracting_spec=('{axis}',) and rhs_contracting_spec=('{axis}',)"
)
NO_AUTO_OUT_SHARDING = (
    "ValueError: PartitionSpec passed to dot_general cannot contain axis names that are of type "
    "Auto or Manual. Got PartitionSpec: {spec} with axis name: {axis} of type: AxisType.Auto."
)
NOT_ON_AUTO = (
    "ValueError: {kind} axes can only refer to mesh axes that is of type `Explicit`. Got "
    "{kind_lower} axes: frozenset({{'{axis}'}}) and mesh: {mesh}"
)
CPU = "device_kind=cpu, num_cores=None, platform=cpu"
ASSERT = (
    "AssertionError: `with_sharding_constraint` acts as an assert when all axes of mesh are of "
    "type `Explicit`. The array sharding: P('x', None) did not match the sharding provided: "
    "P(None, 'x'). Please use `jax.sharding.reshard` to shard your input to the sharding you want."
)
AUTO_AXES_ONLY = (
    "ValueError: The spec of NamedSharding passed to with_sharding_constraint can only refer to "
    "Auto axes of the mesh. Got spec=P(None, 'x') and mesh=AbstractMesh('x': 4, "
    f"axis_types=(Explicit,), {CPU}). You probably meant to use `reshard` API?"
)
NO_UNCONSTRAINED = (
    "ValueError: P(UNCONSTRAINED, None) cannot contain `P.UNCONSTRAINED` when no mesh axis_types "
    "are `Auto`. Got mesh axis_types: (Explicit,)"
)
ILLEGAL = "ShardingTypeError: {op} operation with inputs: {inputs} produces an illegally sharded result: {result}"
KEYWORD_NOT_RESHARDED = (
    f"ValueError: For primitive dot_general, context mesh AbstractMesh('x': 4, axis_types=(Auto,), "
    f"{CPU}) should match the aval mesh AbstractMesh('x': 4, axis_types=(Explicit,), {CPU}) for "
    "shape float32[8@x,8]."
)
GATHER_EMBEDDING = GATHER.format(operand="float32[64@model,16]", indices="int32[8@data,4,1]")
GATHER_LOGITS = GATHER.format(operand="float32[8@data,4,64@model]", indices="int32[8@data,4,1,1]")
DATA_OUT_SHARDING = NO_AUTO_OUT_SHARDING.format(spec="P('data', None, None)", axis="data")
AUTO_X = f"AbstractMesh('x': 4, axis_types=(Auto,), {CPU})"

PINNED = {
    "make_mesh_default": ("ok: the default", "ok: needs axis_types=(AxisType.Auto,)"),
    "typed_sharding": ("ok: float32[8@x,8]", "ok: float32[8,8]"),
    "constraint_mismatch": (ASSERT, "ok: laid out as P(None, 'x')"),
    "constraint_match": ("ok: StableHLO unchanged", "ok: adds 1 sharding_constraint"),
    "constraint_without_set_mesh": (AUTO_AXES_ONLY, "ok: laid out as P(None, 'x')"),
    "unconstrained": (NO_UNCONSTRAINED, "ok: laid out as P('x', None)"),
    "unreduced": (
        "ok: float32[2,8]{U:x}",
        NOT_ON_AUTO.format(kind="Unreduced", kind_lower="unreduced", axis="x", mesh=AUTO_X),
    ),
    "reduced": (
        "ok: float32[1,8]{R:x}",
        NOT_ON_AUTO.format(
            kind="Reduced", kind_lower="reduced", axis="x", mesh="Mesh('x': 4, axis_types=(Auto,))"
        ),
    ),
    "doubly_sharded_einsum": (
        ILLEGAL.format(
            op="dot_general", inputs="f32[2,8@x,8], f32[2,8@x,8]", result="f32[2,8@x,8@x]"
        ),
        "ok: float32[2,8,8]",
    ),
    "sharded_contraction": (AMBIGUOUS.format(axis="x"), "ok: float32[8,8]"),
    "out_sharding": (
        "ok: float32[8@x,8]",
        NO_AUTO_OUT_SHARDING.format(spec="P('x', None)", axis="x"),
    ),
    "mismatched_layout": (
        ILLEGAL.format(op="add", inputs="f32[8@x,8], f32[8,8@x]", result="f32[8@x,8@x]"),
        "ok: compiles with all-to-all",
    ),
    "pinned_intermediate": (
        "ok: 2,147,483,648 dot FLOPs per device",
        "ok: 1,073,741,824 dot FLOPs per device",
    ),
    "shard_map_check_vma": ("ok", "ok"),
    "mixed_mesh": ("ok: float32[8@x,8]", "ok: float32[8,8]"),
    "mixed_mesh_unreduced": (
        "ok: sums to 16",
        NOT_ON_AUTO.format(
            kind="Unreduced",
            kind_lower="unreduced",
            axis="y",
            mesh=f"AbstractMesh('x': 2, 'y': 2, axis_types=(Explicit, Auto), {CPU})",
        ),
    ),
    "auto_axes_keyword": (KEYWORD_NOT_RESHARDED, "ok: float32[8,8]"),
    "model_as_written": (GATHER_EMBEDDING, "ok"),
    "model_plus_embed_fix": (AMBIGUOUS.format(axis="model"), "ok"),
    "model_plus_down_fix": (GATHER_LOGITS, DATA_OUT_SHARDING),
    "model_plus_loss_fix": ("ok", DATA_OUT_SHARDING),
}
"""Per check, its whole outcome under (explicit, auto) on JAX 0.12.0.1, as this machine's CPU
devices give it; :func:`normalised` drops the devices' description (see there)."""

DEVICES = re.compile(r", device_kind=[^,()]*, num_cores=\w+, platform=\w+")
"""An abstract mesh's description of its devices: the only part of an outcome that depends on
the machine (TPU chips where a host has enough, simulated CPUs elsewhere)."""


def normalised(outcome: str) -> str:
    """``outcome`` with every abstract mesh's device description replaced by ``<devices>``."""
    return DEVICES.sub(", <devices>", outcome)


@pytest.fixture(scope="module")
def report() -> dict[str, dict[str, str]]:
    """Every check, run once for this module's tests."""
    return modes.report()


def test_every_check_is_pinned():
    assert sorted(modes.CAPABILITY_CHECKS) == sorted(PINNED)


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
    assert normalised(ASSERT) == ASSERT


def test_an_outcome_is_ok_what_was_read_or_the_first_error_line():
    def raises(axis_type):
        raise ValueError(f"{axis_type.name} refused. This error occurs at source: /x.py:1\nmore")

    assert modes.outcome(lambda axis_type: None, AxisType.Explicit) == "ok"
    assert modes.outcome(lambda axis_type: axis_type.name, AxisType.Auto) == "ok: Auto"
    assert modes.outcome(raises, AxisType.Auto) == "ValueError: Auto refused."
    assert modes.first_line(KeyError()) == "KeyError"


@pytest.mark.needs_devices(4)
def test_dot_flops_agree_with_xla_cost_analysis():
    with jax.set_mesh(modes.mesh_of(AxisType.Explicit)):
        x = jax.device_put(jax.numpy.ones((8, 32)), jax.P("x", None))
        compiled = jax.jit(lambda a, b: a @ b).lower(x, jax.numpy.ones((32, 16))).compile()
    assert modes.dot_flops(compiled.as_text()) == 2 * 2 * 32 * 16
    assert modes.dot_flops(compiled.as_text()) == compiled.cost_analysis()["flops"]


@pytest.mark.needs_devices(8)
def test_the_design_docs_mesh_gives_its_four_times_the_flops():
    """MaxText section 7.2: explicit's dot is ``f32[1024,2048]``, auto's operand is sliced first."""
    dots = {}
    for axis_type in (AxisType.Explicit, AxisType.Auto):
        text = modes.pinned_module(axis_type, (2, 4))
        (dot,) = re.findall(r"= (f32\[[\d,]+\])\S* dot\(", text)
        dots[axis_type] = (dot, modes.dot_flops(text))
    assert dots[AxisType.Explicit] == ("f32[1024,2048]", 2 * 1024 * 512 * 2048)
    assert dots[AxisType.Auto] == ("f32[256,2048]", 2 * 256 * 512 * 2048)


@pytest.mark.needs_devices(4)
def test_the_fixed_model_on_explicit_matches_the_model_as_written_on_auto():
    fixed = modes.train_step_loss(AxisType.Explicit, modes.FIXES)
    assert fixed == pytest.approx(modes.train_step_loss(AxisType.Auto), abs=1e-6)


@pytest.mark.needs_devices(4)
def test_the_json_report_is_name_to_mode_to_outcome(capsys):
    modes.main(["--check", "typed_sharding", "--check", "unreduced", "--json"])
    report = json.loads(capsys.readouterr().out)
    pinned = {name: dict(zip(("explicit", "auto"), PINNED[name], strict=True)) for name in report}
    assert list(report) == ["typed_sharding", "unreduced"]
    assert {n: {m: normalised(o) for m, o in r.items()} for n, r in report.items()} == {
        n: {m: normalised(o) for m, o in r.items()} for n, r in pinned.items()
    }
