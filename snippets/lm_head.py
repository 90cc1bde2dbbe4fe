"""A general dense layer whose kernel can be stored transposed, and the LM head built on it.

``DenseGeneral(kernel_transposed=True)`` allocates its kernel as
``out_features + in_features`` (``[vocab, embed]`` for an LM head) and contracts
on the kernel's trailing axes, so the output is unchanged while the weight
gradient comes out of autodiff already in the stored orientation. The idea and
the flag come from MaxText's ``lm_head_kernel_transposed`` (see the shard-mode
guide for the source); this is our implementation.

Run ``python -m snippets.lm_head [--json]`` for a summary of both orientations.
"""

from __future__ import annotations

import dataclasses
import json
import numbers
from collections.abc import Callable, Mapping, Sequence
from typing import Any, Self

import jax
import jax.numpy as jnp
import numpy as np
from flax import nnx
from flax.linen import logical_to_mesh_axes
from jax import lax
from jax.sharding import PartitionSpec
from pydantic import BaseModel, ConfigDict, Field, PositiveInt, model_validator

from snippets.cli import Parser, check_memory, positive_int, reported, run_module

Shape = tuple[int, ...]
KernelInit = Callable[[jax.Array, Shape, Any, Shape, Shape], jax.Array]
LogicalRules = Sequence[tuple[str, str | tuple[str, ...] | None]]


def default_kernel_init(
    key: jax.Array, shape: Shape, dtype: Any, in_axis: Shape, out_axis: Shape
) -> jax.Array:
    """Truncated-normal fan-in scaling, with fan-in taken over ``in_axis`` (as in MaxText)."""
    init = jax.nn.initializers.variance_scaling(
        1.0, "fan_in", "truncated_normal", in_axis=in_axis, out_axis=out_axis
    )
    return init(key, shape, dtype)


@dataclasses.dataclass(frozen=True)
class Int8Quant:
    """A placeholder quantisation config: symmetric int8 fake-quantisation of the kernel."""

    def fake_quantize(self, kernel: jax.Array, contract_axes: Shape) -> jax.Array:
        """Round ``kernel`` to int8 steps, one scale per output feature."""
        scale = jnp.max(jnp.abs(kernel), axis=contract_axes, keepdims=True) / 127.0
        scale = jnp.where(scale == 0, 1.0, scale)
        return jnp.round(kernel / scale) * scale


def _int_tuple(name: str, value: object, minimum: int | None = None) -> Shape:
    """``value`` (one whole number or a sequence of them) as a tuple of ints, checked."""
    items = (value,) if isinstance(value, numbers.Integral) else value
    if not isinstance(items, Sequence) or not all(
        isinstance(v, numbers.Integral) and not isinstance(v, bool) for v in items
    ):
        raise TypeError(f"{name} must be a whole number or a sequence of them, got {value!r}.")
    if minimum is not None and any(v < minimum for v in items):
        raise ValueError(f"{name} must all be at least {minimum}, got {tuple(items)}.")
    return tuple(int(v) for v in items)


def _normalized_axes(axis: Shape, shape: Shape) -> Shape:
    """``axis`` as non-negative axes of an input of ``shape``, each named at most once."""
    ndim = len(shape)
    if any(not -ndim <= a < ndim for a in axis):
        raise ValueError(f"axis {axis} is out of range for an input of shape {shape}.")
    normalized = tuple(a % ndim for a in axis)
    if len(set(normalized)) != len(normalized):
        raise ValueError(f"axis {axis} names the same axis twice of an input of shape {shape}.")
    return normalized


def stored_order(in_part: tuple, out_part: tuple, kernel_transposed: bool) -> tuple:
    """Concatenate per-feature entries (sizes or axis names) in the kernel's stored order.

    >>> stored_order(("embed",), ("vocab",), kernel_transposed=True)
    ('vocab', 'embed')
    """
    return (*out_part, *in_part) if kernel_transposed else (*in_part, *out_part)


class DenseGeneral(nnx.Module):
    """A dense layer over one or more input axes, with an optional transposed kernel.

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
        dtype: Any = jnp.float32,
        param_dtype: Any = jnp.float32,
        kernel_init: KernelInit = default_kernel_init,
        quant: Int8Quant | None = None,
        kernel_transposed: bool = False,
        rngs: nnx.Rngs,
    ):
        self.in_features = _int_tuple("in_features", in_features, minimum=1)
        self.out_features = _int_tuple("out_features", out_features, minimum=1)
        self.axis = _int_tuple("axis", axis)
        for name, flag in (("use_bias", use_bias), ("kernel_transposed", kernel_transposed)):
            if not isinstance(flag, bool):
                raise TypeError(f"{name} must be True or False, got {flag!r}.")
        if quant is not None and not callable(getattr(quant, "fake_quantize", None)):
            raise TypeError(f"quant must be None or a config such as Int8Quant(), got {quant!r}.")
        self.kernel_transposed = kernel_transposed
        self.quant = quant
        self.dtype = dtype
        n_in, n_out = len(self.in_features), len(self.out_features)
        if len(self.axis) != n_in:
            raise ValueError(
                f"axis {self.axis} must name one input axis per in_feature {self.in_features}."
            )
        if len(set(self.axis)) != n_in:
            raise ValueError(f"axis {self.axis} names the same input axis twice.")
        if not all(name is None or isinstance(name, str) for name in kernel_axes):
            raise TypeError(f"kernel_axes must be names or None, got {tuple(kernel_axes)!r}.")
        if kernel_axes and len(kernel_axes) != n_in + n_out:
            raise ValueError(
                f"kernel_axes {tuple(kernel_axes)} must name {n_in + n_out} axes "
                f"(in_features {self.in_features}, then out_features {self.out_features})."
            )
        if kernel_transposed and quant is not None:
            raise ValueError(
                "kernel_transposed=True cannot be combined with quant: the quantised matmul "
                "expects the kernel in [in..., out...] order. Drop one of the two."
            )
        # Initialise in the canonical [in..., out...] shape, then permute: the same seed
        # gives the same matrix in both orientations, and fan-in is over the input axes.
        canonical = kernel_init(
            rngs.params(),
            (*self.in_features, *self.out_features),
            param_dtype,
            tuple(range(n_in)),
            tuple(range(n_in, n_in + n_out)),
        )
        if getattr(canonical, "shape", None) != (*self.in_features, *self.out_features):
            raise ValueError(
                f"kernel_init returned shape {getattr(canonical, 'shape', type(canonical))}; "
                f"it must return the canonical [in..., out...] shape "
                f"{(*self.in_features, *self.out_features)} it was asked for."
            )
        self.kernel_permutation = stored_order(
            tuple(range(n_in)), tuple(range(n_in, n_in + n_out)), kernel_transposed
        )
        self.kernel_axes = (
            tuple(kernel_axes[i] for i in self.kernel_permutation) if kernel_axes else ()
        )
        self.kernel = nnx.Param(
            jnp.transpose(canonical, self.kernel_permutation),
            out_sharding=self.kernel_axes or None,
            eager_sharding=False,
        )
        bias_axes = tuple(kernel_axes[n_in:]) if kernel_axes else None
        self.bias = (
            nnx.Param(
                jnp.zeros(self.out_features, param_dtype),
                out_sharding=bias_axes,
                eager_sharding=False,
            )
            if use_bias
            else None
        )

    def _check_slice_bounds(self, slice_bounds: object) -> None:
        """Reject bounds outside ``0 <= begin < end <= out_features[-1]``, as MaxText does."""
        if self.kernel_transposed:
            raise ValueError(
                "slice_bounds cannot be used with kernel_transposed=True: it slices the trailing "
                "output-feature axis, which a transposed kernel stores at the front."
            )
        if self.quant is not None:
            raise ValueError(
                "slice_bounds cannot be combined with quant: as in MaxText, the quantised matmul "
                "takes the whole kernel. Drop one of the two."
            )
        last = self.out_features[-1]
        if not (
            isinstance(slice_bounds, Sequence)
            and len(slice_bounds) == 2
            and all(
                isinstance(b, numbers.Integral) and not isinstance(b, bool) for b in slice_bounds
            )
            and 0 <= slice_bounds[0] < slice_bounds[1] <= last
        ):
            raise ValueError(
                f"slice_bounds {slice_bounds!r} must be two whole numbers (begin, end) with "
                f"0 <= begin < end <= {last}, the size of the last output feature."
            )

    @property
    def contract_axes(self) -> Shape:
        """The kernel axes the input is contracted with: leading, or trailing when transposed."""
        n_in, n_out = len(self.in_features), len(self.out_features)
        return tuple(range(n_out, n_out + n_in)) if self.kernel_transposed else tuple(range(n_in))

    def __call__(
        self,
        inputs: jax.Array,
        out_sharding: Any = None,
        slice_bounds: tuple[int, int] | None = None,
    ) -> jax.Array:
        """Contract ``inputs`` over ``axis`` with the kernel; ``slice_bounds`` keeps a slice of the last output feature."""
        if slice_bounds is not None:
            self._check_slice_bounds(slice_bounds)
        inputs = jnp.asarray(inputs)
        axis = _normalized_axes(self.axis, inputs.shape)
        got = tuple(inputs.shape[a] for a in axis)
        if got != self.in_features:
            raise ValueError(
                f"Input of shape {inputs.shape} has sizes {got} on axis {self.axis}, "
                f"but this layer was built for in_features {self.in_features}."
            )
        kernel = self.kernel[...]
        bias = self.bias[...] if self.bias is not None else None
        if self.quant is not None:
            kernel = self.quant.fake_quantize(kernel, self.contract_axes)
        if slice_bounds is not None:
            kernel = kernel[..., slice_bounds[0] : slice_bounds[1]]
            bias = bias[..., slice_bounds[0] : slice_bounds[1]] if bias is not None else None
        inputs, kernel = inputs.astype(self.dtype), kernel.astype(self.dtype)
        out = lax.dot_general(
            inputs, kernel, ((axis, self.contract_axes), ((), ())), out_sharding=out_sharding
        )
        return out + bias.astype(self.dtype) if bias is not None else out


def dense_general_linen(*args: Any, **kwargs: Any) -> nnx.bridge.ToLinen:
    """The same layer as a flax linen module (the other path MaxText wires), via ``nnx.bridge``.

    Takes ``DenseGeneral``'s arguments except ``rngs``; linen's ``init`` supplies them.
    """
    return nnx.bridge.to_linen(DenseGeneral, *args, **kwargs)


class LMHeadConfig(BaseModel):
    """The configuration of the output head: sizes, tying and the transposed-kernel flag.

    The shard mode is not the head's business: it belongs to the mesh
    (``snippets.devices.make_mesh``), and the head behaves the same under both.

    Strict: ``True`` is not a size, ``64.0`` not an int, ``"yes"`` not a flag.
    """

    model_config = ConfigDict(frozen=True, extra="forbid", strict=True)

    emb_dim: PositiveInt
    vocab_size: PositiveInt
    logits_via_embedding: bool = Field(
        False,
        description="Tie the head to the token embedding (attend on it) instead of an untied kernel.",
    )
    lm_head_kernel_transposed: bool = Field(
        False,
        description=(
            "Store the untied head kernel as [vocab, embed] instead of [embed, vocab]. Removes the "
            "weight-gradient transpose under shard_mode='explicit'; changes the checkpoint orientation."
        ),
    )

    @model_validator(mode="after")
    def _transposed_kernel_needs_an_untied_head(self) -> LMHeadConfig:
        if self.lm_head_kernel_transposed and self.logits_via_embedding:
            raise ValueError(
                "lm_head_kernel_transposed=True requires logits_via_embedding=False: a tied head "
                "attends on the embedding table, so there is no untied kernel to transpose."
            )
        return self

    def model_copy(self, *, update: Mapping[str, Any] | None = None, deep: bool = False) -> Self:
        """A copy with ``update`` applied, validated like a new config (pydantic's copy is not)."""
        return self.model_validate({**self.model_dump(), **(update or {})})


HEAD_KERNEL_AXES = ("embed", "vocab")
"""The LM head kernel's logical axes, in the canonical ``in, out`` order."""


class AttendOnEmbedding(nnx.Module):
    """The tied output head: logits are the embedding table attending on the hidden states."""

    def __init__(self, embedding: nnx.Embed):
        self.embedding = embedding

    def __call__(self, inputs: jax.Array, out_sharding: Any = None) -> jax.Array:
        """Logits ``inputs @ table.T``, with ``out_sharding`` passed to the dot."""
        table = self.embedding.embedding[...]
        return jnp.einsum("...e,ve->...v", inputs, table, out_sharding=out_sharding)


def validated(config: LMHeadConfig) -> LMHeadConfig:
    """``config`` validated again, so one built with ``model_construct`` cannot slip through."""
    if not isinstance(config, LMHeadConfig):
        raise TypeError(f"Expected an LMHeadConfig, got {type(config).__name__}.")
    return LMHeadConfig.model_validate(config.model_dump())


def build_output_head(
    config: LMHeadConfig, *, rngs: nnx.Rngs, embedding: nnx.Embed | None = None
) -> DenseGeneral | AttendOnEmbedding:
    """The untied dense head, or attend-on-embedding when ``logits_via_embedding`` is set."""
    config = validated(config)
    if config.logits_via_embedding:
        if embedding is None:
            raise ValueError(
                "logits_via_embedding=True needs the token embedding: pass embedding=."
            )
        return AttendOnEmbedding(embedding)
    return DenseGeneral(
        config.emb_dim,
        config.vocab_size,
        kernel_axes=HEAD_KERNEL_AXES,
        kernel_transposed=config.lm_head_kernel_transposed,
        rngs=rngs,
    )


def checked_rules(rules: LogicalRules, needed: Sequence[str]) -> LogicalRules:
    """``rules``, checked: ``(logical name, mesh axes or None)`` pairs, one for each ``needed``.

    A logical axis without a rule is silently replicated, so a missing rule is an
    error: write ``(name, None)`` to replicate on purpose.
    """
    rules = list(rules)
    for rule in rules:
        pair = isinstance(rule, tuple | list) and len(rule) == 2 and isinstance(rule[0], str)
        targets = (
            rule[1] if pair and isinstance(rule[1], tuple | list) else rule[1:] if pair else ()
        )
        if not pair or not all(axis is None or isinstance(axis, str) for axis in targets):
            raise ValueError(
                f"Logical rule {rule!r} must be a (logical name, mesh axis, tuple of them or None) "
                "pair, such as ('vocab', 'model')."
            )
    missing = [name for name in needed if name not in {rule[0] for rule in rules}]
    if missing:
        raise ValueError(
            f"The logical rules {rules} have no rule for {missing}, which would leave those axes "
            f"replicated without saying so; add e.g. ({missing[0]!r}, 'model') to shard one, or "
            f"({missing[0]!r}, None) to replicate it on purpose."
        )
    return rules


def _entries(spec: PartitionSpec, rank: int) -> tuple:
    """A spec's entries padded with ``None`` to ``rank``, ``("model",)`` written as ``"model"``."""
    if not isinstance(spec, PartitionSpec):
        raise TypeError(f"Expected a PartitionSpec, got {spec!r}.")
    if len(spec) > rank:
        raise ValueError(f"PartitionSpec {spec} has {len(spec)} entries for a rank-{rank} kernel.")
    entries = (*spec, *(None,) * (rank - len(spec)))
    return tuple(e[0] if isinstance(e, tuple) and len(e) == 1 else e or None for e in entries)


def head_kernel_spec(
    config: LMHeadConfig, rules: LogicalRules, check: PartitionSpec | None = None
) -> PartitionSpec:
    """The head kernel's PartitionSpec in its stored orientation, from logical axis rules.

    Both orientations are rank 2, so a spec written for the wrong one would
    mis-shard silently; pass it as ``check`` to have it compared and rejected.

    >>> config = LMHeadConfig(emb_dim=8, vocab_size=16, lm_head_kernel_transposed=True)
    >>> head_kernel_spec(config, [("embed", None), ("vocab", "model")])
    P('model', None)
    """
    config = validated(config)
    axes = stored_order(
        HEAD_KERNEL_AXES[:1], HEAD_KERNEL_AXES[1:], config.lm_head_kernel_transposed
    )
    spec = logical_to_mesh_axes(axes, checked_rules(rules, HEAD_KERNEL_AXES))
    if check is not None and _entries(check, len(axes)) != _entries(spec, len(axes)):
        layout = "[vocab, embed]" if config.lm_head_kernel_transposed else "[embed, vocab]"
        raise ValueError(
            f"PartitionSpec {check} does not fit the LM head kernel stored as {layout} "
            f"(lm_head_kernel_transposed={config.lm_head_kernel_transposed}); the rules give {spec}. "
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


def _head_pair(emb: int, vocab: int, seed: int) -> dict[str, DenseGeneral]:
    """The head stored both ways from one seed."""
    return {
        name: DenseGeneral(
            emb, vocab, kernel_axes=HEAD_KERNEL_AXES, kernel_transposed=flag, rngs=nnx.Rngs(seed)
        )
        for name, flag in (("EV", False), ("VE", True))
    }


def _outputs_and_weight_grads(
    heads: dict[str, DenseGeneral], x: jax.Array, cotangent: jax.Array
) -> tuple[dict[str, jax.Array], dict[str, jax.Array]]:
    """Each head's output and its weight gradient for one fixed cotangent, in [embed, vocab] order."""
    outputs, grads = {}, {}
    for name, head in heads.items():
        outputs[name] = head(x)
        kernel_grad = nnx.grad(lambda h: jnp.sum(h(x) * cotangent))(head).kernel[...]
        grads[name] = kernel_grad.T if head.kernel_transposed else kernel_grad
    return outputs, grads


def orientation_report(emb: int = 64, vocab: int = 256, tokens: int = 32, seed: int = 0) -> dict:
    """Build the head both ways from one seed and compare shapes, axes, outputs and gradients.

    Two comparisons hold on every machine: with small-integer inputs, kernel and
    cotangent every sum is exact, so both orientations give the same bits; with
    random floats they differ at most by :func:`dot_rounding_bound`. Whether the
    random-float results are *bit*-identical is a property of the machine (XLA:CPU
    may pack a transposed operand another way), so it is measured, not promised.
    """
    heads = _head_pair(emb, vocab, seed)
    keys = jax.random.split(jax.random.key(seed + 1), 4)
    x = jax.random.normal(keys[0], (tokens, emb))
    cotangent = jax.random.normal(keys[1], (tokens, vocab))
    outputs, grads = _outputs_and_weight_grads(heads, x, cotangent)
    kernel, stored_transposed = heads["EV"].kernel[...], heads["VE"].kernel[...]
    forward_bound = dot_rounding_bound(x, kernel)
    grad_bound = dot_rounding_bound(x.T, cotangent)
    forward_diff = np.abs(np.asarray(outputs["EV"] - outputs["VE"], np.float64))
    grad_diff = np.abs(np.asarray(grads["EV"] - grads["VE"], np.float64))

    for head in heads.values():
        exact = small_integers(keys[2], (emb, vocab))
        head.kernel[...] = exact.T if head.kernel_transposed else exact
    exact_outputs, exact_grads = _outputs_and_weight_grads(
        heads, small_integers(keys[3], (tokens, emb)), small_integers(keys[1], (tokens, vocab))
    )
    report: dict[str, Any] = {
        name: {"kernel_shape": list(head.kernel.shape), "kernel_axes": list(head.kernel_axes)}
        for name, head in heads.items()
    }
    report["same_seed_identical"] = bool(jnp.array_equal(kernel, stored_transposed.T))
    report["exact_inputs_identical"] = bool(
        jnp.array_equal(exact_outputs["EV"], exact_outputs["VE"])
        and jnp.array_equal(exact_grads["EV"], exact_grads["VE"])
    )
    report["forward_within_rounding_bound"] = bool(np.all(forward_diff <= forward_bound))
    report["grad_within_rounding_bound"] = bool(np.all(grad_diff <= grad_bound))
    report["forward_bit_identical_here"] = bool(np.all(forward_diff == 0))
    report["grad_bit_identical_here"] = bool(np.all(grad_diff == 0))
    report["forward_max_abs_diff"] = float(forward_diff.max())
    report["grad_max_abs_diff"] = float(grad_diff.max())
    return report


REPORT_FLAGS = (
    "same_seed_identical",
    "exact_inputs_identical",
    "forward_within_rounding_bound",
    "grad_within_rounding_bound",
    "forward_bit_identical_here",
    "grad_bit_identical_here",
    "forward_max_abs_diff",
    "grad_max_abs_diff",
)


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
    for name in ("EV", "VE"):
        print(
            f"{name}: kernel {tuple(report[name]['kernel_shape'])}, axes {tuple(report[name]['kernel_axes'])}"
        )
    for key in REPORT_FLAGS:
        print(f"{key}: {report[key]}")


if __name__ == "__main__":
    run_module(main)
