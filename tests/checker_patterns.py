"""Training steps written as teams write them, whose XLA dumps test find-barriers' roles and names:
a Flax linen decoder with ``nn.remat`` blocks in ``nn.scan`` and a tied embedding; an nnx model
whose head reuses its embedding table, with an ``nnx.remat`` MLP; plain JAX with a shared FSDP
``dense`` helper, ``jax.checkpoint`` (with a policy) in ``lax.scan``, a ``shard_map`` expert
layer and micro-batches accumulated in ``lax.scan``, returning its gradients; and FSDP written by
hand in ``shard_map``, with ``optax.MultiSteps`` skipping steps that are not finite. Each runs on an
all-Explicit mesh of four devices; ``fixed=True`` runs every dot under ``auto_axes`` (the
flagship page's fix 1), so no ``Sharding`` call stands between a dot and a transpose."""

from __future__ import annotations

from collections.abc import Callable
from functools import partial

import flax.linen as nn
import jax
import jax.numpy as jnp
import optax
from flax import nnx
from jax import lax
from jax.sharding import AxisType
from jax.sharding import PartitionSpec as P

WIDTH, FFN, VOCAB, DEPTH, TOKENS = 24, 56, 72, 2, 6


def in_kernel_order(dot: Callable) -> Callable:
    """``dot`` run under ``auto_axes`` with its own result's sharding: its weight gradient is
    produced in the kernel's order, with no ``Sharding`` call before the transpose."""

    def run(*args, **kwargs):
        arrays = [i for i, arg in enumerate(args) if isinstance(arg, jax.Array)]

        def call(*values):
            full = list(args)
            for index, value in zip(arrays, values, strict=True):
                full[index] = value
            return dot(*full, **kwargs)

        values = [args[i] for i in arrays]
        out_sharding = jax.eval_shape(call, *values).sharding
        return jax.sharding.auto_axes(call, out_sharding=out_sharding)(*values)

    return run


def explicit_mesh(*axes: str):
    """A mesh of four devices, its axes all Explicit."""
    shape = (4,) if len(axes) == 1 else (2, 2)
    return jax.make_mesh(shape, axes, axis_types=(AxisType.Explicit,) * len(axes))


# A Flax linen decoder: remat'd blocks in a scan, the embedding table tied to the head.


def gathered_dot(lhs, rhs, dimension_numbers, precision=None, **kw):
    """FSDP: gather the sharded kernel, then the dot."""
    rhs = jax.sharding.reshard(rhs, P())
    return lax.dot_general(lhs, rhs, dimension_numbers, precision=precision, **kw)


def dots(fixed: bool) -> tuple[Callable, Callable]:
    """The layers' ``dot_general`` and the attention's ``einsum``, in kernel order if ``fixed``."""
    if fixed:
        return in_kernel_order(gathered_dot), in_kernel_order(jnp.einsum)
    return gathered_dot, jnp.einsum


class Attention(nn.Module):
    fixed: bool

    @nn.compact
    def __call__(self, x):
        dot, einsum = dots(self.fixed)
        dense = partial(nn.Dense, WIDTH, use_bias=False, dot_general=dot)
        q, k, v = dense(name="query")(x), dense(name="key")(x), dense(name="value")(x)
        weights = jax.nn.softmax(einsum("bqd,bkd->bqk", q, k) / WIDTH**0.5)
        return dense(name="out")(einsum("bqk,bkd->bqd", weights, v))


class Block(nn.Module):
    fixed: bool

    @nn.compact
    def __call__(self, x, _):
        dense = partial(nn.Dense, use_bias=False, dot_general=dots(self.fixed)[0])
        x = x + Attention(self.fixed)(nn.RMSNorm()(x))
        hidden = dense(FFN, name="wi")(nn.RMSNorm()(x))
        return x + dense(WIDTH, name="wo")(nn.gelu(hidden)), None


class TiedEmbedding(nn.Module):
    """A table that embeds tokens and, transposed, makes the logits."""

    fixed: bool

    def setup(self):
        self.table = self.param("table", nn.initializers.normal(1.0), (VOCAB, WIDTH))

    def __call__(self, tokens):
        return self.table.at[tokens].get(out_sharding=jax.typeof(tokens).sharding.spec)

    def attend(self, x):
        if self.fixed:  # the head as one dot against the table, in its own order
            return dots(True)[0](x, self.table, (((2,), (1,)), ((), ())))
        return jnp.dot(x, self.table.T)  # as nn.Embed.attend writes it


class LinenDecoder(nn.Module):
    fixed: bool

    @nn.compact
    def __call__(self, tokens):
        embedding = TiedEmbedding(self.fixed, name="embed")
        stack = nn.scan(
            nn.remat(Block),
            variable_axes={"params": 0},
            split_rngs={"params": True},
            length=DEPTH,
        )
        x, _ = stack(self.fixed, name="layers")(embedding(tokens), None)
        return embedding.attend(nn.RMSNorm()(x))


def linen_step(fixed: bool = False):
    """The linen decoder's step (adamw after clipping, params and state donated), its mesh and
    arguments; parameters are FSDP-sharded on their last dimension."""
    mesh = explicit_mesh("fsdp")
    model = LinenDecoder(fixed)
    optimizer = optax.chain(optax.clip_by_global_norm(1.0), optax.adamw(3e-4))
    with jax.set_mesh(mesh):
        tokens = jax.device_put(jnp.zeros((8, TOKENS), jnp.int32), P("fsdp"))
        params = model.init(jax.random.key(0), tokens)["params"]
        params = jax.tree.map_with_path(lambda k, p: jax.device_put(p, fsdp_spec(k, p)), params)
        state = optimizer.init(params)

    def loss_fn(params, tokens):
        logits = model.apply({"params": params}, tokens)
        labels = jnp.roll(tokens, -1, axis=1)
        return optax.softmax_cross_entropy_with_integer_labels(logits, labels).mean()

    @partial(jax.jit, donate_argnums=(0, 1))
    def train_step(params, state, tokens):
        loss, grads = jax.value_and_grad(loss_fn)(params, tokens)
        updates, state = optimizer.update(grads, state, params)
        return optax.apply_updates(params, updates), state, loss

    return mesh, train_step, (params, state, tokens)


def fsdp_spec(path: tuple, param: jax.Array) -> P:
    """Shard a kernel (or a stack of them) on its last dimension; replicate the rest."""
    if path[-1].key != "kernel":
        return P()
    return P(*(None,) * (param.ndim - 1), "fsdp")


# An nnx model whose head is its embedding table, with an nnx.remat MLP.


class Mlp(nnx.Module):
    def __init__(self, rngs: nnx.Rngs, dot: Callable):
        self.up = nnx.Linear(WIDTH, FFN, dot_general=dot, rngs=rngs)
        self.down = nnx.Linear(FFN, WIDTH, dot_general=dot, rngs=rngs)

    def __call__(self, x):
        return self.down(jax.nn.relu(self.up(x)))


class NnxModel(nnx.Module):
    def __init__(self, rngs: nnx.Rngs, fixed: bool = False):
        self.fixed = fixed
        self.embed = nnx.Embed(VOCAB, WIDTH, rngs=rngs)
        self.mlp = Mlp(rngs, in_kernel_order(lax.dot_general) if fixed else lax.dot_general)

    def __call__(self, tokens):
        x = self.embed(tokens, out_sharding=jax.typeof(tokens).sharding.spec)
        x = x + nnx.remat(lambda mlp, x: mlp(x))(self.mlp, x)
        if self.fixed:  # the head as one dot against the table, in its own order
            table = self.embed.embedding[...]
            return in_kernel_order(lax.dot_general)(x, table, (((2,), (1,)), ((), ())))
        return self.embed.attend(x)


def nnx_step(fixed: bool = False, graph: bool = True):
    """The nnx model's step under ``nnx.jit`` (``graph=False``: Flax's tree mode), with
    ``nnx.Optimizer`` (adam), on a data x model mesh."""
    mesh = explicit_mesh("data", "model")
    with jax.set_mesh(mesh):
        model = NnxModel(nnx.Rngs(3), fixed)
        optimizer = nnx.Optimizer(model, optax.adam(1e-3), wrt=nnx.Param)
        tokens = jax.device_put(jnp.zeros((4, TOKENS), jnp.int32), P("data"))

    @nnx.jit(graph=graph)
    def train_step(model, optimizer, tokens):
        def loss_fn(model):
            logits = model(tokens)
            labels = jnp.roll(tokens, -1, axis=1)
            return optax.softmax_cross_entropy_with_integer_labels(logits, labels).mean()

        loss, grads = nnx.value_and_grad(loss_fn)(model)
        optimizer.update(model, grads)
        return loss

    return mesh, train_step, (model, optimizer, tokens)


# Plain JAX: one FSDP dense helper, checkpointed layers in a scan, shard_map experts.

EXPERTS, MICRO = 4, 3


def dense(x, kernel, fixed: bool = False):
    """Every projection's dot: the FSDP kernel gathered, the tokens kept batch-sharded."""
    dot = partial(jnp.einsum, "btd,df->btf")
    gathered = jax.sharding.reshard(kernel, P())
    return (in_kernel_order(dot) if fixed else dot)(x, gathered)


def layer(x, weights, fixed: bool = False):
    hidden = jax.nn.silu(dense(x, weights["wi"], fixed))
    return x + dense(hidden, weights["wo"], fixed), None


def experts(x, weights, router):
    """Each device runs its own expert on its own tokens, weighted by the router."""

    @partial(jax.shard_map, in_specs=(P("fsdp"), P("fsdp"), P()), out_specs=P("fsdp"))
    def local(x, weights, router):
        gate = jax.nn.sigmoid(jnp.einsum("btd,d->bt", x, router))[..., None]
        return gate * jnp.einsum("btd,edh->bth", x, weights)

    return local(x, weights, router)


def forward(params, tokens, fixed: bool = False):
    x = params["embed"].at[tokens].get(out_sharding=P("fsdp"))
    body = jax.checkpoint(
        partial(layer, fixed=fixed), policy=jax.checkpoint_policies.dots_with_no_batch_dims_saveable
    )
    x, _ = lax.scan(body, x, params["layers"])
    x = x + experts(x, params["experts"], params["router"])
    return dense(x, params["head"], fixed)


def jax_step(fixed: bool = False):
    """The plain-JAX step: gradients of ``MICRO`` micro-batches summed in ``lax.scan``, an adam
    update; it returns the new parameters and state, the loss and the gradients."""
    mesh = explicit_mesh("fsdp")
    keys = iter(jax.random.split(jax.random.key(7), 8))
    shapes = {
        "embed": ((VOCAB, WIDTH), P()),
        "layers": {
            "wi": ((DEPTH, WIDTH, FFN), P(None, None, "fsdp")),
            "wo": ((DEPTH, FFN, WIDTH), P(None, None, "fsdp")),
        },
        "experts": ((EXPERTS, WIDTH, WIDTH), P("fsdp")),
        "router": ((WIDTH,), P()),
        "head": ((WIDTH, VOCAB), P(None, "fsdp")),
    }
    optimizer = optax.adam(1e-3)
    with jax.set_mesh(mesh):
        params = jax.tree.map(
            lambda leaf: jax.device_put(0.1 * jax.random.normal(next(keys), leaf[0]), leaf[1]),
            shapes,
            is_leaf=lambda leaf: isinstance(leaf, tuple) and isinstance(leaf[1], P),
        )
        state = optimizer.init(params)
        batches = jax.device_put(jnp.zeros((MICRO, 8, TOKENS), jnp.int32), P(None, "fsdp"))

    def loss_fn(params, tokens):
        logits = forward(params, tokens, fixed)
        labels = jnp.roll(tokens, -1, axis=1)
        return optax.softmax_cross_entropy_with_integer_labels(logits, labels).mean()

    @jax.jit
    def train_step(params, state, batches):
        def accumulate(total, tokens):
            loss, grads = jax.value_and_grad(loss_fn)(params, tokens)
            return jax.tree.map(jnp.add, total, (loss, grads)), None

        zeros = jax.tree.map(jnp.zeros_like, (jnp.zeros(()), params))
        (loss, grads), _ = lax.scan(accumulate, zeros, batches)
        updates, state = optimizer.update(grads, state, params)
        return optax.apply_updates(params, updates), state, loss / MICRO, grads

    return mesh, train_step, (params, state, batches)


# FSDP by hand: each layer gathers its kernel inside shard_map; MultiSteps may skip a step.


def manual_fsdp_layer(x, kernel):
    @partial(jax.shard_map, in_specs=(P("fsdp"), P(None, "fsdp")), out_specs=P("fsdp"))
    def local(x, kernel):
        return jnp.tanh(x @ lax.all_gather(kernel, "fsdp", axis=1, tiled=True))

    return local(x, kernel)


def shard_map_step():
    """Two hand-written FSDP layers, a list of kernels; adam accumulated over 2 steps."""
    mesh = explicit_mesh("fsdp")
    optimizer = optax.MultiSteps(
        optax.adam(1e-3), every_k_schedule=2, should_skip_update_fn=optax.skip_not_finite
    )
    with jax.set_mesh(mesh):
        kernels = [jax.device_put(jnp.eye(WIDTH), P(None, "fsdp")) for _ in range(2)]
        state = optimizer.init(kernels)
        x = jax.device_put(jnp.ones((8, WIDTH)), P("fsdp"))

    def loss_fn(kernels, x):
        for kernel in kernels:
            x = manual_fsdp_layer(x, kernel)
        return jnp.mean(x**2)

    @jax.jit
    def train_step(kernels, state, x):
        grads = jax.grad(loss_fn)(kernels, x)
        updates, state = optimizer.update(grads, state, kernels)
        return optax.apply_updates(kernels, updates), state

    return mesh, train_step, (kernels, state, x)
