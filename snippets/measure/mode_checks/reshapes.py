"""Reshapes of a split dimension: splitting it, merging it, and beside a size-1 mesh axis."""

from __future__ import annotations

import jax
import jax.numpy as jnp
from jax.sharding import AxisType
from jax.sharding import PartitionSpec as P

from snippets.measure.mode_checks.registry import check, mesh_of


@check
def reshape_split_dim(axis_type: AxisType) -> str:
    """Reshape ``(8, 1)`` split over ``x`` of an (x, y) mesh to ``(2, 4, 1)`` (jax-ml/jax#29859)."""
    with jax.set_mesh(mesh_of(axis_type, (2, 2), ("x", "y"))):
        a = jax.device_put(jnp.ones((8, 1)), P("x"))
        return str(jax.typeof(jax.jit(lambda a: a.reshape(2, 4, 1))(a)))


@check
def reshape_merge_split_dim(axis_type: AxisType) -> str:
    """Reshape ``(8, 8)`` split on its columns to ``(64,)``."""
    with jax.set_mesh(mesh_of(axis_type)):
        a = jax.device_put(jnp.ones((8, 8)), P(None, "x"))
        return str(jax.typeof(jax.jit(lambda a: a.reshape(64))(a)))


@check
def reshape_out_sharding(axis_type: AxisType) -> str:
    """The fix: ``jnp.reshape(..., out_sharding=)``."""
    with jax.set_mesh(mesh_of(axis_type)):
        a = jax.device_put(jnp.ones((8, 8)), P(None, "x"))
        f = jax.jit(lambda a: jnp.reshape(a, (64,), out_sharding=P("x")))
        return str(jax.typeof(f(a)))


@check
def size_one_axis_concat(axis_type: AxisType) -> str:
    """jax-ml/jax#39309 on a (data=1, tensor=4) mesh: reshape, then concatenate."""
    with jax.set_mesh(mesh_of(axis_type, (1, 4), ("data", "tensor"))):
        x = jax.device_put(jnp.ones((1, 512)), P("data", "tensor"))
        y = jax.jit(lambda x: x.reshape(-1, 4, 128))(x)
        heads = jax.device_put(y, P("data", "tensor", None))
        return str(jax.typeof(jnp.concatenate((heads, y[..., :0]), axis=-1)))


@check
def size_one_axis_out_sharding(axis_type: AxisType) -> str:
    """The fix: give the reshape the layout, ``out_sharding=``."""
    with jax.set_mesh(mesh_of(axis_type, (1, 4), ("data", "tensor"))):
        x = jax.device_put(jnp.ones((1, 512)), P("data", "tensor"))
        spec = P("data", "tensor", None)
        y = jax.jit(lambda x: jnp.reshape(x, (-1, 4, 128), out_sharding=spec))(x)
        heads = jax.device_put(y, spec)
        return str(jax.typeof(jnp.concatenate((heads, y[..., :0]), axis=-1)))
