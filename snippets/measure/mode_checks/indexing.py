"""Indexing an array split over its rows: gathers, scatters, ``repeat`` and ``lax.map``."""

from __future__ import annotations

import jax
import jax.numpy as jnp
from jax.sharding import AxisType
from jax.sharding import PartitionSpec as P

from snippets.measure.mode_checks.registry import check, mesh_of


def _rows_and_indices() -> tuple[jax.Array, jax.Array]:
    """An (8, 8) array and 8 row indices, both split over ``x``; under ``jax.set_mesh``."""
    x = jax.device_put(jnp.ones((8, 8)), P("x", None))
    return x, jax.device_put(jnp.arange(8) % 3, P("x"))


@check
def index_column(axis_type: AxisType) -> str:
    """``x[:, 1]`` on an array split over its rows."""
    with jax.set_mesh(mesh_of(axis_type)):
        x = jax.device_put(jnp.ones((8, 8)), P("x", None))
        return str(jax.typeof(jax.jit(lambda a: a[:, 1])(x)))


@check
def gather_rows(axis_type: AxisType) -> str:
    """``x[i]``: rows picked by indices split like them."""
    with jax.set_mesh(mesh_of(axis_type)):
        x, i = _rows_and_indices()
        return str(jax.typeof(jax.jit(lambda a, i: a[i])(x, i)))


@check
def gather_rows_out_sharding(axis_type: AxisType) -> str:
    """The fix: ``x.at[i].get(out_sharding=)``."""
    with jax.set_mesh(mesh_of(axis_type)):
        x, i = _rows_and_indices()
        f = jax.jit(lambda a, i: a.at[i].get(out_sharding=P("x", None)))
        return str(jax.typeof(f(x, i)))


@check
def scatter_set(axis_type: AxisType) -> str:
    """``x.at[:, 1].set(0)`` on an array split over its rows."""
    with jax.set_mesh(mesh_of(axis_type)):
        x = jax.device_put(jnp.ones((8, 8)), P("x", None))
        return str(jax.typeof(jax.jit(lambda a: a.at[:, 1].set(0.0))(x)))


@check
def scatter_add(axis_type: AxisType) -> str:
    """``x.at[i].add(x)``: rows added at indices split like them."""
    with jax.set_mesh(mesh_of(axis_type)):
        x, i = _rows_and_indices()
        return str(jax.typeof(jax.jit(lambda a, i: a.at[i].add(a))(x, i)))


@check
def scatter_add_out_sharding(axis_type: AxisType) -> str:
    """The fix: ``x.at[i].add(x, out_sharding=)``."""
    with jax.set_mesh(mesh_of(axis_type)):
        x, i = _rows_and_indices()
        f = jax.jit(lambda a, i: a.at[i].add(a, out_sharding=P("x", None)))
        return str(jax.typeof(f(x, i)))


@check
def repeat(axis_type: AxisType) -> str:
    """``jnp.repeat`` along a split dimension."""
    with jax.set_mesh(mesh_of(axis_type)):
        x = jax.device_put(jnp.ones((8, 8)), P("x", None))
        return str(jax.typeof(jax.jit(lambda a: jnp.repeat(a, 2, axis=0))(x)))


@check
def repeat_out_sharding(axis_type: AxisType) -> str:
    """The fix: ``jnp.repeat(..., out_sharding=)``."""
    with jax.set_mesh(mesh_of(axis_type)):
        x = jax.device_put(jnp.ones((8, 8)), P("x", None))
        f = jax.jit(lambda a: jnp.repeat(a, 2, axis=0, out_sharding=P("x", None)))
        return str(jax.typeof(f(x)))


@check
def map_batch_size(axis_type: AxisType) -> str:
    """``lax.map(..., batch_size=2)`` over 5 items split on their second dimension."""
    with jax.set_mesh(mesh_of(axis_type)):
        x = jax.device_put(jnp.ones((5, 8, 4)), P(None, "x", None))
        w = jnp.arange(4.0)
        return str(jax.typeof(jax.lax.map(lambda a: jnp.sum(w * a, -1), x, batch_size=2)))
