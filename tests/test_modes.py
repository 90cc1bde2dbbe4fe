"""Every capability check's outcome in both modes, pinned: a JAX release changing one fails."""

import json
import re

import jax
import pytest
from jax.sharding import AxisType

from snippets.measure import modes

GATHER = "ShardingTypeError: Use `.at[...].get(out_sharding=)` to provide output PartitionSpec"
AMBIGUOUS = "ShardingTypeError: Contracting dimensions are sharded and it is ambiguous"
NO_AUTO_OUT_SHARDING = (
    "ValueError: PartitionSpec passed to dot_general cannot contain axis names that are "
    "of type Auto or Manual."
)
UNREDUCED_ON_AUTO = (
    "ValueError: Unreduced axes can only refer to mesh axes that is of type `Explicit`."
)
ASSERT = (
    "AssertionError: `with_sharding_constraint` acts as an assert when all axes of mesh "
    "are of type `Explicit`. The array sharding: P('x', None) did not match the sharding "
    "provided: P(None, 'x')."
)
AUTO_AXES_ONLY = (
    "ValueError: The spec of NamedSharding passed to with_sharding_constraint can only "
    "refer to Auto axes of the mesh."
)
NO_UNCONSTRAINED = (
    "ValueError: P(UNCONSTRAINED, None) cannot contain `P.UNCONSTRAINED` when no mesh "
    "axis_types are `Auto`."
)
TWICE_ON_X = (
    "ShardingTypeError: dot_general operation with inputs: f32[2,8@x,8], f32[2,8@x,8] "
    "produces an illegally sharded result: f32[2,8@x,8@x]"
)
ADD_MISMATCH = (
    "ShardingTypeError: add operation with inputs: f32[8@x,8], f32[8,8@x] produces an "
    "illegally sharded result: f32[8@x,8@x]"
)
KEYWORD_NOT_RESHARDED = (
    "ValueError: For primitive dot_general, context mesh AbstractMesh('x': 4, axis_types=(Auto,)"
)

PINNED = {
    "make_mesh_default": ("ok: the default", "ok: needs axis_types=(AxisType.Auto,)"),
    "typed_sharding": ("ok: float32[8@x,8]", "ok: float32[8,8]"),
    "constraint_mismatch": (ASSERT, "ok: laid out as P(None, 'x')"),
    "constraint_match": ("ok: StableHLO unchanged", "ok: adds 1 sharding_constraint"),
    "constraint_without_set_mesh": (AUTO_AXES_ONLY, "ok: laid out as P(None, 'x')"),
    "unconstrained": (NO_UNCONSTRAINED, "ok: laid out as P('x', None)"),
    "unreduced": ("ok: float32[2,8]{U:x}", UNREDUCED_ON_AUTO),
    "reduced": ("ok: float32[1,8]{R:x}", UNREDUCED_ON_AUTO.replace("Unreduced", "Reduced")),
    "doubly_sharded_einsum": (TWICE_ON_X, "ok: float32[2,8,8]"),
    "sharded_contraction": (AMBIGUOUS, "ok: float32[8,8]"),
    "out_sharding": ("ok: float32[8@x,8]", NO_AUTO_OUT_SHARDING),
    "mismatched_layout": (ADD_MISMATCH, "ok: compiles with all-to-all"),
    "pinned_intermediate": (
        "ok: 2,147,483,648 dot FLOPs per device",
        "ok: 1,073,741,824 dot FLOPs per device",
    ),
    "shard_map_check_vma": ("ok", "ok"),
    "mixed_mesh": ("ok: float32[8@x,8]", "ok: float32[8,8]"),
    "mixed_mesh_unreduced": ("ok: sums to 16", UNREDUCED_ON_AUTO),
    "auto_axes_keyword": (KEYWORD_NOT_RESHARDED, "ok: float32[8,8]"),
    "model_as_written": (GATHER, "ok"),
    "model_plus_embed_fix": (AMBIGUOUS, "ok"),
    "model_plus_down_fix": (GATHER, NO_AUTO_OUT_SHARDING),
    "model_plus_loss_fix": ("ok", NO_AUTO_OUT_SHARDING),
}
"""Per check, its outcome under (explicit, auto) on JAX 0.12.0.1: an ``ok`` outcome whole, an
error as its type and the stable start of its first line."""


@pytest.fixture(scope="module")
def report() -> dict[str, dict[str, str]]:
    """Every check, run once for this module's tests."""
    return modes.report()


def matches(got: str, pinned: str) -> bool:
    """An ``ok`` outcome must be the pinned one exactly; an error must start with the pin."""
    return got == pinned if pinned.startswith("ok") else got.startswith(pinned)


def test_every_check_is_pinned():
    assert sorted(modes.CAPABILITY_CHECKS) == sorted(PINNED)


@pytest.mark.needs_devices(4)
@pytest.mark.parametrize("mode", ["explicit", "auto"])
@pytest.mark.parametrize("name", sorted(PINNED))
def test_outcome_is_the_pinned_one(report, name, mode):
    pinned = PINNED[name][mode == "auto"]
    got = report[name][mode]
    assert matches(got, pinned), (
        f"{name} under {mode} on JAX {jax.__version__}: {got!r}, pinned {pinned!r}"
    )


def test_the_pin_check_tells_ok_from_an_error():
    assert matches("ok", "ok")
    assert not matches("ok: float32[8,8]", "ok")
    assert not matches("ValueError: other", "ValueError: Unreduced")
    assert matches("ValueError: Unreduced axes ... mesh", "ValueError: Unreduced")


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
    assert report == {
        "typed_sharding": {"explicit": "ok: float32[8@x,8]", "auto": "ok: float32[8,8]"},
        "unreduced": {"explicit": "ok: float32[2,8]{U:x}", "auto": report["unreduced"]["auto"]},
    }
    assert report["unreduced"]["auto"].startswith(UNREDUCED_ON_AUTO)
