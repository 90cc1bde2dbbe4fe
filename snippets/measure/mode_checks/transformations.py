"""Transformations of laid-out arrays: ``shard_map``, ``cond``, ``switch`` under ``vmap``, and
``auto_axes`` in ``scan`` under ``grad``."""

from __future__ import annotations

import functools

import jax
import jax.numpy as jnp
from jax.sharding import AxisType, auto_axes, reshard
from jax.sharding import PartitionSpec as P

from snippets.measure.mode_checks.registry import check, isolated_check, mesh_of


@check
def shard_map_some_axes(axis_type: AxisType) -> str:
    """``shard_map`` over ``x`` of an (x, y) mesh, a ``lax.map`` inside (jax-ml/jax#31799)."""
    with jax.set_mesh(mesh_of(axis_type, (2, 2), ("x", "y"))):
        x = jax.device_put(jnp.ones((4, 5, 4)), P("x", None, None))
        w = jnp.arange(4.0)
        body = functools.partial(jax.lax.map, lambda a: a @ w)
        f = jax.shard_map(body, in_specs=P("x"), out_specs=P("x"), axis_names={"x"})
        return str(jax.typeof(jax.jit(f)(x)))


@isolated_check
def shard_map_closure(axis_type: AxisType) -> str:
    """A ``shard_map`` body closing over an array placed on the mesh (run isolated)."""
    with jax.set_mesh(mesh_of(axis_type)):
        w = jax.device_put(jnp.arange(8.0), P())
        x = jax.device_put(jnp.ones((8, 8)), P("x", None))
        f = jax.shard_map(lambda a: a * w, in_specs=P("x"), out_specs=P("x"))
        return str(jax.typeof(jax.jit(f)(x)))


@check
def shard_map_closure_as_argument(axis_type: AxisType) -> str:
    """The fix: pass that array as an argument, with its own ``in_specs``."""
    with jax.set_mesh(mesh_of(axis_type)):
        x = jax.device_put(jnp.ones((8, 8)), P("x", None))
        w = jax.device_put(jnp.arange(8.0), P())
        f = jax.shard_map(lambda a, w: a * w, in_specs=(P("x"), P()), out_specs=P("x"))
        return str(jax.typeof(jax.jit(f)(x, w)))


def _pick_first(a: jax.Array) -> jax.Array:
    """A gather: the op JAX would have ``auto_axes`` take over."""
    return a[jnp.array([0, 0]), jnp.array([1, 1])]


@check
def auto_axes_in_shard_map(axis_type: AxisType) -> str:
    """``auto_axes`` without ``axes=`` inside a ``shard_map`` over ``x`` of an (x, y) mesh."""
    with jax.set_mesh(mesh_of(axis_type, (2, 2), ("x", "y"))):
        x = jax.device_put(jnp.ones((8, 8)), P("x", None))
        pick = auto_axes(_pick_first, out_sharding=P())
        f = jax.shard_map(pick, in_specs=P("x"), out_specs=P("x"), axis_names={"x"})
        return str(jax.typeof(jax.jit(f)(x)))


@check
def auto_axes_named_axes(axis_type: AxisType) -> str:
    """The fix: name the axes ``auto_axes`` takes over, ``axes="y"``."""
    with jax.set_mesh(mesh_of(axis_type, (2, 2), ("x", "y"))):
        x = jax.device_put(jnp.ones((8, 8)), P("x", None))
        pick = auto_axes(_pick_first, axes="y", out_sharding=P())
        f = jax.shard_map(pick, in_specs=P("x"), out_specs=P("x"), axis_names={"x"})
        return str(jax.typeof(jax.jit(f)(x)))


@check
def cond_branch_shardings(axis_type: AxisType) -> str:
    """``lax.cond`` whose branches return the array and its transpose."""
    with jax.set_mesh(mesh_of(axis_type)):
        x = jax.device_put(jnp.ones((8, 8)), P("x", None))
        f = jax.jit(lambda p, a: jax.lax.cond(p, lambda a: a, lambda a: a.T, a))
        return str(jax.typeof(f(True, x)))


@check
def cond_branch_reshard(axis_type: AxisType) -> str:
    """The fix: ``reshard`` the odd branch's result to the other's layout."""
    with jax.set_mesh(mesh_of(axis_type)):
        x = jax.device_put(jnp.ones((8, 8)), P("x", None))
        transposed = lambda a: reshard(a.T, P("x", None))
        f = jax.jit(lambda p, a: jax.lax.cond(p, lambda a: a, transposed, a))
        return str(jax.typeof(f(True, x)))


@check
def switch_mixed_operands(axis_type: AxisType) -> str:
    """``vmap`` of ``lax.switch`` over split indices, a replicated operand beside them."""
    with jax.set_mesh(mesh_of(axis_type)):
        index = jax.device_put(jnp.array([0, 1, 2, 1]), P("x"))
        branches = [lambda pair: pair[0] + pair[1]] * 3

        def one(value, i):
            return jax.lax.switch(i, branches, (value, i))

        f = jax.jit(jax.vmap(one, in_axes=(None, 0)))
        return str(jax.typeof(f(jnp.ones(()), index)))


@check
def auto_axes_scan_grad(axis_type: AxisType) -> str:
    """jax-ml/jax#33029's program: ``auto_axes`` inside ``scan`` under ``grad``."""
    with jax.set_mesh(mesh_of(axis_type)):

        def f(params, x):
            model = auto_axes(lambda x: params * x, out_sharding=P())
            return jax.lax.scan(lambda c, _: (model(c), ()), x, length=3)[0]

        return str(jax.jit(jax.grad(f))(1.0, 2.0))


@check
def auto_axes_closure_scan_grad(axis_type: AxisType) -> str:
    """The same with split parameters, closed over by the ``auto_axes`` function."""
    with jax.set_mesh(mesh_of(axis_type)):
        p = jax.device_put(jnp.ones((8,)), P("x"))

        def f(params, x):
            model = auto_axes(lambda x: params * x, out_sharding=P("x"))
            return jax.lax.scan(lambda c, _: (model(c), ()), x, length=3)[0].sum()

        return str(jax.typeof(jax.jit(jax.grad(f))(p, p)))


@check
def auto_axes_positional_scan_grad(axis_type: AxisType) -> str:
    """The fix: pass the parameters to the ``auto_axes`` function as an argument."""
    with jax.set_mesh(mesh_of(axis_type)):
        p = jax.device_put(jnp.ones((8,)), P("x"))
        model = auto_axes(lambda params, x: params * x, out_sharding=P("x"))

        def f(params, x):
            return jax.lax.scan(lambda c, _: (model(params, c), ()), x, length=3)[0].sum()

        return str(jax.typeof(jax.jit(jax.grad(f))(p, p)))
