"""A small Flax NNX model written for auto, switched to explicit: each fix its errors ask for, and
a check per step of the switch."""

from __future__ import annotations

from collections.abc import Sequence

import jax
import jax.numpy as jnp
import optax
from flax import nnx
from jax.sharding import AxisType
from jax.sharding import PartitionSpec as P

from snippets.cache.results import shared
from snippets.measure.mode_checks.registry import check, mesh_of

FIXES = ("embed", "down", "loss")
"""The changes that let the model run on an Explicit mesh, in order."""


class FlaxLM(nnx.Module):
    """Embedding, MLP block, untied head; over ("data", "model")."""

    def __init__(self, rngs: nnx.Rngs, fixes: Sequence[str] = ()):
        vocab, emb = 64, 16
        split = nnx.with_partitioning
        kernel = nnx.initializers.lecun_normal()
        table = split(nnx.initializers.normal(), ("model", None))
        self.fixes = tuple(fixes)
        self.embed = nnx.Embed(vocab, emb, embedding_init=table, rngs=rngs)
        col = split(kernel, (None, "model"))  # columns over "model"
        row = split(kernel, ("model", None))  # rows over "model"
        self.up = nnx.Linear(emb, 2 * emb, kernel_init=col, rngs=rngs)
        self.down = nnx.Linear(2 * emb, emb, kernel_init=row, rngs=rngs)
        self.head = nnx.Linear(emb, vocab, kernel_init=col, rngs=rngs)

    def __call__(self, tokens: jax.Array) -> jax.Array:
        """Logits; with ``fixes``, the layouts explicit mode needs."""
        rows = P("data", None, None)  # activations: batch over "data"
        fixed = {fix: rows if fix in self.fixes else None for fix in FIXES}
        h = self.embed(tokens, out_sharding=fixed["embed"])
        hidden = jax.nn.relu(self.up(h))
        h = h + self.down(hidden, out_sharding=fixed["down"])
        return self.head(h)


def tiny_lm_loss(model: FlaxLM, tokens: jax.Array, labels: jax.Array) -> jax.Array:
    """Mean cross entropy; the ``loss`` fix uses one-hot targets."""
    logits = model(tokens)
    if "loss" not in model.fixes:
        loss = optax.softmax_cross_entropy_with_integer_labels
        return loss(logits, labels).mean()
    spec = jax.typeof(logits).sharding.spec  # the logits' sharding
    targets = jax.nn.one_hot(labels, logits.shape[-1], out_sharding=spec)
    return optax.softmax_cross_entropy(logits, targets).mean()


@shared
def train_step_loss(axis_type: AxisType, fixes: Sequence[str] = ()) -> float:
    """One AdamW step of :class:`FlaxLM`; the loss before it."""
    with jax.set_mesh(mesh_of(axis_type, (2, 2), ("data", "model"))):
        model = FlaxLM(nnx.Rngs(0), fixes)
        adamw = nnx.Optimizer(model, optax.adamw(1e-3), wrt=nnx.Param)
        tokens = jax.device_put(jnp.arange(32).reshape(8, 4) % 64, P("data"))

        @jax.jit
        def step(model, adamw, tokens, labels):
            loss, grads = jax.value_and_grad(tiny_lm_loss)(model, tokens, labels)
            adamw.update(model, grads)
            return loss

        return float(step(model, adamw, tokens, (tokens + 1) % 64))


@check
def model_as_written(axis_type: AxisType) -> None:
    """:class:`FlaxLM`'s training step, as written for auto."""
    train_step_loss(axis_type)


@check
def model_plus_embed_fix(axis_type: AxisType) -> None:
    """The step with the embedding's layout given."""
    train_step_loss(axis_type, FIXES[:1])


@check
def model_plus_down_fix(axis_type: AxisType) -> None:
    """The step with the second projection's layout given too."""
    train_step_loss(axis_type, FIXES[:2])


@check
def model_plus_loss_fix(axis_type: AxisType) -> None:
    """The step with one-hot targets too: every fix."""
    train_step_loss(axis_type, FIXES)
