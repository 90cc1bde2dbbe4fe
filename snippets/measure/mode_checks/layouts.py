"""Layouts in an array's type: the mesh constructors' defaults, constraints, unconstrained
dimensions and partial sums."""

from __future__ import annotations

import functools

import jax
import jax.numpy as jnp
import numpy as np
from jax.lax import with_sharding_constraint
from jax.sharding import AxisType, Mesh, NamedSharding
from jax.sharding import PartitionSpec as P

from snippets.devices import MESH_DEVICES
from snippets.measure.mode_checks.registry import check, mesh_of


@check
def make_mesh_default(axis_type: AxisType) -> str:
    """What ``jax.make_mesh`` gives without ``axis_types``."""
    default = jax.make_mesh((4,), ("x",)).axis_types
    return "the default" if default == (axis_type,) else f"needs axis_types=({axis_type},)"


@check
def mesh_default(axis_type: AxisType) -> str:
    """What ``jax.sharding.Mesh(devices, names)`` gives without ``axis_types`` (MaxText's call)."""
    default = Mesh(np.array(jax.devices()[:MESH_DEVICES]), ("x",)).axis_types
    return "the default" if default == (axis_type,) else f"needs axis_types=({axis_type},)"


@check
def typed_sharding(axis_type: AxisType) -> str:
    """The type of an array placed with ``P("x")``."""
    with jax.set_mesh(mesh_of(axis_type)):
        x = jax.device_put(jnp.ones((8, 8)), P("x"))
        return str(jax.typeof(x))


@check
def constraint_mismatch(axis_type: AxisType) -> str:
    """A constraint to a layout the array does not have."""
    with jax.set_mesh(mesh_of(axis_type)):
        x = jax.device_put(jnp.ones((8, 8)), P("x", None))
        f = jax.jit(lambda a: with_sharding_constraint(a, P(None, "x")))
        return f"laid out as {f(x).sharding.spec}"


@check
def constraint_match(axis_type: AxisType) -> str:
    """A constraint to the layout the array has: what it emits."""
    with jax.set_mesh(mesh_of(axis_type)):
        x = jax.device_put(jnp.ones((8, 8)), P("x", None))
        hinted = jax.jit(lambda a: with_sharding_constraint(a * 2, P("x", None)))
        plain = jax.jit(lambda a: a * 2)
        texts = [f.lower(x).as_text() for f in (hinted, plain)]
        if texts[0] == texts[1]:
            return "StableHLO unchanged"
        added = [text.count("sharding_constraint") for text in texts]
        return f"adds {added[0] - added[1]} sharding_constraint"


@check
def constraint_without_set_mesh(axis_type: AxisType) -> str:
    """The mismatched constraint as a ``NamedSharding``, no ``set_mesh``."""
    mesh = mesh_of(axis_type)
    x = jax.device_put(jnp.ones((8, 8)), NamedSharding(mesh, P("x")))
    hint = NamedSharding(mesh, P(None, "x"))
    f = jax.jit(lambda a: with_sharding_constraint(a, hint))
    return f"laid out as {f(x).sharding.spec}"


@check
def unconstrained(axis_type: AxisType) -> str:
    """Leave a dimension to the partitioner: ``P.UNCONSTRAINED``."""
    with jax.set_mesh(mesh_of(axis_type)):
        x = jax.device_put(jnp.ones((8, 8)), P("x", None))
        f = jax.jit(lambda a: with_sharding_constraint(a, P(P.UNCONSTRAINED, None)))
        return f"laid out as {f(x).sharding.spec}"


@check
def unreduced(axis_type: AxisType) -> str:
    """A product's partial sums, left unreduced over ``x``."""
    with jax.set_mesh(mesh_of(axis_type)):
        a = jax.device_put(jnp.ones((2, 8)), P(None, "x"))
        b = jax.device_put(jnp.ones((8, 8)), P("x", None))
        f = jax.jit(functools.partial(jnp.dot, out_sharding=P(None, None, unreduced={"x"})))
        return str(jax.typeof(f(a, b)))


@check
def reduced(axis_type: AxisType) -> str:
    """A replicated array whose gradient comes back unreduced."""
    with jax.set_mesh(mesh_of(axis_type)):
        spec = P(None, None, reduced={"x"})
        return str(jax.typeof(jax.device_put(jnp.ones((1, 8)), spec)))
