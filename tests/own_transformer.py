"""A user's own small transformer, not the guides' model: ``nnx.Linear`` q/k/v/o and MLP layers,
causal attention written with ``jnp.einsum``, LayerNorm, an untied head, and ``optax.adamw``
inside ``nnx.jit``, on a 2x2 ``("data", "model")`` mesh of ``make_mesh``'s default axis types.

:func:`dump` compiles one training step on XLA:CPU and returns XLA's dump directory. ``fixed``
applies the flagship guide's fixes: every layer's ``dot_general`` in auto axes and a
vocab-parallel head; ``extra`` adds one more dense layer (one more site).
"""

from __future__ import annotations

from pathlib import Path

import jax
import jax.numpy as jnp
import optax
from flax import nnx
from jax.sharding import PartitionSpec as P

from snippets.kernel_order_grad import auto_axes_dot_general
from snippets.vocab_parallel import vocab_parallel_cross_entropy, vocab_parallel_logits

VOCAB, EMBED, HEADS, HEAD_DIM, BATCH, SEQ = 128, 64, 4, 16, 8, 16


class Block(nnx.Module):
    def __init__(self, dense: dict, rngs: nnx.Rngs) -> None:
        self.norm1 = nnx.LayerNorm(EMBED, rngs=rngs)
        self.q = nnx.Linear(EMBED, EMBED, rngs=rngs, **dense)
        self.k = nnx.Linear(EMBED, EMBED, rngs=rngs, **dense)
        self.v = nnx.Linear(EMBED, EMBED, rngs=rngs, **dense)
        self.o = nnx.Linear(EMBED, EMBED, rngs=rngs, **dense)
        self.norm2 = nnx.LayerNorm(EMBED, rngs=rngs)
        self.up = nnx.Linear(EMBED, 4 * EMBED, rngs=rngs, **dense)
        self.down = nnx.Linear(4 * EMBED, EMBED, rngs=rngs, **dense)

    def __call__(self, x: jax.Array) -> jax.Array:
        h = self.norm1(x)
        q = self.q(h).reshape(BATCH, SEQ, HEADS, HEAD_DIM)
        k = self.k(h).reshape(BATCH, SEQ, HEADS, HEAD_DIM)
        v = self.v(h).reshape(BATCH, SEQ, HEADS, HEAD_DIM)
        scores = jnp.einsum("bqhd,bkhd->bhqk", q, k) / HEAD_DIM**0.5
        causal = jnp.tril(jnp.ones((SEQ, SEQ), bool))
        weights = jax.nn.softmax(jnp.where(causal, scores, -1e9), axis=-1)
        attended = jnp.einsum("bhqk,bkhd->bqhd", weights, v).reshape(BATCH, SEQ, EMBED)
        x = x + self.o(attended)
        hidden = jax.nn.gelu(self.up(self.norm2(x)))
        return x + self.down(hidden)


class OwnLM(nnx.Module):
    def __init__(self, fixed: bool, extra: bool, rngs: nnx.Rngs) -> None:
        self.fixed = fixed
        dense = {"dot_general": auto_axes_dot_general} if fixed else {}
        self.table = nnx.Param(jax.random.normal(rngs.params(), (VOCAB, EMBED)))
        self.blocks = nnx.List([Block(dense, rngs) for _ in range(2)])
        self.extra = nnx.Linear(EMBED, EMBED, rngs=rngs) if extra else None
        self.norm = nnx.LayerNorm(EMBED, rngs=rngs)
        init = nnx.initializers.lecun_normal()
        init = nnx.with_partitioning(init, (None, "model")) if fixed else init
        self.head = nnx.Linear(EMBED, VOCAB, kernel_init=init, rngs=rngs, **dense)

    def __call__(self, tokens: jax.Array) -> jax.Array:
        x = self.table[...].at[tokens].get(out_sharding=P("data"))
        for block in self.blocks:
            x = block(x)
        if self.extra is not None:
            x = self.extra(x)
        x = self.norm(x)
        if self.fixed:
            return vocab_parallel_logits(x, self.head, batch=("data",), vocab="model")
        return self.head(x)


def loss_fn(model: OwnLM, tokens: jax.Array, targets: jax.Array) -> jax.Array:
    logits = model(tokens)
    if model.fixed:
        return vocab_parallel_cross_entropy(logits, targets, batch=("data",), vocab="model")
    return optax.softmax_cross_entropy_with_integer_labels(logits, targets).mean()


@nnx.jit
def train_step(model: OwnLM, optimizer: nnx.Optimizer, tokens: jax.Array, targets: jax.Array):
    loss, grads = nnx.value_and_grad(loss_fn)(model, tokens, targets)
    optimizer.update(model, grads)
    return loss


def dump(directory: Path, fixed: bool = False, extra: bool = False) -> Path:
    """Compile one step on XLA:CPU with XLA's text dump into ``directory``; return it."""
    mesh = jax.make_mesh((2, 2), ("data", "model"))
    with jax.set_mesh(mesh):
        model = OwnLM(fixed, extra, nnx.Rngs(0))
        optimizer = nnx.Optimizer(model, optax.adamw(1e-3), wrt=nnx.Param)
        tokens = jax.device_put(jnp.zeros((BATCH, SEQ), jnp.int32), P("data"))
        options = {"xla_dump_to": str(directory), "xla_dump_hlo_as_text": True}
        train_step.lower(model, optimizer, tokens, tokens).compile(compiler_options=options)
    return directory
