"""One training step of a small Flax model, the step a CI job dumps for ``find-barriers``.

An embedding, ``layers`` GELU ``nnx.Linear`` layers and an untied head, trained with
``optax.adamw`` inside ``jax.jit`` on a 2x2 ``("data", "model")`` mesh of ``jax.make_mesh``'s
default (Explicit) axes. ``.github/workflows/barrier-gate.yml`` runs it with XLA's dump flags.
"""

from __future__ import annotations

import jax
import optax
from flax import nnx
from jax.sharding import PartitionSpec as P

VOCAB, EMBED, BATCH, SEQ = 256, 64, 8, 16


class SmallLM(nnx.Module):
    def __init__(self, layers: int, rngs: nnx.Rngs) -> None:
        self.table = nnx.Embed(VOCAB, EMBED, rngs=rngs)
        self.layers = nnx.List([nnx.Linear(EMBED, EMBED, rngs=rngs) for _ in range(layers)])
        self.head = nnx.Linear(EMBED, VOCAB, rngs=rngs)

    def __call__(self, tokens: jax.Array) -> jax.Array:
        x = self.table.embedding[...].at[tokens].get(out_sharding=P("data"))
        for layer in self.layers:
            x = x + jax.nn.gelu(layer(x))
        return self.head(x)


@jax.jit
def train_step(model: SmallLM, optimizer: nnx.Optimizer, tokens: jax.Array) -> tuple:
    def loss_fn(model: SmallLM) -> jax.Array:
        logits = model(tokens[:, :-1])
        return optax.softmax_cross_entropy_with_integer_labels(logits, tokens[:, 1:]).mean()

    loss, grads = jax.value_and_grad(loss_fn)(model)
    optimizer.update(model, grads)
    return loss, model, optimizer
