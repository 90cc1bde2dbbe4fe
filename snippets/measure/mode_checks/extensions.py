"""Extension points: ``custom_partitioning``, random numbers laid out, and an operation whose
sharding rule cannot infer its result's layout (``lax.ragged_dot``)."""

from __future__ import annotations

import contextlib
import functools
from collections.abc import Callable

import jax
import jax.numpy as jnp
from jax.experimental.custom_partitioning import custom_partitioning
from jax.sharding import AxisType, NamedSharding, auto_axes
from jax.sharding import PartitionSpec as P

from snippets.measure.mode_checks.registry import check, mesh_of


def _double_per_shard() -> tuple[Callable, list]:
    """A ``custom_partitioning`` doubling, and the list its partition callback appends its
    mesh's axis types to."""
    seen = []

    @custom_partitioning
    def double(x):
        return x * 2

    def partition(mesh, arg_shapes, result_shape):
        seen.append(mesh.axis_types)
        return mesh, lambda x: x * 2, result_shape.sharding, (arg_shapes[0].sharding,)

    double.def_partition(partition=partition, sharding_rule="i j -> i j")
    return double, seen


@check
def custom_partitioning_mesh(axis_type: AxisType) -> str:
    """The axis types a ``custom_partitioning`` callback is given (the next check compiles it)."""
    double, seen = _double_per_shard()
    with jax.set_mesh(mesh_of(axis_type)):
        x = jax.device_put(jnp.ones((8, 8)), P("x", None))
        with contextlib.suppress(Exception):
            jax.jit(double).lower(x).compile()
        return f"the callback sees {sorted(set(seen))}"


@check
def custom_partitioning_runs(axis_type: AxisType) -> str:
    """A ``custom_partitioning`` function, compiled and run."""
    double, _ = _double_per_shard()
    with jax.set_mesh(mesh_of(axis_type)):
        x = jax.device_put(jnp.ones((8, 8)), P("x", None))
        return str(jax.typeof(jax.jit(double)(x)))


@check
def random_out_sharding(axis_type: AxisType) -> str:
    """``jax.random.normal(..., out_sharding=)``."""
    with jax.set_mesh(mesh_of(axis_type)):
        key = jax.random.key(0)
        return str(jax.typeof(jax.random.normal(key, (8, 8), out_sharding=P("x", None))))


@check
def random_out_shardings(axis_type: AxisType) -> str:
    """The fix on an auto mesh: the layout as ``jax.jit(..., out_shardings=)``."""
    mesh = mesh_of(axis_type)
    with jax.set_mesh(mesh):
        normal = functools.partial(jax.random.normal, shape=(8, 8))
        f = jax.jit(normal, out_shardings=NamedSharding(mesh, P("x", None)))
        return f"laid out as {f(jax.random.key(0)).sharding.spec}"


def _ragged_inputs() -> tuple[jax.Array, jax.Array, jax.Array]:
    """``lax.ragged_dot``'s operands: rows split over ``x``, 2 groups of 4 rows."""
    x = jax.device_put(jnp.ones((8, 4)), P("x", None))
    return x, jnp.ones((2, 4, 3)), jnp.array([4, 4], jnp.int32)


@check
def no_sharding_rule(axis_type: AxisType) -> str:
    """``lax.ragged_dot`` without ``out_sharding``: its sharding rule cannot infer the result's."""
    with jax.set_mesh(mesh_of(axis_type)):
        return str(jax.typeof(jax.jit(jax.lax.ragged_dot)(*_ragged_inputs())))


@check
def auto_axes_escape_hatch(axis_type: AxisType) -> str:
    """The fix: run it in ``auto_axes``, saying only the result's layout."""
    with jax.set_mesh(mesh_of(axis_type)):
        ragged_dot = auto_axes(jax.lax.ragged_dot, out_sharding=P("x", None))
        return str(jax.typeof(jax.jit(ragged_dot)(*_ragged_inputs())))
