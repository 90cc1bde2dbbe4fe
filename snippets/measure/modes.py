"""What each shard mode lets you write: every capability check, run on an Explicit and an Auto mesh.

Run ``python -m snippets modes [--check NAME ...] [--json]``. Each check's outcome per mode is
``ok`` (``ok: ...`` where the check reads something: a type, a compiled module) or the error's
type and first line, so a JAX release that changes one shows up as a changed string.
"""

from __future__ import annotations

import functools
import math
import re
from collections.abc import Callable, Sequence

import jax
import jax.numpy as jnp
import optax
from flax import nnx
from jax.lax import with_sharding_constraint
from jax.sharding import AxisType, Mesh, NamedSharding, auto_axes, reshard
from jax.sharding import PartitionSpec as P

from snippets.devices import MESH_DEVICES, SHARD_MODES, setup_devices
from snippets.hlo.collectives import collectives
from snippets.hlo.program import computations
from snippets.hlo.shapes import array_shapes, elements
from snippets.support.cli import Parser, reported
from snippets.support.tables import print_report

Check = Callable[[AxisType], str | None]
"""A check runs plain JAX under one axis type; it returns what it read (or ``None``), or raises."""


def mesh_of(
    axis_type: AxisType, shape: Sequence[int] = (MESH_DEVICES,), names: Sequence[str] = ("x",)
) -> Mesh:
    """A mesh of the first devices whose axes all have type ``axis_type``."""
    return jax.make_mesh(tuple(shape), tuple(names), axis_types=(axis_type,) * len(shape))


def first_line(error: BaseException) -> str:
    """The error's type and the first line of its message, without the source path JAX appends.

    >>> first_line(ValueError("bad spec. This error occurs at source: /a/b.py:3\\nmore"))
    'ValueError: bad spec.'
    """
    message = (str(error).strip().splitlines() or [""])[0].split(" This error occurs at source")[0]
    return f"{type(error).__name__}: {message}" if message else type(error).__name__


def outcome(check: Check, axis_type: AxisType) -> str:
    """``ok`` (``ok: what it read``) if ``check`` runs under ``axis_type``, else its error."""
    try:
        seen = check(axis_type)
    except Exception as error:  # noqa: BLE001 (every error is an outcome to record)
        return first_line(error)
    return "ok" if seen is None else f"ok: {seen}"


def dot_flops(hlo_text: str) -> int:
    """Per-device FLOPs of a compiled module's dots: 2 x result elements x contracted size."""
    total = 0
    for body in computations(hlo_text)[0].values():
        shapes = {inst.name: inst.shape for inst in body}
        for inst in body:
            if inst.opcode != "dot":
                continue
            lhs = array_shapes(shapes[inst.operands[0]])[0][1]
            dims = re.search(r"lhs_contracting_dims=\{([\d,]*)\}", inst.attributes)[1]
            contracted = math.prod(lhs[int(d)] for d in dims.split(",") if d)
            total += 2 * elements(inst.shape) * contracted
    return total


# The checks: plain JAX, one capability each.


def make_mesh_default(axis_type: AxisType) -> str:
    """What ``jax.make_mesh`` gives without ``axis_types``."""
    default = jax.make_mesh((4,), ("x",)).axis_types
    if default == (axis_type,):
        return "the default"
    return f"needs axis_types=({axis_type},)"


def typed_sharding(axis_type: AxisType) -> str:
    """The type of an array placed with ``P("x")``."""
    with jax.set_mesh(mesh_of(axis_type)):
        x = jax.device_put(jnp.ones((8, 8)), P("x"))
        return str(jax.typeof(x))


def constraint_mismatch(axis_type: AxisType) -> str:
    """A constraint to a layout the array does not have."""
    with jax.set_mesh(mesh_of(axis_type)):
        x = jax.device_put(jnp.ones((8, 8)), P("x", None))
        f = jax.jit(lambda a: with_sharding_constraint(a, P(None, "x")))
        return f"laid out as {f(x).sharding.spec}"


def constraint_match(axis_type: AxisType) -> str:
    """A constraint to the layout the array has: what it emits."""
    with jax.set_mesh(mesh_of(axis_type)):
        x = jax.device_put(jnp.ones((8, 8)), P("x", None))
        spec = P("x", None)
        hinted = jax.jit(lambda a: with_sharding_constraint(a * 2, spec))
        plain = jax.jit(lambda a: a * 2)
        texts = [f.lower(x).as_text() for f in (hinted, plain)]
        if texts[0] == texts[1]:
            return "StableHLO unchanged"
        added = [text.count("sharding_constraint") for text in texts]
        return f"adds {added[0] - added[1]} sharding_constraint"


def constraint_without_set_mesh(axis_type: AxisType) -> str:
    """The mismatched constraint as a ``NamedSharding``, no ``set_mesh``."""
    mesh = mesh_of(axis_type)
    x = jax.device_put(jnp.ones((8, 8)), NamedSharding(mesh, P("x")))
    hint = NamedSharding(mesh, P(None, "x"))
    f = jax.jit(lambda a: with_sharding_constraint(a, hint))
    return f"laid out as {f(x).sharding.spec}"


def unconstrained(axis_type: AxisType) -> str:
    """Leave a dimension to the partitioner: ``P.UNCONSTRAINED``."""
    with jax.set_mesh(mesh_of(axis_type)):
        x = jax.device_put(jnp.ones((8, 8)), P("x", None))
        spec = P(P.UNCONSTRAINED, None)
        f = jax.jit(lambda a: with_sharding_constraint(a, spec))
        return f"laid out as {f(x).sharding.spec}"


def unreduced(axis_type: AxisType) -> str:
    """A product's partial sums, left unreduced over ``x``."""
    with jax.set_mesh(mesh_of(axis_type)):
        a = jax.device_put(jnp.ones((2, 8)), P(None, "x"))
        b = jax.device_put(jnp.ones((8, 8)), P("x", None))
        spec = P(None, None, unreduced={"x"})
        f = jax.jit(functools.partial(jnp.dot, out_sharding=spec))
        return str(jax.typeof(f(a, b)))


def reduced(axis_type: AxisType) -> str:
    """A replicated array whose gradient comes back unreduced."""
    with jax.set_mesh(mesh_of(axis_type)):
        spec = P(None, None, reduced={"x"})
        return str(jax.typeof(jax.device_put(jnp.ones((1, 8)), spec)))


def doubly_sharded_einsum(axis_type: AxisType) -> str:
    """Scores from q and k split on their sequence axes (context)."""
    with jax.set_mesh(mesh_of(axis_type)):
        q = jax.device_put(jnp.ones((2, 8, 8)), P(None, "x", None))
        k = jax.device_put(jnp.ones((2, 8, 8)), P(None, "x", None))
        f = jax.jit(functools.partial(jnp.einsum, "bth,bsh->bts"))
        return str(jax.typeof(f(q, k)))


def sharded_contraction(axis_type: AxisType) -> str:
    """A product whose contracted dimension is split in both operands."""
    with jax.set_mesh(mesh_of(axis_type)):
        a = jax.device_put(jnp.ones((8, 8)), P(None, "x"))
        b = jax.device_put(jnp.ones((8, 8)), P("x", None))
        return str(jax.typeof(jax.jit(jnp.matmul)(a, b)))


def out_sharding(axis_type: AxisType) -> str:
    """The fix for both errors above: say how the result is laid out."""
    with jax.set_mesh(mesh_of(axis_type)):
        a = jax.device_put(jnp.ones((8, 8)), P(None, "x"))
        b = jax.device_put(jnp.ones((8, 8)), P("x", None))
        f = jax.jit(functools.partial(jnp.dot, out_sharding=P("x", None)))
        return str(jax.typeof(f(a, b)))


def mismatched_layout(axis_type: AxisType) -> str:
    """MaxText's section 6.4: add two arrays laid out differently."""
    with jax.set_mesh(mesh_of(axis_type)):
        p = jax.device_put(jnp.ones((8, 8)), P("x", None))
        u = jax.device_put(jnp.ones((8, 8)), P(None, "x"))
        text = jax.jit(jnp.add).lower(p, u).compile().as_text()
        kinds = sorted({op.kind for op in collectives(text)})
        return f"compiles with {', '.join(kinds) or 'no collective'}"


def pinned_module(axis_type: AxisType, shape: Sequence[int] = (2, 2)) -> str:
    """MaxText's section 7.2: a pinned einsum result, compiled."""
    explicit = axis_type == AxisType.Explicit
    pin = reshard if explicit else with_sharding_constraint  # as MaxText
    with jax.set_mesh(mesh_of(axis_type, shape, ("fsdp", "tensor"))):
        x = jax.device_put(jnp.ones((8, 256, 512)), P("fsdp", None, None))
        w = jax.device_put(jnp.ones((512, 2048)), P())

        def f(x, w):
            y = jnp.einsum("bse,ef->bsf", x, w)
            return pin(y, P("fsdp", "tensor", None))

        return jax.jit(f).lower(x, w).compile().as_text()


def pinned_intermediate(axis_type: AxisType) -> str:
    """The pinned einsum's per-device dot FLOPs, from its compiled module."""
    flops = dot_flops(pinned_module(axis_type))
    return f"{flops:,} dot FLOPs per device"


def shard_map_check_vma(axis_type: AxisType) -> None:
    """``shard_map`` with ``check_vma=True`` and a ``psum``."""
    mesh = mesh_of(axis_type)
    with jax.set_mesh(mesh):
        x = jax.device_put(jnp.ones((8, 8)), P("x", None))
        total = jax.shard_map(
            lambda a: jax.lax.psum(a, "x"),
            mesh=mesh,
            in_specs=P("x"),
            out_specs=P(),
            check_vma=True,
        )
        jax.jit(total)(x).block_until_ready()


def _mixed(axis_type: AxisType) -> tuple[Mesh, str]:
    """A 2 x 2 mesh with an Explicit axis ``x`` and an Auto axis ``y``, and this mode's axis."""
    mesh = jax.make_mesh((2, 2), ("x", "y"), axis_types=(AxisType.Explicit, AxisType.Auto))
    return mesh, "x" if axis_type == AxisType.Explicit else "y"


def mixed_mesh(axis_type: AxisType) -> str:
    """An array split over this mode's axis of a mixed mesh."""
    mesh, axis = _mixed(axis_type)
    with jax.set_mesh(mesh):
        x = jax.device_put(jnp.ones((8, 8)), P(axis, None))
        return str(jax.typeof(x))


def mixed_mesh_unreduced(axis_type: AxisType) -> str:
    """Partial sums over this mode's axis of a mixed mesh, finished."""
    mesh, axis = _mixed(axis_type)
    with jax.set_mesh(mesh):
        a = jax.device_put(jnp.ones((2, 8)), P(None, axis))
        b = jax.device_put(jnp.ones((8, 8)), P(axis, None))
        spec = P(None, None, unreduced={axis})

        def f(a, b):
            return reshard(jnp.dot(a, b, out_sharding=spec), P())

        return f"sums to {float(jax.jit(f)(a, b)[0, 0]):g}"


def auto_axes_keyword(axis_type: AxisType) -> str:
    """jax-ml/jax#33226: an ``auto_axes`` function given a keyword."""
    with jax.set_mesh(mesh_of(axis_type)):
        x = jax.device_put(jnp.ones((8, 8)), P("x", None))
        matmul = auto_axes(jnp.matmul, out_sharding=P("x", None))
        f = jax.jit(lambda a, b: matmul(a, b=b))  # b= is not resharded
        return str(jax.typeof(f(x, x)))


# Switching a small Flax model from auto to explicit: its errors, in order.

FIXES = ("embed", "down", "loss")
"""The changes that let the model run on an Explicit mesh, in order."""


class FlaxLM(nnx.Module):
    """Embedding, MLP block, untied head; over ("data", "model")."""

    def __init__(self, rngs: nnx.Rngs, fixes: Sequence[str] = ()):
        vocab, emb = 64, 16
        split = nnx.with_partitioning
        kernel = nnx.initializers.lecun_normal()
        table = split(nnx.initializers.normal(), ("model", None))
        self.fixes = tuple(fixes)
        self.embed = nnx.Embed(vocab, emb, embedding_init=table, rngs=rngs)
        col = split(kernel, (None, "model"))  # columns over "model"
        row = split(kernel, ("model", None))  # rows over "model"
        self.up = nnx.Linear(emb, 2 * emb, kernel_init=col, rngs=rngs)
        self.down = nnx.Linear(2 * emb, emb, kernel_init=row, rngs=rngs)
        self.head = nnx.Linear(emb, vocab, kernel_init=col, rngs=rngs)

    def __call__(self, tokens: jax.Array) -> jax.Array:
        """Logits; with ``fixes``, the layouts explicit mode needs."""
        rows = P("data", None, None)  # activations: batch over "data"
        fixed = {fix: rows if fix in self.fixes else None for fix in FIXES}
        h = self.embed(tokens, out_sharding=fixed["embed"])
        hidden = jax.nn.relu(self.up(h))
        h = h + self.down(hidden, out_sharding=fixed["down"])
        return self.head(h)


def tiny_lm_loss(model: FlaxLM, tokens: jax.Array, labels: jax.Array) -> jax.Array:
    """Mean cross entropy; the ``loss`` fix uses one-hot targets."""
    logits = model(tokens)
    if "loss" not in model.fixes:
        loss = optax.softmax_cross_entropy_with_integer_labels
        return loss(logits, labels).mean()
    spec = jax.typeof(logits).sharding.spec  # the logits' layout
    targets = jax.nn.one_hot(labels, logits.shape[-1], out_sharding=spec)
    return optax.softmax_cross_entropy(logits, targets).mean()


def train_step_loss(axis_type: AxisType, fixes: Sequence[str] = ()) -> float:
    """One AdamW step of :class:`FlaxLM`; the loss before it."""
    with jax.set_mesh(mesh_of(axis_type, (2, 2), ("data", "model"))):
        model = FlaxLM(nnx.Rngs(0), fixes)
        adamw = nnx.Optimizer(model, optax.adamw(1e-3), wrt=nnx.Param)
        tokens = jnp.arange(32).reshape(8, 4) % 64
        tokens = jax.device_put(tokens, P("data"))

        @nnx.jit
        def step(model, adamw, tokens, labels):
            grad_fn = nnx.value_and_grad(tiny_lm_loss)
            loss, grads = grad_fn(model, tokens, labels)
            adamw.update(model, grads)
            return loss

        return float(step(model, adamw, tokens, (tokens + 1) % 64))


def model_check(name: str, fixes: Sequence[str]) -> Check:
    """A check, called ``name``, that takes :class:`FlaxLM` one training step with ``fixes``."""

    def check(axis_type: AxisType) -> None:
        train_step_loss(axis_type, fixes)

    check.__name__, check.__doc__ = name, f"FlaxLM's training step with fixes {list(fixes)}."
    return check


MODEL_CHECKS = {
    "model_as_written": model_check("model_as_written", ()),
    **{
        f"model_plus_{fix}_fix": model_check(f"model_plus_{fix}_fix", FIXES[: n + 1])
        for n, fix in enumerate(FIXES)
    },
}
"""FlaxLM as written for auto, then with each fix added to the ones before it."""


CAPABILITY_CHECKS: dict[str, Check] = {
    "make_mesh_default": make_mesh_default,
    "typed_sharding": typed_sharding,
    "constraint_mismatch": constraint_mismatch,
    "constraint_match": constraint_match,
    "constraint_without_set_mesh": constraint_without_set_mesh,
    "unconstrained": unconstrained,
    "unreduced": unreduced,
    "reduced": reduced,
    "doubly_sharded_einsum": doubly_sharded_einsum,
    "sharded_contraction": sharded_contraction,
    "out_sharding": out_sharding,
    "mismatched_layout": mismatched_layout,
    "pinned_intermediate": pinned_intermediate,
    "shard_map_check_vma": shard_map_check_vma,
    "mixed_mesh": mixed_mesh,
    "mixed_mesh_unreduced": mixed_mesh_unreduced,
    "auto_axes_keyword": auto_axes_keyword,
    **MODEL_CHECKS,
}
"""Every check by the name the report, the tests and the version matrix use."""


def report(names: Sequence[str] | None = None) -> dict[str, dict[str, str]]:
    """``{name: {"explicit": outcome, "auto": outcome}}`` for the named checks (default: all)."""
    chosen = (
        CAPABILITY_CHECKS if names is None else {name: CAPABILITY_CHECKS[name] for name in names}
    )
    return {
        name: {mode: outcome(check, axis_type) for mode, axis_type in SHARD_MODES.items()}
        for name, check in chosen.items()
    }


def short(result: str) -> str:
    """An outcome for a table cell: ``ok`` and what was read, or just the error's type.

    >>> short("ShardingTypeError: dot_general operation ..."), short("ok: float32[8@x,8]")
    ('ShardingTypeError', 'ok: float32[8@x,8]')
    """
    return result if result.startswith("ok") else result.partition(":")[0]


def main(argv: Sequence[str] | None = None) -> None:
    """Print every check's outcome in both modes."""
    parser = Parser(__doc__)
    parser.add_argument(
        "--check",
        action="append",
        choices=sorted(CAPABILITY_CHECKS),
        metavar="NAME",
        help="run only NAME",
    )
    parser.add_argument("--json", action="store_true", help="print JSON instead of text")
    args = parser.parse_args(argv)
    with reported(args.debug):
        setup_devices(MESH_DEVICES)
    print_report(report(args.check), args.json)
