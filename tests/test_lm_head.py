"""The transposed-kernel DenseGeneral, its linen form, the head config and the spec helper."""

import typing

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from flax import nnx
from jax.sharding import NamedSharding
from jax.sharding import PartitionSpec as P

from snippets import head_orientation
from snippets.devices import make_mesh
from snippets.head_orientation import dot_rounding_bound, orientation_report
from snippets.lm_head import (
    KERNEL_ORDER,
    DenseGeneral,
    LMHeadConfig,
    build_output_head,
    head_kernel_spec,
)

RULES = [("embed", None), ("vocab", "model")]
OUT_FEATURES = [6, (2, 8)]


def pair(in_features, out_features, **kwargs):
    """The same layer from the same seed, stored [in, out] and [out, in]."""
    return tuple(
        DenseGeneral(in_features, out_features, kernel_transposed=flag, rngs=nnx.Rngs(0), **kwargs)
        for flag in (False, True)
    )


def canonical(layer, kernel):
    """A kernel-shaped array of ``layer`` permuted back to [in..., out...], in NumPy."""
    return np.transpose(kernel, np.argsort(layer.kernel_permutation))


# Test data is drawn by NumPy and compared in NumPy: every jax.random draw or eager jnp op of a
# new shape is one more XLA compile, and compiles are most of this file's time.
def integers(seed, shape):
    """Float32 integers in [-4, 4], as ``small_integers`` draws: products and short sums exact."""
    return jnp.asarray(np.random.default_rng(seed).integers(-4, 5, shape).astype(np.float32))


def normal(seed, shape):
    """Standard normal float32 samples."""
    return jnp.asarray(np.random.default_rng(seed).standard_normal(shape, dtype=np.float32))


def ones(*shape):
    """A float32 array of ones, put on the device without an XLA op."""
    return jnp.asarray(np.ones(shape, np.float32))


def test_kernel_shape_and_axes_are_permuted():
    ev, ve = pair((4, 16), (2, 8), axis=(-2, -1), kernel_axes=("a", "b", "c", "d"))
    assert ev.kernel.shape == (4, 16, 2, 8)
    assert ve.kernel.shape == (2, 8, 4, 16)
    assert ev.kernel_axes == ("a", "b", "c", "d")
    assert ve.kernel_axes == ("c", "d", "a", "b")
    assert nnx.get_partition_spec(nnx.state(ve))["kernel"].get_value() == P("c", "d", "a", "b")


def with_integer_kernels(layers, seed=2):
    """Give both layers of a pair the same small-integer matrix, each in its stored orientation."""
    ev, ve = layers
    exact = np.asarray(integers(seed, ev.kernel.shape))
    ev.kernel[...] = jnp.asarray(exact)
    ve.kernel[...] = jnp.asarray(np.transpose(exact, ve.kernel_permutation))
    return ev, ve


@pytest.mark.parametrize("out_features", OUT_FEATURES, ids=str)
def test_forward_is_bit_identical_when_every_sum_is_exact(out_features):
    ev, ve = with_integer_kernels(pair(16, out_features))
    x = integers(1, (5, 16))
    y_ev, y_ve = ev(x), ve(x)
    assert y_ev.shape == y_ve.shape == (5, *np.atleast_1d(out_features))
    np.testing.assert_array_equal(y_ev, y_ve)


@pytest.mark.parametrize("out_features", OUT_FEATURES, ids=str)
def test_gradient_is_bit_identical_modulo_the_transpose_when_every_sum_is_exact(out_features):
    ev, ve = with_integer_kernels(pair(16, out_features))
    x = integers(1, (5, 16))
    cotangent = integers(3, (5, *np.atleast_1d(out_features)))

    def loss(layer):
        return jnp.sum(layer(x) * cotangent)

    grad = nnx.jit(nnx.grad(loss))  # one compile per layer, not one per eager op
    g_ev, g_ve = (np.asarray(grad(layer).kernel[...]) for layer in (ev, ve))
    assert g_ve.shape == ve.kernel.shape
    assert np.any(g_ev != 0)
    np.testing.assert_array_equal(g_ev, canonical(ve, g_ve))


@pytest.mark.parametrize("out_features", [6, 32, 250])
def test_random_float_outputs_differ_at_most_by_the_rounding_bound(out_features):
    """Any two summation orders obey the bound; which order XLA:CPU picks depends on the machine."""
    ev, ve = pair(64, out_features)
    x = normal(1, (7, 64))
    difference = np.abs(np.asarray(ev(x), np.float64) - np.asarray(ve(x), np.float64))
    assert np.all(difference <= dot_rounding_bound(x, ev.kernel[...]))


def test_the_rounding_bound_catches_a_wrong_result():
    ev = pair(64, 32)[0]
    x = normal(1, (7, 64))
    wrong = np.asarray(ev(x), np.float64) * (1 + 1e-4)
    difference = np.abs(wrong - np.asarray(ev(x), np.float64))
    assert not np.all(difference <= dot_rounding_bound(x, ev.kernel[...]))


def test_bias_tracks_the_output_features_in_both_orientations():
    for layer in pair(16, (2, 8), use_bias=True, kernel_axes=("embed", "heads", "vocab")):
        assert layer.bias.shape == (2, 8)
        assert nnx.get_partition_spec(nnx.state(layer))["bias"].get_value() == P("heads", "vocab")
    ev, ve = with_integer_kernels(pair(16, (2, 8), use_bias=True))
    for layer in (ev, ve):
        layer.bias[...] = jnp.asarray(np.arange(16, dtype=np.float32).reshape(2, 8))
    x = ones(3, 16)
    np.testing.assert_array_equal(ev(x), ve(x))
    assert not np.array_equal(ev(x), with_integer_kernels(pair(16, (2, 8)))[0](x))


def test_same_seed_gives_the_same_matrix_transposed():
    ev, ve = pair((4, 16), (2, 8), axis=(-2, -1))
    np.testing.assert_array_equal(ev.kernel[...], canonical(ve, np.asarray(ve.kernel[...])))


@pytest.mark.parametrize("flag", [False, True])
def test_init_statistics_use_fan_in_over_the_input_axes(flag):
    layer = pair((4, 16), (2, 64), axis=(-2, -1))[flag]
    kernel = np.asarray(layer.kernel[...])
    assert float(kernel.std()) == pytest.approx(1 / np.sqrt(4 * 16), rel=0.05)


def test_out_sharding_on_an_explicit_mesh_matches_the_unsharded_result():
    mesh = make_mesh((2, 2), ("data", "model"), "explicit")
    x = normal(1, (8, 16))
    for flag in (False, True):
        config = LMHeadConfig(emb_dim=16, vocab_size=32, lm_head_kernel_transposed=flag)
        head = build_output_head(config, rngs=nnx.Rngs(0))
        expected = head(x)
        with jax.set_mesh(mesh):
            head.kernel.set_value(
                jax.device_put(
                    head.kernel[...], NamedSharding(mesh, head_kernel_spec(config, RULES))
                )
            )
            xs = jax.device_put(x, NamedSharding(mesh, P("data", None)))
            logits = head(xs, out_sharding=P("data", "model"))
        assert logits.sharding.spec == P("data", "model")
        np.testing.assert_allclose(logits, expected, rtol=1e-6, atol=1e-6)


def test_slice_bounds_keep_a_slice_of_the_output_features():
    layer = with_integer_kernels(pair(16, 8, use_bias=True))[0]
    layer.bias[...] = integers(4, (8,))
    x = integers(1, (3, 16))
    np.testing.assert_array_equal(layer(x, slice_bounds=(2, 5)), np.asarray(layer(x))[:, 2:5])


def test_transposed_kernel_rejects_slice_bounds():
    layer = pair(16, 8)[1]
    with pytest.raises(ValueError, match="slice_bounds cannot be combined with kernel_transposed"):
        layer(ones(2, 16), slice_bounds=(0, 4))


@pytest.mark.parametrize("flag", [False, True])
def test_input_that_does_not_match_the_axes_is_rejected(flag):
    """The feature sizes are checked at call, in one line as MaxText does; numpy checks the axes."""
    layer = pair(16, 8)[flag]
    with pytest.raises(ValueError, match=r"Input sizes \(12,\) on axes \(1,\) do not match"):
        layer(ones(2, 12))
    deep = DenseGeneral((4, 16), (2, 8), axis=(-3, -1), rngs=nnx.Rngs(0))
    with pytest.raises(ValueError, match=r"axis -3 is out of bounds for array of dimension 2"):
        deep(ones(4, 16))
    twice = DenseGeneral((4, 16), (2, 8), axis=(1, -1), rngs=nnx.Rngs(0))
    with pytest.raises(ValueError, match="repeated axis"):
        twice(ones(4, 16))


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"axis": (-2, -1)}, "must name one input axis per in_feature"),
        ({"kernel_axes": ("embed",)}, r"kernel_axes \('embed',\) none or one name per kernel axis"),
    ],
)
def test_inconsistent_construction_is_rejected(kwargs, message):
    with pytest.raises(ValueError, match=message):
        DenseGeneral(16, 8, rngs=nnx.Rngs(0), **kwargs)


@pytest.mark.parametrize("flag", [False, True])
def test_linen_and_nnx_agree(flag):
    """MaxText wires the layer into linen too: nnx.bridge makes it a linen module."""
    x = normal(1, (3, 16))
    module = nnx.bridge.to_linen(DenseGeneral, 16, (2, 8), kernel_transposed=flag, use_bias=True)
    variables = module.init(jax.random.key(0), x)
    kernel = variables["params"]["kernel"].value
    layer = DenseGeneral(16, (2, 8), kernel_transposed=flag, use_bias=True, rngs=nnx.Rngs(0))
    assert kernel.shape == layer.kernel.shape
    assert set(variables["params"]) == {"kernel", "bias"}
    layer.kernel[...] = kernel
    np.testing.assert_array_equal(module.apply(variables, x), layer(x))


def test_build_output_head_untied_and_tied():
    untied = build_output_head(
        LMHeadConfig(emb_dim=8, vocab_size=16, lm_head_kernel_transposed=True), rngs=nnx.Rngs(0)
    )
    assert untied.kernel.shape == (16, 8)
    embedding = nnx.Embed(16, 8, rngs=nnx.Rngs(0))
    tied = build_output_head(
        LMHeadConfig(emb_dim=8, vocab_size=16, logits_via_embedding=True),
        rngs=nnx.Rngs(0),
        embedding=embedding,
    )
    x = ones(2, 8)
    np.testing.assert_array_equal(tied(x), x @ embedding.embedding[...].T)
    with pytest.raises(ValueError, match="needs the token embedding"):
        build_output_head(
            LMHeadConfig(emb_dim=8, vocab_size=16, logits_via_embedding=True), rngs=nnx.Rngs(0)
        )


@pytest.mark.parametrize(("flag", "spec"), [(False, P(None, "model")), (True, P("model", None))])
def test_head_kernel_spec_follows_the_stored_orientation(flag, spec):
    config = LMHeadConfig(emb_dim=8, vocab_size=16, lm_head_kernel_transposed=flag)
    assert head_kernel_spec(config, RULES) == spec
    assert head_kernel_spec(config, RULES, check=spec) == spec


def test_head_kernel_spec_rejects_a_spec_for_the_other_orientation():
    config = LMHeadConfig(emb_dim=8, vocab_size=16, lm_head_kernel_transposed=True)
    with pytest.raises(
        ValueError, match=r"does not fit the LM head kernel stored as \[vocab, embed\]"
    ):
        head_kernel_spec(config, RULES, check=P(None, "model"))


def test_orientation_report():
    report = orientation_report()
    assert report["EV"] == {"kernel_shape": [64, 256], "kernel_axes": ["embed", "vocab"]}
    assert report["VE"] == {"kernel_shape": [256, 64], "kernel_axes": ["vocab", "embed"]}
    assert report["same_seed_identical"]
    assert report["exact_inputs_identical"]
    assert report["forward_within_rounding_bound"]
    assert report["grad_within_rounding_bound"]


class OffByAPartInAThousand(DenseGeneral):
    """A transposed layer whose outputs are 0.1% too large: an orientation that is wrong."""

    def __call__(self, inputs, *args, **kwargs):
        out = super().__call__(inputs, *args, **kwargs)
        return out * 1.001 if self.kernel_transposed else out


def test_orientation_report_tells_a_wrong_orientation_from_rounding(monkeypatch):
    """The report compares the two orientations with each other, and a wrong one fails it."""
    monkeypatch.setattr(head_orientation, "DenseGeneral", OffByAPartInAThousand)
    report = orientation_report(emb=16, vocab=32, tokens=8)
    assert report["same_seed_identical"]
    assert not report["exact_inputs_identical"]
    for key in ("forward", "grad"):
        assert not report[f"{key}_within_rounding_bound"]
        assert not report[f"{key}_bit_identical_here"]
        assert report[f"{key}_max_abs_diff"] > 0


class DrawnInItsStoredShape(DenseGeneral):
    """A layer that draws its kernel in its stored shape: for VE, same seed but another matrix."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.kernel[...] = jax.random.normal(jax.random.key(0), self.kernel.shape)


def test_orientation_report_tells_a_kernel_drawn_in_the_stored_shape(monkeypatch):
    monkeypatch.setattr(head_orientation, "DenseGeneral", DrawnInItsStoredShape)
    report = orientation_report(emb=16, vocab=32, tokens=8)
    assert not report["same_seed_identical"]
    assert report["exact_inputs_identical"]  # its own kernels: the same matrix both ways


@pytest.mark.parametrize(("emb", "vocab", "tokens"), [(16, 6, 5), (16, 32, 8), (48, 100, 3)])
def test_orientations_agree_within_rounding_at_every_size(emb, vocab, tokens):
    """XLA:CPU may pick another dot kernel for the transposed operand; only rounding may differ."""
    report = orientation_report(emb=emb, vocab=vocab, tokens=tokens)
    assert report["same_seed_identical"]
    assert report["exact_inputs_identical"]
    assert report["forward_within_rounding_bound"]
    assert report["grad_within_rounding_bound"]
    assert report["forward_bit_identical_here"] == (report["forward_max_abs_diff"] == 0)


@pytest.mark.parametrize(
    ("in_features", "out_features", "axis"), [(16, 8, -1), ((4, 16), (2, 8), (-2, -1))]
)
def test_the_untransposed_layer_computes_what_flax_linear_general_does(
    in_features, out_features, axis
):
    """Same kernel, bias and input: bit for bit on small integers (exact sums, any machine),
    within a dot product's rounding on random floats (the summation order is the backend's)."""
    ours = DenseGeneral(in_features, out_features, axis=axis, use_bias=True, rngs=nnx.Rngs(0))
    flax = nnx.LinearGeneral(in_features, out_features, axis=axis, rngs=nnx.Rngs(1))
    x = integers(0, (3, *ours.in_features))
    for layer in (ours, flax):
        layer.kernel[...] = integers(1, ours.kernel.shape)
        layer.bias[...] = integers(2, ours.bias.shape)
    np.testing.assert_array_equal(ours(x), flax(x))

    x = normal(0, x.shape)
    for layer in (ours, flax):
        layer.kernel[...] = normal(1, ours.kernel.shape)
    rows = np.asarray(x).reshape(3, -1)
    columns = np.asarray(ours.kernel[...]).reshape(rows.shape[1], -1)
    bound = dot_rounding_bound(rows, columns).reshape(ours(x).shape)
    assert np.all(np.abs(np.subtract(ours(x), flax(x), dtype=np.float64)) <= bound)


def test_the_kernel_order_field_names_each_dot_general():
    """The field's Literal is written out for the type checker; it must name KERNEL_ORDER's keys."""
    literal, _none = typing.get_args(
        LMHeadConfig.model_fields["lm_head_weight_grad_in_kernel_order"].annotation
    )
    assert {*typing.get_args(literal), None} == set(KERNEL_ORDER)
