"""Bad input to the layer, its config, the spec helper, the step config and reduce-scatter."""

import dataclasses

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from flax import nnx
from jax.sharding import PartitionSpec as P
from pydantic import ValidationError

from snippets.gradient_finish import lm_head_threshold_table
from snippets.lm_head import (
    DenseGeneral,
    Int8Quant,
    LMHeadConfig,
    build_output_head,
    head_kernel_spec,
)
from snippets.lowering import StepConfig
from snippets.reduce_scatter import schedule, schedule_bytes_per_rank, walkthrough

RULES = [("embed", None), ("vocab", "model")]


def heads_layer(**kwargs):
    """MaxText's slice_bounds test layer: 4 input features, 2 heads of 8."""
    return DenseGeneral(4, (2, 8), use_bias=True, rngs=nnx.Rngs(0), **kwargs)


# MaxText tests/unit/linears_test.py, ported: slice_bounds inside [0, 8] slice the last feature.
def test_valid_slice_bounds_keep_a_slice_of_the_heads():
    layer = heads_layer()
    x = jax.random.normal(jax.random.key(0), (2, 4))
    full = layer(x)
    first, rest = layer(x, slice_bounds=(0, 3)), layer(x, slice_bounds=(3, 8))
    assert first.shape == (2, 2, 3)
    assert rest.shape == (2, 2, 5)
    np.testing.assert_allclose(first, full[..., :3], rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(rest, full[..., 3:], rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("bounds", [(3, 2), (-1, 4), (0, 100), (2, 2), (0, 3.0), (1,), "03"])
def test_slice_bounds_outside_the_last_feature_are_rejected(bounds):
    with pytest.raises(ValueError, match=r"must be two whole numbers .* 0 <= begin < end <= 8"):
        heads_layer()(jnp.ones((2, 4)), slice_bounds=bounds)


def test_slice_bounds_with_quantisation_are_rejected():
    layer = heads_layer(quant=Int8Quant())
    with pytest.raises(ValueError, match="slice_bounds cannot be combined with quant"):
        layer(jnp.ones((2, 4)), slice_bounds=(0, 3))


def test_numpy_integer_features_are_accepted():
    layer = DenseGeneral(np.int64(16), np.int32(8), axis=np.int64(-1), rngs=nnx.Rngs(0))
    assert layer.in_features == (16,)
    assert layer(jnp.ones((3, 16))).shape == (3, 8)


def wrong_shape_init(key, shape, dtype, in_axis, out_axis):
    return jnp.zeros(shape[::-1], dtype)


@pytest.mark.parametrize(
    ("args", "kwargs", "error", "message"),
    [
        ((0, 8), {}, ValueError, r"in_features must all be at least 1, got \(0,\)"),
        ((16, (2, 0)), {}, ValueError, r"out_features must all be at least 1, got \(2, 0\)"),
        ((16.0, 8), {}, TypeError, "in_features must be a whole number or a sequence"),
        ((True, 8), {}, TypeError, "in_features must be a whole number or a sequence"),
        (((4, 4), 8), {"axis": (-1, -1)}, ValueError, "names the same input axis twice"),
        ((16, 8), {"quant": "int8"}, TypeError, "quant must be None or a config"),
        ((16, 8), {"kernel_transposed": "yes"}, TypeError, "kernel_transposed must be True"),
        ((16, 8), {"use_bias": 1}, TypeError, "use_bias must be True or False"),
        ((16, 8), {"kernel_axes": ("embed", 3)}, TypeError, "kernel_axes must be names"),
        (
            (16, 8),
            {"kernel_init": wrong_shape_init},
            ValueError,
            r"kernel_init returned shape \(8, 16\).*canonical .* shape \(16, 8\)",
        ),
    ],
)
def test_bad_layer_arguments_fail_at_construction(args, kwargs, error, message):
    with pytest.raises(error, match=message):
        DenseGeneral(*args, rngs=nnx.Rngs(0), **kwargs)


def test_an_axis_named_twice_after_normalisation_fails_at_call():
    layer = DenseGeneral((4, 4), 8, axis=(1, -1), rngs=nnx.Rngs(0))
    with pytest.raises(ValueError, match=r"axis \(1, -1\) names the same axis twice .* \(4, 4\)"):
        layer(jnp.ones((4, 4)))


@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("emb_dim", True),
        ("emb_dim", 64.0),
        ("vocab_size", "256"),
        ("lm_head_kernel_transposed", "yes"),
        ("logits_via_embedding", 1),
    ],
)
def test_config_does_not_coerce(field, value):
    fields = {"emb_dim": 64, "vocab_size": 256, field: value}
    with pytest.raises(ValidationError, match=field):
        LMHeadConfig(**fields)


@pytest.mark.parametrize(
    ("update", "message"),
    [
        ({"logits_via_embedding": True, "lm_head_kernel_transposed": True}, "requires logits_via"),
        ({"emb_dim": 0}, "emb_dim"),
        ({"vocab_size": 3.5}, "vocab_size"),
        ({"bogus": 1}, "bogus"),
    ],
)
def test_model_copy_validates_the_update(update, message):
    config = LMHeadConfig(emb_dim=8, vocab_size=16)
    with pytest.raises(ValidationError, match=message):
        config.model_copy(update=update)


def test_model_copy_keeps_a_valid_update():
    config = LMHeadConfig(emb_dim=8, vocab_size=16)
    assert config.model_copy(update={"lm_head_kernel_transposed": True}).lm_head_kernel_transposed


def test_an_unvalidated_config_is_refused_where_it_is_used():
    bypass = LMHeadConfig.model_construct(
        emb_dim=8, vocab_size=16, logits_via_embedding=True, lm_head_kernel_transposed=True
    )
    with pytest.raises(ValidationError, match="requires logits_via_embedding=False"):
        head_kernel_spec(bypass, RULES)
    with pytest.raises(ValidationError, match="requires logits_via_embedding=False"):
        build_output_head(bypass, rngs=nnx.Rngs(0))
    with pytest.raises(TypeError, match="Expected an LMHeadConfig, got dict"):
        head_kernel_spec({"emb_dim": 8, "vocab_size": 16}, RULES)


@pytest.mark.parametrize("check", [P("model"), P("model", None), P(("model",), None)])
def test_equivalent_check_specs_are_accepted(check):
    config = LMHeadConfig(emb_dim=8, vocab_size=16, lm_head_kernel_transposed=True)
    assert head_kernel_spec(config, RULES, check=check) == P("model", None)


def test_a_check_spec_with_too_many_entries_is_rejected():
    config = LMHeadConfig(emb_dim=8, vocab_size=16)
    with pytest.raises(ValueError, match="has 3 entries for a rank-2 kernel"):
        head_kernel_spec(config, RULES, check=P(None, "model", None))


@pytest.mark.parametrize(
    ("rules", "message"),
    [
        ([("embed", None)], r"no rule for \['vocab'\]"),
        ([], r"no rule for \['embed', 'vocab'\]"),
        ([("vocab", "model")], r"no rule for \['embed'\]"),
        ([("embed", None), "vocab"], r"Logical rule 'vocab' must be a \(logical name"),
        ([("embed", None), ("vocab", 3)], r"Logical rule \('vocab', 3\) must be"),
    ],
)
def test_rules_must_name_every_head_axis(rules, message):
    config = LMHeadConfig(emb_dim=8, vocab_size=16)
    with pytest.raises(ValueError, match=message):
        head_kernel_spec(config, rules)


def test_replicating_on_purpose_is_allowed():
    config = LMHeadConfig(emb_dim=8, vocab_size=16)
    assert head_kernel_spec(config, [("embed", None), ("vocab", None)]) == P(None, None)


@pytest.mark.parametrize(
    ("changes", "error", "message"),
    [
        ({"batch": 0}, ValueError, "batch must be a whole number of at least 1, got 0"),
        ({"seq": 0}, ValueError, "seq must be a whole number of at least 1, got 0"),
        ({"emb": 0}, ValueError, "emb must be a whole number of at least 1, got 0"),
        ({"devices": 0}, ValueError, "devices must be a whole number of at least 1, got 0"),
        ({"vocab": 256.0}, ValueError, "vocab must be a whole number of at least 1, got 256.0"),
        ({"dtype": "int8"}, ValueError, r"Unknown dtype 'int8'"),
        ({"pin_logits": "no"}, TypeError, "pin_logits must be True or False"),
    ],
)
def test_step_config_rejects_sizes_and_types(changes, error, message):
    with pytest.raises(error, match=message):
        dataclasses.replace(StepConfig(), **changes)


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"shards": (0,)}, r"shards\.0\n +Input should be greater than or equal to 1"),
        ({"shards": (3,)}, "emb 512 does not divide over 3 shards"),
        ({"embs": (0,)}, r"embs\.0\n +Input should be greater than or equal to 1"),
        ({"embs": (2.0,)}, r"embs\.0\n +Input should be a valid integer"),
        ({"dtypes": ("f31",)}, "Unknown dtype 'f31'; use an HLO name such as bf16 or f32"),
    ],
)
def test_threshold_table_rejects_bad_counts(kwargs, message):
    with pytest.raises(ValueError, match=message):
        lm_head_threshold_table(**kwargs)


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"rows": 4, "cols": 2, "ranks": 0, "itemsize": 4}, r"ranks\n +Input should be greater"),
        ({"rows": 4, "cols": True, "ranks": 2, "itemsize": 4}, r"cols\n +Input should be a valid"),
        ({"rows": 5, "cols": 2, "ranks": 2, "itemsize": 4}, "rows 5 must divide by ranks 2"),
    ],
)
def test_schedule_rejects_bad_counts(kwargs, message):
    with pytest.raises(ValueError, match=message):
        schedule(**kwargs)


def test_one_rank_sends_nothing():
    assert schedule(rows=4, cols=2, ranks=1, itemsize=4) == []
    assert schedule_bytes_per_rank([], "reduce-scatter") == 0
    report = walkthrough(1, np.ones((2, 3), np.float32), np.ones((3, 2), np.float32))
    assert report["shards"] == [[[3.0, 3.0], [3.0, 3.0]]]
    assert report["bytes_total"] == 0
    assert set(report["hlo_bytes_per_rank"].values()) == {0}


@pytest.mark.parametrize(
    ("ranks", "error", "message"),
    [
        (0, ValueError, r"Mesh shape \(0,\) .* every size at least 1"),
        (-2, ValueError, r"Mesh shape \(-2,\) .* every size at least 1"),
        (2.0, TypeError, "A device count must be a whole number, got 2.0"),
        (True, ValueError, r"ranks\n +Input should be a valid integer"),
    ],
)
def test_walkthrough_rejects_a_rank_count_that_is_not_positive(ranks, error, message):
    with pytest.raises(error, match=message):
        walkthrough(ranks)


def test_walkthrough_rejects_arrays_that_are_not_matrices():
    with pytest.raises(ValueError, match=r"A \(4,\) @ B \(4, 2\) on 2 ranks: A and B must be"):
        walkthrough(2, np.ones(4, np.float32), np.ones((4, 2), np.float32))
