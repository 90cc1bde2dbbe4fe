"""A general dense layer with the LM-head fixes as options, and the head built on it.

``DenseGeneral`` follows Flax's ``LinearGeneral`` (`linear.py
<https://github.com/google/flax/blob/02603f689d5783636048a5b4e0a2ed7cc81901c5/flax/nnx/nn/linear.py>`_)
and MaxText's ``DenseGeneral`` (`linears.py
<https://github.com/AI-Hypercomputer/maxtext/blob/022d0e12f2529db8cfd6b6f002f85416698204f0/src/maxtext/layers/linears.py>`_):
one ``dot_general`` (``lax.dot_general`` by default) and MaxText's checks.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from typing import Any, Literal, Self, cast

import jax
import jax.numpy as jnp
from flax import nnx
from flax.nnx.nn.dtypes import promote_dtype
from jax import lax
from jax.sharding import PartitionSpec
from numpy.lib.array_utils import normalize_axis_tuple
from pydantic import model_validator

from snippets.kernel_order_grad import auto_axes_dot_general, kernel_order_dot_general
from snippets.support.config import Config, PositiveInt

KERNEL_ORDER: dict[str | None, Callable[..., jax.Array]] = {
    None: lax.dot_general,
    "custom_vjp": kernel_order_dot_general,
    "auto_axes": auto_axes_dot_general,
}
"""The head's ``dot_general`` for each ``lm_head_weight_grad_in_kernel_order`` value."""


def canonical_tuple(value: int | Iterable[int]) -> tuple[int, ...]:
    """``value`` as a tuple: one int becomes a 1-tuple (as Flax and MaxText canonicalise)."""
    return tuple(value) if isinstance(value, Iterable) else (value,)


class DenseGeneral(nnx.Module):
    """A dense layer over one or more input axes; the LM-head fixes are its options.

    Args:
      in_features: sizes of the contracted input axes.
      out_features: sizes of the output axes.
      axis: the input axes to contract, one per in_feature.
      kernel_axes: logical names of the kernel axes, ``in..., out...`` in either orientation.
      use_bias: add a bias over the output axes.
      param_dtype: dtype of the parameters.
      kernel_transposed: store the kernel ``[out..., in...]`` (the PR's fix).
      dot_general: the product, of ``lax.dot_general``'s signature (as Flax's ``LinearGeneral``);
        a :data:`KERNEL_ORDER` one writes the weight gradient in kernel order, the doc's fix.
      rngs: the random streams that initialise the kernel.
    """

    def __init__(
        self,
        in_features: int | Sequence[int],
        out_features: int | Sequence[int],
        *,
        axis: int | Sequence[int] = -1,
        kernel_axes: Sequence[str | None] = (),
        use_bias: bool = False,
        param_dtype: Any = jnp.float32,
        kernel_transposed: bool = False,
        dot_general: Callable[..., jax.Array] = lax.dot_general,
        rngs: nnx.Rngs,
    ):
        self.in_features = canonical_tuple(in_features)
        self.out_features = canonical_tuple(out_features)
        self.axis = canonical_tuple(axis)
        n_in, n_out = len(self.in_features), len(self.out_features)
        if len(self.axis) != n_in or len(kernel_axes) not in (0, n_in + n_out):
            raise ValueError(
                f"axis {self.axis} must name one input axis per in_feature {self.in_features}, "
                f"and kernel_axes {tuple(kernel_axes)} none or one name per kernel axis (in, then out)."
            )
        self.kernel_transposed = kernel_transposed
        self.dot_general = dot_general
        in_axes, out_axes = tuple(range(n_in)), tuple(range(n_in, n_in + n_out))
        # As MaxText: truncated normal, fan-in over the input axes. Drawn in the canonical
        # [in..., out...] shape, then permuted: one seed gives one matrix in both orientations.
        init = jax.nn.initializers.variance_scaling(
            1.0, "fan_in", "truncated_normal", in_axis=in_axes, out_axis=out_axes
        )
        canonical = init(rngs.params(), self.in_features + self.out_features, param_dtype)
        self.kernel_permutation = out_axes + in_axes if kernel_transposed else in_axes + out_axes
        self.kernel_axes = tuple(kernel_axes[i] for i in self.kernel_permutation if kernel_axes)
        kernel = jnp.transpose(canonical, self.kernel_permutation)
        self.kernel = nnx.Param(kernel, out_sharding=self.kernel_axes or None, eager_sharding=False)
        self.bias: nnx.Param | None
        if use_bias:
            bias = jnp.zeros(self.out_features, param_dtype)
            self.bias = nnx.Param(
                bias, out_sharding=kernel_axes[n_in:] or None, eager_sharding=False
            )
        else:
            self.bias = nnx.data(None)  # as Flax's LinearGeneral: no bias, nothing built

    def __call__(
        self,
        inputs: jax.Array,
        out_sharding: Any = None,
        slice_bounds: tuple[int, int] | None = None,
    ) -> jax.Array:
        """Contract ``inputs`` over ``axis`` with the kernel (``slice_bounds``: a slice of the
        last output feature); add the bias."""
        axis = normalize_axis_tuple(self.axis, inputs.ndim)
        if (sizes := tuple(inputs.shape[a] for a in axis)) != self.in_features:  # as MaxText
            raise ValueError(
                f"Input sizes {sizes} on axes {axis} do not match {self.in_features=}."
            )
        kernel = self.kernel[...]
        bias = None if self.bias is None else self.bias[...]
        if slice_bounds is not None:  # checked as MaxText does
            if self.kernel_transposed:
                raise ValueError("slice_bounds cannot be combined with kernel_transposed=True.")
            begin, end = slice_bounds
            size = kernel.shape[-1]
            if not 0 <= begin < end <= size:
                raise ValueError(f"slice_bounds {slice_bounds} must be within [0, {size}].")
            kernel = kernel[..., begin:end]
            bias = None if bias is None else bias[..., begin:end]
        inputs, kernel, bias = promote_dtype((inputs, kernel, bias))
        in_axes = tuple(map(self.kernel_permutation.index, range(len(axis))))  # where stored
        dimensions = ((axis, in_axes), ((), ()))
        out = self.dot_general(inputs, kernel, dimensions, out_sharding=out_sharding)
        return out if bias is None else out + bias


class LMHeadConfig(Config):
    """The output head's configuration, with MaxText's names: sizes, tying and the two fixes."""

    emb_dim: PositiveInt
    vocab_size: PositiveInt
    logits_via_embedding: bool = False
    """Tie the head to the token embedding (attend on it) instead of an untied kernel."""
    lm_head_kernel_transposed: bool = False
    """Store the untied kernel ``[vocab, embed]``: the checkpoint's orientation changes."""
    lm_head_weight_grad_in_kernel_order: Literal["custom_vjp", "auto_axes"] | None = None
    """Keep the kernel ``[embed, vocab]`` and write its gradient in that order, this way."""
    lm_head_vocab_parallel: bool = False
    """Shard the untied kernel on ``vocab``, not ``embed`` (:func:`head_axis_rules`)."""

    @model_validator(mode="after")
    def _fixes_need_an_untied_head(self) -> Self:
        for flag in [name for name in type(self).model_fields if name.startswith("lm_head_")]:
            if self.logits_via_embedding and getattr(self, flag):
                raise ValueError(
                    f"{flag}={getattr(self, flag)!r} requires logits_via_embedding=False: a tied "
                    "head attends on the embedding table, so there is no untied kernel to fix."
                )
        order = self.lm_head_weight_grad_in_kernel_order
        if order == "custom_vjp" and self.lm_head_kernel_transposed:
            raise ValueError(
                "lm_head_weight_grad_in_kernel_order='custom_vjp' writes an [embed, vocab] "
                "kernel's gradient: it cannot be combined with lm_head_kernel_transposed=True."
            )
        return self


HEAD_KERNEL_AXES = ("embed", "vocab")


def head_axis_rules(config: LMHeadConfig, fsdp: str | None) -> list[tuple[str, str | None]]:
    """The head kernel's logical axis rules: FSDP on ``embed``, as MaxText's ``base.yml`` has
    it, or on ``vocab`` with ``lm_head_vocab_parallel``; the stored shape is the same.

    >>> head_axis_rules(LMHeadConfig(emb_dim=8, vocab_size=16, lm_head_vocab_parallel=True), "fsdp")
    [('embed', None), ('vocab', 'fsdp')]
    """
    if config.lm_head_vocab_parallel:
        return [("embed", None), ("vocab", fsdp)]
    return [("embed", fsdp), ("vocab", None)]


def build_output_head(
    config: LMHeadConfig, *, rngs: nnx.Rngs, embedding: nnx.Embed | None = None
) -> DenseGeneral | Callable[..., jax.Array]:  # the tied head: Embed.attend
    """The untied dense head with the config's fix; tied, the embedding attending on its input."""
    if not config.logits_via_embedding:
        return DenseGeneral(
            config.emb_dim,
            config.vocab_size,
            kernel_axes=HEAD_KERNEL_AXES,
            kernel_transposed=config.lm_head_kernel_transposed,
            dot_general=KERNEL_ORDER[config.lm_head_weight_grad_in_kernel_order],
            rngs=rngs,
        )
    if embedding is None:
        raise ValueError("logits_via_embedding=True needs the token embedding: pass embedding=.")
    return embedding.attend


def head_kernel_spec(
    config: LMHeadConfig, rules: Sequence[tuple[str, Any]], check: PartitionSpec | None = None
) -> PartitionSpec:
    """The head kernel's PartitionSpec in its stored orientation: its logical axes under
    ``rules``, as ``nnx.get_partition_spec`` reads them from the (abstract) built head; a logical
    axis without a rule, or a ``check`` spec for the other orientation, is an error.

    >>> config = LMHeadConfig(emb_dim=8, vocab_size=16, lm_head_kernel_transposed=True)
    >>> head_kernel_spec(config, [("embed", None), ("vocab", "model")])
    P('model', None)
    """
    if missing := [name for name in HEAD_KERNEL_AXES if name not in dict(rules)]:
        raise ValueError(
            f"The logical rules {rules} have no rule for {missing}; add e.g. ({missing[0]!r}, "
            f"'model') to shard it, or ({missing[0]!r}, None) to replicate it on purpose."
        )
    head = cast(DenseGeneral, nnx.eval_shape(lambda: build_output_head(config, rngs=nnx.Rngs(0))))
    with nnx.logical_axis_rules(rules):
        spec = cast(PartitionSpec, nnx.get_partition_spec(head.kernel).get_value())
    if check is not None and PartitionSpec(*check, *[None] * (2 - len(check))) != spec:
        raise ValueError(
            f"PartitionSpec {check} does not fit the LM head kernel stored as "
            f"[{', '.join(map(str, head.kernel_axes))}] (lm_head_kernel_transposed="
            f"{config.lm_head_kernel_transposed}); the rules give {spec}."
        )
    return spec
