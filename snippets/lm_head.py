"""A general dense layer with the LM-head fixes as options, and the head built on it.

``DenseGeneral`` follows Flax's ``LinearGeneral`` (`linear.py
<https://github.com/google/flax/blob/02603f689d5783636048a5b4e0a2ed7cc81901c5/flax/nnx/nn/linear.py>`_)
and MaxText's ``DenseGeneral`` (`linears.py
<https://github.com/AI-Hypercomputer/maxtext/blob/022d0e12f2529db8cfd6b6f002f85416698204f0/src/maxtext/layers/linears.py>`_):
canonical arguments, promoted dtypes, one ``lax.dot_general``, and MaxText's own
slice-bound check. ``kernel_transposed=True`` stores the kernel ``[out..., in...]``
(``[vocab, embed]`` for the head: the source pull request's ``lm_head_kernel_transposed``),
so autodiff writes the weight gradient in that order; ``weight_grad_in_kernel_order``
keeps ``[embed, vocab]`` and writes its gradient in that order instead (the design
doc's fix, :mod:`snippets.kernel_order_grad`).

Run ``python -m snippets.lm_head [--json]`` for a summary of both orientations.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Sequence
from typing import Any, Literal, Self

import jax
import jax.numpy as jnp
import numpy as np
from flax import nnx
from flax.linen import logical_to_mesh_axes
from flax.nnx.nn.dtypes import promote_dtype
from jax import lax
from jax.sharding import PartitionSpec
from numpy.lib.array_utils import normalize_axis_tuple
from pydantic import BaseModel, ConfigDict, model_validator

from snippets.cli import Parser, PositiveInt, check_memory, positive_int, reported, run_module
from snippets.kernel_order_grad import auto_axes_logits, kernel_order_logits

Shape = tuple[int, ...]
KernelOrder = Literal["custom_vjp", "auto_axes"]
"""The two ways to write the weight gradient in kernel order: a custom VJP, or ``auto_axes``."""


class Int8Quant:
    """A placeholder quantisation config: symmetric int8 fake-quantisation of the kernel."""

    def fake_quantize(self, kernel: jax.Array, contract_axes: Shape) -> jax.Array:
        """Round ``kernel`` to int8 steps, one scale per output feature."""
        scale = jnp.max(jnp.abs(kernel), axis=contract_axes, keepdims=True) / 127.0
        scale = jnp.where(scale == 0, 1.0, scale)
        return jnp.round(kernel / scale) * scale


def canonical_tuple(value: int | Iterable[int]) -> Shape:
    """``value`` as a tuple: one int becomes a 1-tuple (as Flax and MaxText canonicalise)."""
    return tuple(value) if isinstance(value, Iterable) else (value,)


def stored_order(in_part: tuple, out_part: tuple, kernel_transposed: bool) -> tuple:
    """Concatenate per-feature entries (sizes or axis names) in the kernel's stored order.

    >>> stored_order(("embed",), ("vocab",), kernel_transposed=True)
    ('vocab', 'embed')
    """
    return (*out_part, *in_part) if kernel_transposed else (*in_part, *out_part)


class DenseGeneral(nnx.Module):
    """A dense layer over one or more input axes; the LM-head fixes are its options.

    ``kernel_axes`` are logical axis names in the usual ``in..., out...`` order
    whatever the orientation; the layer permutes them with the kernel, so a
    sharding rule keeps naming the same axis.
    """

    def __init__(
        self,
        in_features: int | Sequence[int],
        out_features: int | Sequence[int],
        *,
        axis: int | Sequence[int] = -1,
        kernel_axes: Sequence[str | None] = (),
        use_bias: bool = False,
        dtype: Any = None,
        param_dtype: Any = jnp.float32,
        kernel_init: jax.nn.initializers.Initializer | None = None,
        quant: Int8Quant | None = None,
        kernel_transposed: bool = False,
        weight_grad_in_kernel_order: KernelOrder | None = None,
        rngs: nnx.Rngs,
    ):
        self.in_features = canonical_tuple(in_features)
        self.out_features = canonical_tuple(out_features)
        self.axis = canonical_tuple(axis)
        n_in, n_out = len(self.in_features), len(self.out_features)
        if len(self.axis) != n_in or len(kernel_axes) not in (0, n_in + n_out):
            raise ValueError(
                f"axis {self.axis} must name one input axis per in_feature {self.in_features}, "
                f"and kernel_axes {tuple(kernel_axes)} none or one name per kernel axis "
                f"(in_features, then out_features {self.out_features})."
            )
        if kernel_transposed and quant is not None:
            raise ValueError(
                "kernel_transposed=True cannot be combined with quant: the quantised matmul "
                "expects the kernel in [in..., out...] order. Drop one of the two."
            )
        if weight_grad_in_kernel_order and (
            kernel_transposed or quant is not None or self.axis != (-1,) or n_out != 1
        ):
            raise ValueError(
                "weight_grad_in_kernel_order needs a plain [in, out] kernel: one in_feature on "
                "axis -1, one out_feature, kernel_transposed=False and no quant."
            )
        self.kernel_transposed = kernel_transposed
        self.weight_grad_in_kernel_order = weight_grad_in_kernel_order
        self.quant, self.dtype = quant, dtype
        in_axes, out_axes = tuple(range(n_in)), tuple(range(n_in, n_in + n_out))
        # As MaxText: truncated normal, fan-in over the input axes. Drawn in the canonical
        # [in..., out...] shape, then permuted: one seed gives one matrix in both orientations.
        init = kernel_init or jax.nn.initializers.variance_scaling(
            1.0, "fan_in", "truncated_normal", in_axis=in_axes, out_axis=out_axes
        )
        canonical = init(rngs.params(), self.in_features + self.out_features, param_dtype)
        self.kernel_permutation = stored_order(in_axes, out_axes, kernel_transposed)
        self.kernel_axes = tuple(kernel_axes[i] for i in self.kernel_permutation if kernel_axes)
        self.kernel = nnx.Param(
            jnp.transpose(canonical, self.kernel_permutation),
            out_sharding=self.kernel_axes or None,
            eager_sharding=False,
        )
        bias = jnp.zeros(self.out_features, param_dtype)
        bias_axes = tuple(kernel_axes[n_in:]) or None
        self.bias = (
            nnx.Param(bias, out_sharding=bias_axes, eager_sharding=False) if use_bias else None
        )

    @property
    def contract_axes(self) -> Shape:
        """The kernel axes the input is contracted with: leading, or trailing when transposed."""
        n_in, n_out = len(self.in_features), len(self.out_features)
        return tuple(range(n_out, n_out + n_in)) if self.kernel_transposed else tuple(range(n_in))

    def _sliced(
        self, kernel: jax.Array, bias: jax.Array | None, slice_bounds: tuple[int, int]
    ) -> tuple[jax.Array, jax.Array | None]:
        """Kernel and bias cut to ``[begin, end)`` of the last output feature, checked as MaxText does."""
        if self.kernel_transposed or self.quant is not None:
            raise ValueError(
                "slice_bounds cannot be combined with kernel_transposed=True (it slices the "
                "trailing output-feature axis, which a transposed kernel stores at the front) "
                "or with quant (as in MaxText, the quantised matmul takes the whole kernel)."
            )
        begin, end = slice_bounds
        if not 0 <= begin < end <= kernel.shape[-1]:
            raise ValueError(f"slice_bounds {slice_bounds} must be within [0, {kernel.shape[-1]}].")
        return kernel[..., begin:end], None if bias is None else bias[..., begin:end]

    def __call__(
        self,
        inputs: jax.Array,
        out_sharding: Any = None,
        slice_bounds: tuple[int, int] | None = None,
    ) -> jax.Array:
        """Contract ``inputs`` over ``axis`` with the (optionally sliced) kernel; add the bias."""
        kernel = self.kernel[...]
        bias = None if self.bias is None else self.bias[...]
        if slice_bounds is not None:
            kernel, bias = self._sliced(kernel, bias, slice_bounds)
        if self.quant is not None:
            kernel = self.quant.fake_quantize(kernel, self.contract_axes)
        inputs, kernel, bias = promote_dtype((inputs, kernel, bias), dtype=self.dtype)
        if self.weight_grad_in_kernel_order == "custom_vjp":
            out = kernel_order_logits(inputs, kernel, out_sharding)
        elif self.weight_grad_in_kernel_order == "auto_axes":
            out = auto_axes_logits(inputs, kernel, out_sharding)
        else:
            axis = normalize_axis_tuple(self.axis, inputs.ndim)
            dimensions = ((axis, self.contract_axes), ((), ()))
            out = lax.dot_general(inputs, kernel, dimensions, out_sharding=out_sharding)
        return out if bias is None else out + bias


class Config(BaseModel):
    """The project's config style: frozen, no unknown fields, no coercion (``True`` is not a size)."""

    model_config = ConfigDict(
        frozen=True, extra="forbid", strict=True, use_attribute_docstrings=True
    )

    def replace(self, **changes: Any) -> Self:
        """A copy with ``changes``, validated like a new config (pydantic's ``model_copy`` is not)."""
        return self.model_validate(self.model_dump() | changes)


class LMHeadConfig(Config):
    """The output head's configuration, with MaxText's names: sizes, tying and the two fixes.

    The shard mode is not the head's business: it belongs to the mesh
    (``snippets.devices.make_mesh``), and the layer reads it from the arrays' types.
    """

    emb_dim: PositiveInt
    vocab_size: PositiveInt
    logits_via_embedding: bool = False
    """Tie the head to the token embedding (attend on it) instead of an untied kernel."""
    lm_head_kernel_transposed: bool = False
    """Store the untied kernel ``[vocab, embed]``: no weight-gradient transpose under explicit
    sharding, but the checkpoint's orientation changes."""
    lm_head_weight_grad_in_kernel_order: KernelOrder | None = None
    """Keep the kernel ``[embed, vocab]`` and write its gradient in that order, this way."""

    @model_validator(mode="after")
    def _fixes_need_an_untied_head(self) -> Self:
        for flag in ("lm_head_kernel_transposed", "lm_head_weight_grad_in_kernel_order"):
            if self.logits_via_embedding and getattr(self, flag):
                raise ValueError(
                    f"{flag}={getattr(self, flag)!r} requires logits_via_embedding=False: a tied "
                    "head attends on the embedding table, so there is no untied kernel to fix."
                )
        return self


HEAD_KERNEL_AXES = ("embed", "vocab")
"""The LM head kernel's logical axes, in the canonical ``in, out`` order."""


def build_output_head(
    config: LMHeadConfig, *, rngs: nnx.Rngs, embedding: nnx.Embed | None = None
) -> DenseGeneral | Callable[[jax.Array], jax.Array]:
    """The untied dense head with the config's fix; tied, the embedding attending on its input."""
    if not config.logits_via_embedding:
        return DenseGeneral(
            config.emb_dim,
            config.vocab_size,
            kernel_axes=HEAD_KERNEL_AXES,
            kernel_transposed=config.lm_head_kernel_transposed,
            weight_grad_in_kernel_order=config.lm_head_weight_grad_in_kernel_order,
            rngs=rngs,
        )
    if embedding is None:
        raise ValueError("logits_via_embedding=True needs the token embedding: pass embedding=.")
    return embedding.attend


def head_kernel_spec(
    config: LMHeadConfig,
    rules: Sequence[tuple[str, Any]],
    check: PartitionSpec | None = None,
) -> PartitionSpec:
    """The head kernel's PartitionSpec in its stored orientation, from logical axis rules.

    Both orientations are rank 2, so a spec written for the wrong one would
    mis-shard silently; pass it as ``check`` to have it compared and rejected.
    A logical axis without a rule would be replicated silently, so it is an error.

    >>> config = LMHeadConfig(emb_dim=8, vocab_size=16, lm_head_kernel_transposed=True)
    >>> head_kernel_spec(config, [("embed", None), ("vocab", "model")])
    P('model', None)
    """
    missing = [name for name in HEAD_KERNEL_AXES if name not in dict(rules)]
    if missing:
        raise ValueError(
            f"The logical rules {rules} have no rule for {missing}, which would leave those axes "
            f"replicated without saying so; add e.g. ({missing[0]!r}, 'model') to shard one, or "
            f"({missing[0]!r}, None) to replicate it on purpose."
        )
    transposed = config.lm_head_kernel_transposed
    axes = stored_order(HEAD_KERNEL_AXES[:1], HEAD_KERNEL_AXES[1:], transposed)
    spec = logical_to_mesh_axes(axes, rules)
    if check is not None and PartitionSpec(*check, *[None] * (2 - len(check))) != spec:
        layout = "[vocab, embed]" if transposed else "[embed, vocab]"
        raise ValueError(
            f"PartitionSpec {check} does not fit the LM head kernel stored as {layout} "
            f"(lm_head_kernel_transposed={transposed}); the rules give {spec}. "
            "A spec for the other orientation would shard the wrong axis."
        )
    return spec


def dot_rounding_bound(a: jax.Array, b: jax.Array) -> np.ndarray:
    """How far two summation orders of ``a @ b`` may differ, elementwise: ``2 * gamma_K * |a| @ |b|``.

    Any order of the ``K``-term float sums lies within ``gamma_K * (|a| @ |b|)`` of
    the exact product, ``gamma_K = K*u / (1 - K*u)`` with ``u`` the unit roundoff
    (Higham, *Accuracy and Stability of Numerical Algorithms*, 2nd ed., section 3.1),
    so two orders lie within twice that. Computed in float64.

    >>> float(dot_rounding_bound(jnp.ones((1, 4)), jnp.ones((4, 1)))[0, 0]) < 1e-5
    True
    """
    u = float(jnp.finfo(jnp.result_type(a, b)).eps) / 2
    k = a.shape[-1]
    gamma = k * u / (1 - k * u)
    return 2 * gamma * (np.abs(np.asarray(a, np.float64)) @ np.abs(np.asarray(b, np.float64)))


def small_integers(key: jax.Array, shape: Shape, bound: int = 4) -> jax.Array:
    """Float32 integers in ``[-bound, bound]``: products and sums of a few stay exact in float32."""
    return jax.random.randint(key, shape, -bound, bound + 1).astype(jnp.float32)


@nnx.jit
def _output_and_weight_grad(
    head: DenseGeneral, x: jax.Array, cotangent: jax.Array
) -> tuple[jax.Array, jax.Array]:
    """The head's output and its weight gradient for one cotangent, in ``[embed, vocab]`` order."""

    def loss(head: DenseGeneral) -> tuple[jax.Array, jax.Array]:
        output = head(x)
        return jnp.sum(output * cotangent), output

    (_, output), grads = nnx.value_and_grad(loss, has_aux=True)(head)
    return output, grads.kernel[...].T if head.kernel_transposed else grads.kernel[...]


def orientation_report(emb: int = 64, vocab: int = 256, tokens: int = 32, seed: int = 0) -> dict:
    """Build the head both ways from one seed and compare shapes, axes, outputs and gradients.

    Two comparisons hold on every machine: with small-integer inputs, kernel and
    cotangent every sum is exact, so both orientations give the same bits; with
    random floats they differ at most by :func:`dot_rounding_bound`. Whether the
    random-float results are *bit*-identical is a property of the machine (XLA:CPU
    may pack a transposed operand another way), so it is measured, not promised.
    """
    heads = {
        name: DenseGeneral(
            emb, vocab, kernel_axes=HEAD_KERNEL_AXES, kernel_transposed=flag, rngs=nnx.Rngs(seed)
        )
        for name, flag in (("EV", False), ("VE", True))
    }
    keys = jax.random.split(jax.random.key(seed + 1), 4)
    x, cotangent = (
        jax.random.normal(keys[0], (tokens, emb)),
        jax.random.normal(keys[1], (tokens, vocab)),
    )
    (y_ev, g_ev), (y_ve, g_ve) = (_output_and_weight_grad(h, x, cotangent) for h in heads.values())
    kernel = heads["EV"].kernel[...]
    report: dict[str, Any] = {
        name: {"kernel_shape": list(head.kernel.shape), "kernel_axes": list(head.kernel_axes)}
        for name, head in heads.items()
    }
    report["same_seed_identical"] = bool(jnp.array_equal(kernel, heads["VE"].kernel[...].T))
    exact = small_integers(keys[2], (emb, vocab))
    heads["EV"].kernel[...], heads["VE"].kernel[...] = exact, exact.T
    exact_args = small_integers(keys[3], (tokens, emb)), small_integers(keys[1], (tokens, vocab))
    ev, ve = (_output_and_weight_grad(h, *exact_args) for h in heads.values())
    report["exact_inputs_identical"] = all(map(jnp.array_equal, ev, ve))
    diff = {
        "forward": np.abs(np.asarray(y_ev, np.float64) - np.asarray(y_ve, np.float64)),
        "grad": np.abs(np.asarray(g_ev, np.float64) - np.asarray(g_ve, np.float64)),
    }
    bound = {"forward": dot_rounding_bound(x, kernel), "grad": dot_rounding_bound(x.T, cotangent)}
    report |= {f"{k}_within_rounding_bound": bool(np.all(diff[k] <= bound[k])) for k in diff}
    report |= {f"{k}_bit_identical_here": bool(np.all(diff[k] == 0)) for k in diff}
    report |= {f"{k}_max_abs_diff": float(diff[k].max()) for k in diff}
    return report


def main(argv: Sequence[str] | None = None) -> None:
    """Print the two orientations side by side."""
    parser = Parser(__doc__)
    parser.add_argument("--json", action="store_true", help="print JSON instead of text")
    parser.add_argument("--emb", type=positive_int, default=64, help="embedding size")
    parser.add_argument("--vocab", type=positive_int, default=256, help="vocabulary size")
    parser.add_argument("--tokens", type=positive_int, default=32, help="tokens in the batch")
    args = parser.parse_args(argv)
    with reported(args.debug):
        # Kernels, gradients, logits and their float64 differences, with room to spare.
        sizes = (
            10 * args.emb * args.vocab + 8 * args.tokens * args.vocab + 2 * args.tokens * args.emb
        )
        check_memory(8 * sizes, f"--emb {args.emb} --vocab {args.vocab} --tokens {args.tokens}")
    report = orientation_report(args.emb, args.vocab, args.tokens)
    if args.json:
        print(json.dumps(report, indent=2))
        return
    for key, value in report.items():
        print(f"{key}: {value}")


if __name__ == "__main__":
    run_module(main)
