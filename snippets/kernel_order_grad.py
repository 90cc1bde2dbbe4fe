"""Logits whose weight gradient comes out in kernel order, ``[embed, vocab]``, two ways.

Autodiff of ``x @ kernel`` writes the weight gradient ``[vocab, embed]`` and transposes it; under
explicit sharding a ``Sharding`` call between the two blocks XLA's fold. MaxText's design doc (pull
request 5091, section 8 item 01) fixes it with a custom VJP (:func:`kernel_order_dot_general`),
then, from 2026-09-03, with ``auto_axes`` around the forward dot (:func:`auto_axes_dot_general`).
Both have ``lax.dot_general``'s signature: ``DenseGeneral`` and ``nnx.Linear`` take either.
"""

from __future__ import annotations

from functools import partial
from typing import Any

import jax
from jax import lax
from jax.sharding import PartitionSpec


def _explicit_spec(array: jax.Array) -> PartitionSpec | None:
    """The array's sharding from its type under an explicit mesh; ``None`` elsewhere."""
    sharding = jax.typeof(array).sharding
    return sharding.spec if sharding.mesh.are_all_axes_explicit else None


@partial(jax.custom_vjp, nondiff_argnums=(2, 3, 4))
def kernel_order_dot_general(
    lhs: jax.Array,
    rhs: jax.Array,
    dimension_numbers: lax.DotDimensionNumbers,
    precision: lax.PrecisionLike = None,
    out_sharding: PartitionSpec | None = None,
) -> jax.Array:
    """``lax.dot_general`` of ``lhs`` and a kernel ``rhs`` stored ``[embed, vocab]``, contracting
    ``lhs``'s last axis with its first; ``_backward`` writes the kernel's gradient in that order."""
    if dimension_numbers != (((lhs.ndim - 1,), (0,)), ((), ())) or rhs.ndim != 2:
        raise ValueError(
            f"kernel_order_dot_general takes x's last axis times a 2-axis [in, out] kernel's "
            f"first, not {dimension_numbers} on {rhs.ndim} axes: use auto_axes_dot_general."
        )
    return lax.dot_general(lhs, rhs, dimension_numbers, precision, out_sharding=out_sharding)


def _forward(x, kernel, *options):
    return kernel_order_dot_general(x, kernel, *options), (x, kernel)


def _backward(_dimension_numbers, precision, _out_sharding, residuals, g):
    x, kernel = residuals
    tokens, vocab = tuple(range(g.ndim - 1)), g.ndim - 1
    dot = partial(lax.dot_general, precision=precision)
    dx = dot(g, kernel, (((vocab,), (1,)), ((), ())), out_sharding=_explicit_spec(x))
    # Contract the token dims with x first: the result is [embed, vocab], the kernel's own order.
    dkernel = dot(x, g, ((tokens, tokens), ((), ())), out_sharding=_explicit_spec(kernel))
    return dx, dkernel


kernel_order_dot_general.defvjp(_forward, _backward)


def auto_axes_dot_general(
    lhs: jax.Array,
    rhs: jax.Array,
    dimension_numbers: lax.DotDimensionNumbers,
    precision: lax.PrecisionLike = None,
    out_sharding: PartitionSpec | None = None,
    **options: Any,
) -> jax.Array:
    """``lax.dot_general`` with the mesh's axes Auto for this one dot, leaving with
    ``out_sharding`` (by default the plain dot's); the plain dot where the mesh is not all
    Explicit (no barrier to remove) or, as MaxText's ``_dot_general_in_auto_axes``, where an
    operand is typed ``reduced`` or ``unreduced``, whose tag the region would drop."""
    dot = partial(
        lax.dot_general, dimension_numbers=dimension_numbers, precision=precision, **options
    )
    specs = [jax.typeof(operand).sharding.spec for operand in (lhs, rhs)]  # JAX 0.12 has the tags
    tagged = any(getattr(s, "reduced", None) or getattr(s, "unreduced", None) for s in specs)
    if tagged or not jax.typeof(lhs).sharding.mesh.are_all_axes_explicit:
        return dot(lhs, rhs, out_sharding=out_sharding)  # type: ignore[call-arg]  # mypy#18644
    if out_sharding is None:
        out_sharding = jax.eval_shape(dot, lhs, rhs).sharding
    return jax.sharding.auto_axes(dot, out_sharding=out_sharding)(lhs, rhs)
