"""The vocab-parallel LM head: its kernel sharded on vocab, the hidden state gathered instead.

MaxText's design doc (pull request 5091, section 4.10 and section 8 item 03) rotates the untied
head's ``[embed, vocab]`` kernel: ``embed`` replicated, the FSDP axis on ``vocab``. The head then
gathers the hidden state, not its kernel, its weight gradient stays local, and the loss reads
vocab-sharded logits. These two functions are that head and its loss, in either shard mode.
"""

from __future__ import annotations

from collections.abc import Callable

import jax
import jax.numpy as jnp
from jax.sharding import PartitionSpec as P


def pin(x: jax.Array, spec: P) -> jax.Array:
    """``x`` with sharding ``spec``: a ``reshard`` on an explicit mesh, a constraint on an auto one."""
    if jax.sharding.get_abstract_mesh().are_all_axes_explicit:
        return jax.sharding.reshard(x, spec)
    return jax.lax.with_sharding_constraint(x, spec)


def _spec(ndim: int, batch: tuple[str, ...], last: str | None = None) -> P:
    """``P(batch, None, ..., last)`` for an array of ``ndim`` dimensions."""
    return P(batch or None, *[None] * (ndim - 2), last)


def vocab_parallel_logits(
    hidden: jax.Array, head: Callable, batch: tuple[str, ...] = (), vocab: str = "fsdp"
) -> jax.Array:
    """``head(hidden)`` sharded on ``vocab``, the hidden state gathered over that axis first.
    ``head`` is a layer called as ``head(x, out_sharding=...)`` (``nnx.Linear``, ``DenseGeneral``)
    whose ``[embed, vocab]`` kernel is sharded ``P(None, vocab)``; ``batch`` names the mesh axes
    the batch stays sharded on (the data axes, never ``vocab``)."""
    whole = pin(hidden, _spec(hidden.ndim, batch))  # every vocab shard needs every token
    out = _spec(hidden.ndim, batch, vocab)
    if jax.sharding.get_abstract_mesh().are_all_axes_explicit:
        return head(whole, out_sharding=out)
    return pin(head(whole), out)


def vocab_parallel_cross_entropy(
    logits: jax.Array, targets: jax.Array, batch: tuple[str, ...] = (), vocab: str = "fsdp"
) -> jax.Array:
    """Mean cross-entropy of vocab-sharded ``logits``, each shard building its own one-hot columns
    from a vocab-sharded iota (as MaxText's ``vocab_parallel_one_hot``): only the integer targets
    are gathered, and the two reductions over vocab (the max and the sum of exponentials) are
    the loss's only other collectives."""
    logits = logits.astype(jnp.float32)
    shifted = logits - jax.lax.stop_gradient(logits.max(axis=-1, keepdims=True))
    log_total = jnp.log(jnp.exp(shifted).sum(axis=-1))
    columns = _spec(logits.ndim, (), vocab)
    explicit = jax.sharding.get_abstract_mesh().are_all_axes_explicit
    shape = (1,) * (logits.ndim - 1) + logits.shape[-1:]
    iota = jax.lax.broadcasted_iota(
        jnp.int32, shape, logits.ndim - 1, out_sharding=columns if explicit else None
    )
    one_hot = pin(targets, _spec(targets.ndim, batch))[..., None] == iota
    if not explicit:  # auto mode: ask for the sharding the logits have
        one_hot = pin(one_hot, _spec(logits.ndim, batch, vocab))
    picked = jnp.sum(jnp.where(one_hot, shifted, 0.0), axis=-1)
    return jnp.mean(log_total - picked)
