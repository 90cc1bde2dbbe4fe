"""Logits whose weight gradient comes out in kernel order, two ways: the fix that leaves checkpoints alone.

Autodiff of ``x @ kernel`` (kernel ``[embed, vocab]``) computes the weight
gradient as ``dot(g, x) -> [vocab, embed]`` and transposes it; under explicit
sharding a ``Sharding`` call between the two blocks XLA's fold. The custom VJP
leaves no transpose to fold, whatever the shard mode and pass order; the
``auto_axes`` region emits no ``Sharding`` call there, as auto mode does not.
MaxText's design doc (open pull request 5091, section 8 item 01) implemented its
``lm_head_weight_grad_in_kernel_order`` flag first as a custom VJP that writes
``[embed, vocab]`` directly (:func:`kernel_order_logits`), then, in its revision
of 2026-09-03, with ``jax.sharding.auto_axes`` (:func:`auto_axes_logits`).
``snippets.lm_head.DenseGeneral`` takes either as ``weight_grad_in_kernel_order``.
"""

from __future__ import annotations

from functools import partial

import jax
import jax.numpy as jnp
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


def auto_axes_logits(
    x: jax.Array, kernel: jax.Array, out_sharding: PartitionSpec | None = None
) -> jax.Array:
    """``x @ kernel`` for a kernel stored ``[embed, vocab]``, computed with the mesh's axes Auto.

    On an all-Explicit mesh (read from the type of ``x``) the logits leave the
    region with ``out_sharding``, by default the plain dot's; elsewhere this is
    the plain dot, as there is no barrier to remove.
    """
    if not jax.typeof(x).sharding.mesh.are_all_axes_explicit:
        return x @ kernel
    if out_sharding is None:
        out_sharding = jax.eval_shape(jnp.matmul, x, kernel).sharding
    return jax.sharding.auto_axes(jnp.matmul, out_sharding=out_sharding)(x, kernel)


if __name__ == "__main__":
    run_module()
