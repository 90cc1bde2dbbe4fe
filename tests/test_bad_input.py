"""Bad input to the layer, its config, the spec helper, the step config and reduce-scatter."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from flax import nnx
from jax.sharding import PartitionSpec as P
from pydantic import ValidationError

from snippets.collective_cost import lm_head_threshold_table
from snippets.hlo.reduce_scatter import schedule, schedule_bytes_per_rank, walkthrough
from snippets.lm_head import DenseGeneral, LMHeadConfig, head_kernel_spec
from snippets.lowering import StepConfig

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


@pytest.mark.parametrize("bounds", [(3, 2), (-1, 4), (0, 100), (2, 2)])
def test_slice_bounds_outside_the_last_feature_are_rejected(bounds):
    with pytest.raises(ValueError, match=r"slice_bounds .* must be within \[0, 8\]"):
        heads_layer()(jnp.ones((2, 4)), slice_bounds=bounds)


@pytest.mark.parametrize("bounds", [(0, 3.0), (1,), "03"])
def test_slice_bounds_that_are_not_two_integers_fail(bounds):
    """No check of its own: unpacking, comparing or slicing fails in Python or JAX."""
    with pytest.raises((TypeError, ValueError)):
        heads_layer()(jnp.ones((2, 4)), slice_bounds=bounds)


def test_numpy_integer_features_are_accepted():
    layer = DenseGeneral(np.int64(16), np.int32(8), axis=np.int64(-1), rngs=nnx.Rngs(0))
    assert layer.in_features == (16,)
    assert layer(jnp.ones((3, 16))).shape == (3, 8)


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
    ("changes", "message"),
    [
        ({"emb_dim": 0}, "emb_dim"),
        ({"vocab_size": 3.5}, "vocab_size"),
        ({"lm_head_weight_grad_in_kernel_order": "vjp"}, "lm_head_weight_grad_in_kernel_order"),
        ({"shard_mode": "explicit"}, "shard_mode"),  # the mesh carries the mode
    ],
)
def test_replace_validates_the_changes(changes, message):
    config = LMHeadConfig(emb_dim=8, vocab_size=16)
    with pytest.raises(ValidationError, match=message):
        config.replace(**changes)


@pytest.mark.parametrize(
    ("flag", "value"),
    [
        ("lm_head_kernel_transposed", True),
        ("lm_head_weight_grad_in_kernel_order", "auto_axes"),
        ("lm_head_vocab_parallel", True),
    ],
)
def test_config_rejects_a_fix_on_a_tied_head(flag, value):
    with pytest.raises(ValidationError) as error:
        LMHeadConfig(emb_dim=8, vocab_size=16, logits_via_embedding=True, **{flag: value})
    assert f"{flag}={value!r} requires logits_via_embedding=False" in str(error.value)


def test_config_rejects_the_custom_vjp_on_a_transposed_kernel():
    with pytest.raises(ValidationError, match="cannot be combined with lm_head_kernel_transposed"):
        LMHeadConfig(
            emb_dim=8,
            vocab_size=16,
            lm_head_kernel_transposed=True,
            lm_head_weight_grad_in_kernel_order="custom_vjp",
        )


def test_replace_keeps_a_valid_change_and_the_original():
    config = LMHeadConfig(emb_dim=8, vocab_size=16)
    assert config.replace(lm_head_kernel_transposed=True).lm_head_kernel_transposed
    assert not config.lm_head_kernel_transposed


@pytest.mark.parametrize("check", [P("model"), P("model", None), P(("model",), None)])
def test_equivalent_check_specs_are_accepted(check):
    config = LMHeadConfig(emb_dim=8, vocab_size=16, lm_head_kernel_transposed=True)
    assert head_kernel_spec(config, RULES, check=check) == P("model", None)


def test_a_check_spec_with_too_many_entries_is_rejected():
    config = LMHeadConfig(emb_dim=8, vocab_size=16)
    with pytest.raises(ValueError, match=r"PartitionSpec P\(None, 'model', None\) does not fit"):
        head_kernel_spec(config, RULES, check=P(None, "model", None))


@pytest.mark.parametrize(
    ("rules", "message"),
    [
        ([("embed", None)], r"no rule for \['vocab'\]"),
        ([], r"no rule for \['embed', 'vocab'\]"),
        ([("vocab", "model")], r"no rule for \['embed'\]"),
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
    ("changes", "message"),
    [
        ({"batch": 0}, r"batch\s+Input should be greater than or equal to 1"),
        ({"seq": 0}, r"seq\s+Input should be greater than or equal to 1"),
        ({"emb": 0}, r"emb\s+Input should be greater than or equal to 1"),
        ({"devices": 0}, r"devices\s+Input should be greater than or equal to 1"),
        ({"vocab": 256.0}, r"vocab\s+Input should be a valid integer"),
        ({"dtype": "int8"}, r"dtype\s+Input should be 'float32', 'bfloat16' or 'float16'"),
        ({"pin_logits": "no"}, r"pin_logits\s+Input should be a valid boolean"),
        ({"optimizer": "sgd"}, r"optimizer\s+Input should be 'none' or 'adam'"),
        (
            {"variant": "EVV"},
            r"Input should be 'EV', 'VE', 'custom-vjp', 'auto-axes' or 'voc",
        ),
        ({"mode": "manual"}, r"mode\s+Input should be 'explicit' or 'auto'"),
        ({"mesh": "tp"}, r"mesh\s+Input should be 'dp', 'dp_fsdp' or 'fsdp'"),
        ({"variant": "vocab-parallel"}, r"mesh 'dp' has none; use mesh 'fsdp' or 'dp_fsdp'"),
        (
            {"mesh": "fsdp", "variant": "vocab-parallel", "vocab": 258},
            r"vocab 258 does not divide over the fsdp axis of size 4",
        ),
        ({"batch": 6}, r"batch 6 does not divide over the 4 devices"),
        ({"mesh": "dp_fsdp", "emb": 63}, r"emb 63 does not divide over the fsdp axis of size 2"),
        ({"mesh": "dp_fsdp", "devices": 3, "batch": 9}, r"needs an even device count"),
    ],
)
def test_step_config_rejects_sizes_and_types(changes, message):
    with pytest.raises(ValidationError, match=message):
        StepConfig().replace(**changes)


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
        (0, ValueError, r"ranks\n +Input should be greater than or equal to 1"),
        (-2, ValueError, r"ranks\n +Input should be greater than or equal to 1"),
        (2.0, ValueError, r"ranks\n +Input should be a valid integer"),
        (True, ValueError, r"ranks\n +Input should be a valid integer"),
    ],
)
def test_walkthrough_rejects_a_rank_count_that_is_not_positive(ranks, error, message):
    with pytest.raises(error, match=message):
        walkthrough(ranks)


def test_walkthrough_rejects_arrays_that_are_not_matrices():
    with pytest.raises(ValueError, match=r"A \(4,\) @ B \(4, 2\) on 2 ranks: A and B must be"):
        walkthrough(2, np.ones(4, np.float32), np.ones((4, 2), np.float32))
