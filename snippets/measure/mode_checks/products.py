"""Products and sums across layouts: results explicit will not guess and a pinned einsum's FLOPs;
then MaxText's own rules (``check_vma``, mixed meshes) and ``auto_axes``' keyword arguments."""

from __future__ import annotations

import functools
from collections.abc import Sequence

import jax
import jax.numpy as jnp
from jax.lax import with_sharding_constraint
from jax.sharding import AxisType, Mesh, auto_axes, reshard
from jax.sharding import PartitionSpec as P

from snippets.hlo.collectives import collectives
from snippets.hlo.counts import dot_flops
from snippets.hlo.programs import compiled_text
from snippets.measure.mode_checks.registry import check, mesh_of


@check
def doubly_sharded_einsum(axis_type: AxisType) -> str:
    """Scores from q and k split on their sequence axes (context)."""
    with jax.set_mesh(mesh_of(axis_type)):
        q = jax.device_put(jnp.ones((2, 8, 8)), P(None, "x", None))
        k = jax.device_put(jnp.ones((2, 8, 8)), P(None, "x", None))
        f = jax.jit(functools.partial(jnp.einsum, "bth,bsh->bts"))
        return str(jax.typeof(f(q, k)))


@check
def sharded_contraction(axis_type: AxisType) -> str:
    """A product whose contracted dimension is split in both operands."""
    with jax.set_mesh(mesh_of(axis_type)):
        a = jax.device_put(jnp.ones((8, 8)), P(None, "x"))
        b = jax.device_put(jnp.ones((8, 8)), P("x", None))
        return str(jax.typeof(jax.jit(jnp.matmul)(a, b)))


@check
def out_sharding(axis_type: AxisType) -> str:
    """The fix for both errors above: say how the result is laid out."""
    with jax.set_mesh(mesh_of(axis_type)):
        a = jax.device_put(jnp.ones((8, 8)), P(None, "x"))
        b = jax.device_put(jnp.ones((8, 8)), P("x", None))
        f = jax.jit(functools.partial(jnp.dot, out_sharding=P("x", None)))
        return str(jax.typeof(f(a, b)))


@check
def mismatched_layout(axis_type: AxisType) -> str:
    """MaxText's section 6.4: add two arrays laid out differently."""
    with jax.set_mesh(mesh_of(axis_type)):
        p = jax.device_put(jnp.ones((8, 8)), P("x", None))
        u = jax.device_put(jnp.ones((8, 8)), P(None, "x"))
        text = compiled_text(jax.jit(jnp.add).lower(p, u).compile())
        kinds = sorted({op.kind for op in collectives(text)})
        return f"compiles with {', '.join(kinds) or 'no collective'}"


def pinned_module(axis_type: AxisType, shape: Sequence[int] = (2, 2)) -> str:
    """MaxText's section 7.2: a pinned einsum result, compiled."""
    explicit = axis_type == AxisType.Explicit
    constrain = reshard if explicit else with_sharding_constraint  # as MaxText
    with jax.set_mesh(mesh_of(axis_type, shape, ("fsdp", "tensor"))):
        x = jax.device_put(jnp.ones((8, 256, 512)), P("fsdp", None, None))
        w = jax.device_put(jnp.ones((512, 2048)), P())

        def f(x, w):
            y = jnp.einsum("bse,ef->bsf", x, w)
            return constrain(y, P("fsdp", "tensor", None))

        return compiled_text(jax.jit(f).lower(x, w).compile())


@check
def pinned_intermediate(axis_type: AxisType) -> str:
    """The pinned einsum's per-device dot FLOPs, from its compiled module."""
    return f"{dot_flops(pinned_module(axis_type)):,} dot FLOPs per device"


@check
def shard_map_check_vma(axis_type: AxisType) -> None:
    """``shard_map`` with ``check_vma=True`` and a ``psum``."""
    mesh = mesh_of(axis_type)
    with jax.set_mesh(mesh):
        x = jax.device_put(jnp.ones((8, 8)), P("x", None))
        psum = functools.partial(jax.lax.psum, axis_name="x")
        total = jax.shard_map(psum, mesh=mesh, in_specs=P("x"), out_specs=P(), check_vma=True)
        jax.jit(total)(x).block_until_ready()


def _mixed(axis_type: AxisType) -> tuple[Mesh, str]:
    """A 2 x 2 mesh with an Explicit axis ``x`` and an Auto axis ``y``, and this mode's axis."""
    mesh = jax.make_mesh((2, 2), ("x", "y"), axis_types=(AxisType.Explicit, AxisType.Auto))
    return mesh, "x" if axis_type == AxisType.Explicit else "y"


@check
def mixed_mesh(axis_type: AxisType) -> str:
    """An array split over this mode's axis of a mixed mesh."""
    mesh, axis = _mixed(axis_type)
    with jax.set_mesh(mesh):
        x = jax.device_put(jnp.ones((8, 8)), P(axis, None))
        return str(jax.typeof(x))


@check
def mixed_mesh_unreduced(axis_type: AxisType) -> str:
    """Partial sums over this mode's axis of a mixed mesh, finished."""
    mesh, axis = _mixed(axis_type)
    with jax.set_mesh(mesh):
        a = jax.device_put(jnp.ones((2, 8)), P(None, axis))
        b = jax.device_put(jnp.ones((8, 8)), P(axis, None))
        spec = P(None, None, unreduced={axis})
        f = jax.jit(lambda a, b: reshard(jnp.dot(a, b, out_sharding=spec), P()))
        return f"sums to {float(f(a, b)[0, 0]):g}"


@check
def auto_axes_keyword(axis_type: AxisType) -> str:
    """jax-ml/jax#33226: an ``auto_axes`` function given a keyword."""
    with jax.set_mesh(mesh_of(axis_type)):
        x = jax.device_put(jnp.ones((8, 8)), P("x", None))
        matmul = auto_axes(jnp.matmul, out_sharding=P("x", None))
        f = jax.jit(lambda a, b: matmul(a, b=b))  # b= is not resharded
        return str(jax.typeof(f(x, x)))
