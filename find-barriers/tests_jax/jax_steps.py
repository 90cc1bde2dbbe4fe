"""Small steps in plain JAX, lowered, each showing what a reader of a lowered module must get right:
a mesh in each shard mode, loops, a function called several times, a scanned stack (on an explicit
mesh too), donation, an attention query's kernel of three dimensions."""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Callable

import jax
import jax.numpy as jnp
from jax.sharding import AxisType
from jax.sharding import PartitionSpec as P

DEVICES = 8
"""The CPU devices the tests' conftest asks JAX for."""


@functools.partial(jax.tree_util.register_dataclass, data_fields=["value"], meta_fields=[])
@dataclasses.dataclass
class Param:
    """A parameter as a variable holds it: its path ends in ``.value``, as Flax's do."""

    value: jax.Array


def helper(x: jax.Array, w: jax.Array) -> jax.Array:
    return x @ w


def plain() -> jax.stages.Lowered:
    """One weight gradient, through a helper, on one device."""
    return jax.jit(jax.grad(lambda w, x: helper(x, w).sum())).lower(
        jnp.ones((3, 4)), jnp.ones((2, 3))
    )


def mlp_loss(params: dict, x: jax.Array) -> jax.Array:
    hidden = jnp.tanh(x @ params["layer"]["kernel"].value)
    return jnp.sum(hidden @ params["head"]["kernel"].value)


def mesh_step(mode: str) -> jax.stages.Lowered:
    """A two-layer model's loss and gradients, its batch sharded over a mesh of
    :data:`DEVICES` in shard mode ``mode`` (``explicit`` or ``auto``)."""
    axis_type = AxisType.Explicit if mode == "explicit" else AxisType.Auto
    mesh = jax.make_mesh((DEVICES,), ("data",), axis_types=(axis_type,))
    with jax.set_mesh(mesh):
        params = {
            "layer": {"kernel": Param(jnp.ones((16, 32)))},
            "head": {"kernel": Param(jnp.ones((32, 64)))},
        }
        x = jax.device_put(jnp.ones((DEVICES, 16)), P("data"))
        return jax.jit(jax.value_and_grad(mlp_loss)).lower(params, x)


def sgd(params: dict, x: jax.Array) -> dict:
    """One step of gradient descent: each updated parameter reuses its donated buffer."""
    grads = jax.grad(mlp_loss)(params, x)
    return jax.tree.map(lambda p, g: p - 0.1 * g, params, grads)


def donated() -> jax.stages.Lowered:
    """:func:`sgd` on an explicit mesh, its parameters donated."""
    mesh = jax.make_mesh((DEVICES,), ("data",), axis_types=(AxisType.Explicit,))
    with jax.set_mesh(mesh):
        params = {
            "layer": {"kernel": Param(jnp.ones((16, 32)))},
            "head": {"kernel": Param(jnp.ones((32, 64)))},
        }
        x = jax.device_put(jnp.ones((DEVICES, 16)), P("data"))
        return jax.jit(sgd, donate_argnums=0).lower(params, x)


def loops(x: jax.Array, n: jax.Array) -> jax.Array:
    """A transpose of a dot in two loops: one of 3 trips, one of ``n`` known only at run time."""

    def body(_: jax.Array, x: jax.Array) -> jax.Array:
        return jnp.transpose(x @ x) + 1.0

    return jax.lax.fori_loop(0, n, body, jax.lax.fori_loop(0, 3, body, x))


def called(x: jax.Array) -> jax.Array:
    """A jitted function, lowered once, called in a loop of 3 trips and twice after it."""
    inner = jax.jit(lambda x: jnp.transpose(x @ x))
    y = jax.lax.fori_loop(0, 3, lambda _, x: inner(x) + 1.0, x)
    return inner(y) + inner(2.0 * y)


def stack_loss(kernels: jax.Array, x: jax.Array) -> jax.Array:
    """Layers of one stacked kernel, applied by ``lax.scan``."""
    return jax.lax.scan(lambda h, kernel: (jnp.tanh(h @ kernel), None), x, kernels)[0].sum()


LAYERS = 4
"""The scanned stack's layers: its loop's trips."""


def stacked_loss(params: dict, x: jax.Array) -> jax.Array:
    """:func:`stack_loss` of the stacked kernel a parameter holds."""
    return stack_loss(params["blocks"]["kernel"].value, x)


def explicit_scanned() -> jax.stages.Lowered:
    """:func:`stacked_loss` and its gradient, the batch sharded over an explicit mesh of
    :data:`DEVICES`: the kernel's gradient, blocked, is stacked in the scan's loop, so the
    estimate prices it at nothing (FB005, its only blocked site)."""
    mesh = jax.make_mesh((DEVICES,), ("data",), axis_types=(AxisType.Explicit,))
    with jax.set_mesh(mesh):
        params = {"blocks": {"kernel": Param(jnp.ones((LAYERS, 16, 16)))}}
        x = jax.device_put(jnp.ones((DEVICES, 16)), P("data"))
        return jax.jit(jax.value_and_grad(stacked_loss)).lower(params, x)


def query_loss(params: dict, x: jax.Array) -> jax.Array:
    """An attention query's projection, its ``[emb, heads, head_dim]`` kernel gathered from
    FSDP's shards before use, as an explicit mesh writes it."""
    kernel = jax.sharding.reshard(params["query"]["kernel"].value, P())
    return jnp.tanh(jnp.einsum("bse,ehd->bshd", x, kernel)).sum()


def explicit_query() -> jax.stages.Lowered:
    """:func:`query_loss` and its gradient on an explicit mesh of :data:`DEVICES`, the kernel
    sharded on ``emb`` (FSDP), the batch on the same axis, not scanned: the kernel's gradient
    dot, ``dq[b,s,h,d]`` by ``x[b,s,e]``, writes ``[h, d, e]``, transposed to the kernel's
    order, which XLA keeps for its wide lhs, with a ``Sharding`` call between: pinned."""
    mesh = jax.make_mesh((DEVICES,), ("fsdp",), axis_types=(AxisType.Explicit,))
    with jax.set_mesh(mesh):
        kernel = jax.device_put(jnp.ones((64, 2, 16)), P("fsdp"))
        params = {"query": {"kernel": Param(kernel)}}
        x = jax.device_put(jnp.ones((DEVICES, 4, 64)), P("fsdp"))
        return jax.jit(jax.value_and_grad(query_loss)).lower(params, x)


STEPS: dict[str, Callable[[], jax.stages.Lowered]] = {
    "plain": plain,
    "explicit": lambda: mesh_step("explicit"),
    "auto": lambda: mesh_step("auto"),
    "donated": donated,
    "loops": lambda: jax.jit(loops).lower(jnp.ones((4, 4)), 5),
    "called": lambda: jax.jit(called).lower(jnp.ones((4, 4))),
    "scanned": lambda: jax.jit(jax.grad(stack_loss)).lower(
        jnp.ones((LAYERS, 8, 8)), jnp.ones((2, 8))
    ),
    "explicit_scanned": explicit_scanned,
    "explicit_query": explicit_query,
}
"""Each step by name, lowered when called."""


@functools.cache
def lowered(name: str) -> jax.stages.Lowered:
    """Step ``name`` of :data:`STEPS`, lowered once for every test that reads it."""
    return STEPS[name]()
