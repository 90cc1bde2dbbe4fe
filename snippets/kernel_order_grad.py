"""Logits whose weight gradient comes out in kernel order: the fix that leaves checkpoints alone.

Autodiff of ``x @ kernel`` (kernel ``[embed, vocab]``) computes the weight
gradient as ``dot(g, x) -> [vocab, embed]`` and transposes it. This custom VJP
contracts the token dims of ``dot_general(x, g)`` instead, which writes
``[embed, vocab]`` directly: no transpose to fold, whatever the shard mode and
whatever order the compiler runs its passes in. MaxText's design doc (open pull
request 5091) first implemented its ``lm_head_weight_grad_in_kernel_order`` flag
this way, then, in its revision of 2026-09-03, with ``jax.sharding.auto_axes``
(``snippets.auto_axes_head``).
"""

from __future__ import annotations

from functools import partial

import jax
from jax import lax
from jax.sharding import PartitionSpec

from snippets.cli import run_module


def _explicit_spec(array: jax.Array) -> PartitionSpec | None:
    """The array's sharding from its type under an explicit mesh; ``None`` elsewhere."""
    sharding = jax.typeof(array).sharding
    return sharding.spec if sharding.mesh.are_all_axes_explicit else None


@partial(jax.custom_vjp, nondiff_argnums=(2,))
def kernel_order_logits(
    x: jax.Array, kernel: jax.Array, out_sharding: PartitionSpec | None
) -> jax.Array:
    """``x @ kernel`` over the last axis of ``x``, for a kernel stored ``[embed, vocab]``.

    A ``jax.custom_vjp``: its backward rule (``_backward``, registered with ``defvjp``)
    writes the kernel's gradient in that same order, with ``out_sharding`` kept.
    """
    return lax.dot_general(x, kernel, (((x.ndim - 1,), (0,)), ((), ())), out_sharding=out_sharding)


def _forward(x, kernel, out_sharding):
    return kernel_order_logits(x, kernel, out_sharding), (x, kernel)


def _backward(out_sharding, residuals, g):
    x, kernel = residuals
    tokens = tuple(range(x.ndim - 1))
    dx = lax.dot_general(
        g, kernel, (((g.ndim - 1,), (1,)), ((), ())), out_sharding=_explicit_spec(x)
    )
    # Contract the token dims with x first: the result is [embed, vocab], the kernel's own order.
    dkernel = lax.dot_general(
        x, g, ((tokens, tokens), ((), ())), out_sharding=_explicit_spec(kernel)
    )
    return dx, dkernel


kernel_order_logits.defvjp(_forward, _backward)


if __name__ == "__main__":
    run_module()
