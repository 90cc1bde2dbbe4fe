"""Models of a user's own (not the guides'), whose XLA dumps test find-barriers: a stack of layers
run with ``nnx.scan`` under gradient accumulation, three layers through one shared
``dot_general`` helper, and plain JAX on an Auto mesh whose own constraints, through one helper,
stand between dots and transposes. Each step runs on four devices."""

from __future__ import annotations

from collections.abc import Callable
from functools import partial

import jax
import jax.numpy as jnp
from flax import nnx
from jax import lax
from jax.sharding import PartitionSpec as P

EMBED, HIDDEN, VOCAB, LAYERS, MICRO = 32, 48, 64, 3, 2


def kernel_order_dot_general(lhs, rhs, dimension_numbers, precision=None, **kw):
    """The flagship page's fix 1: the dot under ``auto_axes``, its result sharded as the plain
    dot's, so the weight gradient leaves no ``Sharding`` call between its dot and transpose."""
    dot = partial(lax.dot_general, dimension_numbers=dimension_numbers, precision=precision, **kw)
    out_sharding = jax.eval_shape(dot, lhs, rhs).sharding
    return jax.sharding.auto_axes(dot, out_sharding=out_sharding)(lhs, rhs)


def shared_dot(lhs, rhs, dimension_numbers, precision=None, **kw):
    """A helper every layer's dot goes through, as an FSDP ``dot_general`` would."""
    return lax.dot_general(lhs, rhs, dimension_numbers, precision=precision, **kw)


class Block(nnx.Module):
    def __init__(self, dot: Callable, rngs: nnx.Rngs):
        self.up = nnx.Linear(EMBED, HIDDEN, dot_general=dot, rngs=rngs)
        self.down = nnx.Linear(HIDDEN, EMBED, dot_general=dot, rngs=rngs)

    def __call__(self, x):
        return x + self.down(jax.nn.relu(self.up(x)))


class ScannedStack(nnx.Module):
    """``LAYERS`` blocks stacked on a leading axis and run with ``nnx.scan``, then a head."""

    def __init__(self, dot: Callable, rngs: nnx.Rngs):
        @nnx.split_rngs(splits=LAYERS)
        @nnx.vmap(in_axes=(0,), out_axes=0)
        def blocks(rngs):
            return Block(dot, rngs)

        self.blocks = blocks(rngs)
        self.head = nnx.Linear(EMBED, VOCAB, use_bias=False, dot_general=dot, rngs=rngs)

    def __call__(self, x):
        @nnx.scan(in_axes=(0, nnx.Carry), out_axes=nnx.Carry)
        def through(block, x):
            return block(x)

        return self.head(through(self.blocks, x))


class ThreeLayers(nnx.Module):
    """Three layers of one size, each called on a line of its own, all through ``shared_dot``."""

    def __init__(self, rngs: nnx.Rngs):
        self.a = nnx.Linear(EMBED, EMBED, dot_general=shared_dot, rngs=rngs)
        self.b = nnx.Linear(EMBED, EMBED, dot_general=shared_dot, rngs=rngs)
        self.c = nnx.Linear(EMBED, EMBED, dot_general=shared_dot, rngs=rngs)

    def __call__(self, x):
        x = self.a(x)
        x = self.b(x)
        return self.c(x)


def accumulating_step(model: nnx.Module) -> tuple[Callable, tuple]:
    """A step that averages the gradient of ``MICRO`` micro-batches in ``lax.scan``, then takes an
    SGD step; with its arguments (parameters as a pytree: the dump names them by path)."""
    graph, params, rest = nnx.split(model, nnx.Param, ...)

    def loss(params, x):
        return jnp.mean(nnx.merge(graph, params, rest)(x) ** 2)

    def train_step(params, batches):
        def micro(total, x):
            return jax.tree.map(jnp.add, total, jax.grad(loss)(params, x)), None

        grads, _ = lax.scan(micro, jax.tree.map(jnp.zeros_like, params), batches)
        return jax.tree.map(lambda p, g: p - 0.1 * g / MICRO, params, grads)

    batches = jax.device_put(jnp.ones((MICRO, 8, 4, EMBED)), P(None, "data"))
    return train_step, (params, batches)


def flat_step(model: nnx.Module) -> tuple[Callable, tuple]:
    """One SGD step under ``nnx.jit``, which dumps parameters by position, not by path."""

    def train_step(model, x):
        grads = nnx.grad(lambda model: jnp.mean(model(x) ** 2))(model)
        nnx.update(
            model, jax.tree.map(lambda p, g: p - 0.1 * g, nnx.state(model, nnx.Param), grads)
        )

    return nnx.jit(train_step), (model, jax.device_put(jnp.ones((8, EMBED)), P("data")))


def constrain(x, *spec):
    """A sharding helper every projection's output goes through."""
    return lax.with_sharding_constraint(x, P(*spec))


def constrained_step() -> tuple[Callable, tuple]:
    """Plain JAX for an Auto mesh: two projections, each output constrained, then transposed."""

    def train_step(x, w1, w2):
        y = constrain(x @ w1, "data", None).T
        return constrain(y @ w2, "data", None).T

    return train_step, (jnp.ones((8, 16)), jnp.ones((16, 8)), jnp.ones((8, 8)))
