"""The head built both ways from one seed, compared: shapes, axes, outputs and gradients."""

from __future__ import annotations

from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
from flax import nnx

from snippets.lm_head import HEAD_KERNEL_AXES, DenseGeneral


def dot_rounding_bound(a: jax.Array, b: jax.Array) -> np.ndarray:
    """How far two summation orders of ``a @ b`` may differ: ``2 * gamma_K * |a| @ |b|``, with
    ``gamma_K = K*u / (1 - K*u)`` and ``u`` the unit roundoff (Higham, *Accuracy and Stability of
    Numerical Algorithms*, 2nd ed., section 3.1)."""
    u = float(jnp.finfo(jnp.result_type(a, b)).eps) / 2
    k = a.shape[-1]
    gamma = k * u / (1 - k * u)
    return 2 * gamma * (np.abs(np.asarray(a, np.float64)) @ np.abs(np.asarray(b, np.float64)))


def small_integers(key: jax.Array, shape: tuple[int, ...], bound: int = 4) -> jax.Array:
    """Float32 integers in ``[-bound, bound]``: products and sums of a few stay exact in float32."""
    return jax.random.randint(key, shape, -bound, bound + 1).astype(jnp.float32)


def orientation_report(emb: int = 64, vocab: int = 256, tokens: int = 32, seed: int = 0) -> dict:
    """Build the head both ways from one seed and compare shapes, axes, outputs and gradients:
    small-integer inputs give exact sums, so the same bits; random floats differ at most by
    :func:`dot_rounding_bound`, and whether they differ at all depends on the machine."""

    @jax.jit
    def output_and_weight_grad(head, x, cotangent):  # the gradient in [embed, vocab] order
        grad = jax.grad(lambda head: jnp.sum(head(x) * cotangent))(head).kernel[...]
        return head(x), grad.T if head.kernel_transposed else grad

    heads = {
        name: DenseGeneral(
            emb, vocab, kernel_axes=HEAD_KERNEL_AXES, kernel_transposed=flag, rngs=nnx.Rngs(seed)
        )
        for name, flag in (("EV", False), ("VE", True))
    }
    report: dict[str, Any] = {
        name: {"kernel_shape": list(head.kernel.shape), "kernel_axes": list(head.kernel_axes)}
        for name, head in heads.items()
    }
    ev, ve = heads.values()
    kernel = ev.kernel[...]
    report["same_seed_identical"] = bool(jnp.array_equal(kernel, ve.kernel[...].T))
    keys = jax.random.split(jax.random.key(seed + 1), 4)
    x = jax.random.normal(keys[0], (tokens, emb))
    cotangent = jax.random.normal(keys[1], (tokens, vocab))
    (y_ev, g_ev), (y_ve, g_ve) = (output_and_weight_grad(h, x, cotangent) for h in heads.values())
    exact = small_integers(keys[2], (emb, vocab))
    ev.kernel[...], ve.kernel[...] = exact, exact.T
    exact_args = small_integers(keys[3], (tokens, emb)), small_integers(keys[1], (tokens, vocab))
    ev_exact, ve_exact = (output_and_weight_grad(h, *exact_args) for h in heads.values())
    report["exact_inputs_identical"] = all(map(jnp.array_equal, ev_exact, ve_exact))
    pairs = {"forward": (y_ev, y_ve), "grad": (g_ev, g_ve)}
    diff = {k: np.abs(np.subtract(*pair, dtype=np.float64)) for k, pair in pairs.items()}
    bound = {"forward": dot_rounding_bound(x, kernel), "grad": dot_rounding_bound(x.T, cotangent)}
    report |= {f"{k}_within_rounding_bound": bool(np.all(diff[k] <= bound[k])) for k in diff}
    report |= {f"{k}_bit_identical_here": bool(np.all(diff[k] == 0)) for k in diff}
    report |= {f"{k}_max_abs_diff": float(diff[k].max()) for k in diff}
    return report
