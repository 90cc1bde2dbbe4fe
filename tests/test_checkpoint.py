"""Canonical checkpoints: round trips between orientations, sharded targets, the orientation record."""

import json

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from flax import nnx
from jax.sharding import NamedSharding
from jax.sharding import PartitionSpec as P

from snippets.checkpoint import (
    CANONICAL,
    TRANSPOSED,
    OrientationError,
    _permuted,
    kernel_orientations,
    read_orientation,
    restore,
    save,
)
from snippets.devices import make_mesh
from snippets.head_orientation import dot_rounding_bound
from snippets.lm_head import DenseGeneral

EPS32 = float(jnp.finfo(jnp.float32).eps)


def head(transposed, seed=0, emb=64, vocab=256):
    return DenseGeneral(
        emb,
        vocab,
        kernel_axes=("embed", "vocab"),
        use_bias=True,
        kernel_transposed=transposed,
        rngs=nnx.Rngs(seed),
    )


X = jax.random.normal(jax.random.key(1), (32, 64))


@pytest.mark.parametrize(
    ("source", "target"), [(False, True), (True, False), (False, False), (True, True)]
)
def test_round_trip_between_orientations(tmp_path, source, target):
    original = head(source)
    original.bias[...] = jnp.arange(256.0)
    save(tmp_path / "ckpt", original)
    restored = restore(tmp_path / "ckpt", head(target, seed=7))
    assert restored.kernel_transposed is target
    same_seed = head(target)
    assert jnp.array_equal(restored.kernel[...], same_seed.kernel[...])
    assert jnp.array_equal(restored.bias[...], original.bias[...])
    # Another orientation may sum in another order (machine-dependent): compare within rounding.
    expected = np.asarray(original(X), np.float64)
    rounding = dot_rounding_bound(X, head(False).kernel[...]) + 2 * EPS32 * np.abs(expected)
    assert np.all(np.abs(np.asarray(restored(X), np.float64) - expected) <= rounding)


HEADS, HEAD_DIM, WIDTH = 4, 8, 32
MULTI_AXIS = {
    "out (heads, head_dim)": lambda transposed, seed=0: DenseGeneral(
        WIDTH, (HEADS, HEAD_DIM), kernel_transposed=transposed, rngs=nnx.Rngs(seed)
    ),
    "in (heads, head_dim)": lambda transposed, seed=0: DenseGeneral(
        (HEADS, HEAD_DIM), WIDTH, axis=(-2, -1), kernel_transposed=transposed, rngs=nnx.Rngs(seed)
    ),
}
"""Kernels with two axes on one side, as attention's projections have: a query's
``[embed, heads, head_dim]``, an output's ``[heads, head_dim, embed]`` (canonical order)."""


@pytest.mark.parametrize("layer", MULTI_AXIS)
@pytest.mark.parametrize(("source", "target"), [(False, True), (True, False)])
def test_a_kernel_with_two_axes_on_a_side_round_trips_between_orientations(
    tmp_path, layer, source, target
):
    """Flipping ``[in..., out...]`` moves the whole side as a block: ``[embed, heads, head_dim]``
    stored transposed is ``[heads, head_dim, embed]``, never ``[head_dim, embed, heads]``."""
    make = MULTI_AXIS[layer]
    save(tmp_path / "ckpt", make(source))
    restored = restore(tmp_path / "ckpt", make(target, seed=7))
    same_seed = make(target)  # one seed, one canonical matrix, in the target's orientation
    assert restored.kernel.shape == same_seed.kernel.shape
    assert jnp.array_equal(restored.kernel[...], same_seed.kernel[...])


def test_checkpoint_stores_the_canonical_orientation(tmp_path):
    save(tmp_path / "ckpt", head(True))
    assert read_orientation(tmp_path / "ckpt") == {
        "kernel": {"orientation": CANONICAL, "in_features": [64], "out_features": [256]}
    }
    restored_as_stored = restore(tmp_path / "ckpt", head(False, seed=3))
    assert restored_as_stored.kernel.shape == (64, 256)


def test_restore_straight_into_a_sharded_target(tmp_path):
    mesh = make_mesh((2, 2), ("data", "model"), "explicit")
    save(tmp_path / "ckpt", head(False))
    target = head(True, seed=5)
    sharding = NamedSharding(mesh, P("model", None))  # [vocab, embed], vocab split over "model"
    target.kernel.set_value(jax.device_put(target.kernel[...], sharding))
    restore(tmp_path / "ckpt", target)
    assert target.kernel[...].sharding == sharding
    np.testing.assert_array_equal(target.kernel[...], head(True).kernel[...])


@pytest.mark.needs_devices(4)
def test_a_flipped_kernel_is_read_with_its_targets_sharding_permuted():
    """Each device reads the part it keeps: the stored [embed, vocab] split on vocab, as the
    [vocab, embed] target is; a 3-d kernel's short spec padded first."""
    mesh = make_mesh((2, 2), ("data", "model"), "explicit")
    target = jax.device_put(jnp.zeros((8, 4)), NamedSharding(mesh, P("model", None)))
    read = _permuted(target, (1, 0))
    assert (read.shape, read.sharding.spec) == ((4, 8), P(None, "model"))
    deep = jax.device_put(jnp.zeros((8, 2, 4)), NamedSharding(mesh, P("model")))
    read = _permuted(deep, (1, 2, 0))
    assert (read.shape, read.sharding.spec) == ((2, 4, 8), P(None, None, "model"))


def test_square_kernel_follows_the_record_not_the_shape(tmp_path):
    original = head(True, emb=32, vocab=32)
    save(tmp_path / "ckpt", original)
    restored = restore(tmp_path / "ckpt", head(False, seed=9, emb=32, vocab=32))
    assert jnp.array_equal(restored.kernel[...], original.kernel[...].T)
    assert not jnp.array_equal(restored.kernel[...], original.kernel[...])


def test_a_tampered_orientation_record_is_obeyed_on_a_square_kernel(tmp_path):
    original = head(False, emb=32, vocab=32)
    save(tmp_path / "ckpt", original)
    record_file = next((tmp_path / "ckpt" / "orientation").glob("*"))
    record = json.loads(record_file.read_text())
    record["kernel"]["orientation"] = TRANSPOSED
    record_file.write_text(json.dumps(record))
    restored = restore(tmp_path / "ckpt", head(False, seed=9, emb=32, vocab=32))
    assert jnp.array_equal(restored.kernel[...], original.kernel[...].T)


def test_an_unknown_orientation_in_the_record_raises(tmp_path):
    save(tmp_path / "ckpt", head(False))
    record_file = next((tmp_path / "ckpt" / "orientation").glob("*"))
    record = json.loads(record_file.read_text())
    record["kernel"]["orientation"] = "vocab_major"
    record_file.write_text(json.dumps(record))
    with pytest.raises(
        OrientationError,
        match=r"kernel\.orientation: Input should be 'in_out' or 'out_in' \(got 'vocab_major'\)",
    ):
        restore(tmp_path / "ckpt", head(True))


def test_missing_record_raises(tmp_path):
    save(tmp_path / "ckpt", head(False))
    for path in (tmp_path / "ckpt" / "orientation").iterdir():
        path.unlink()
    (tmp_path / "ckpt" / "orientation").rmdir()
    with pytest.raises(OrientationError, match="has no orientation record"):
        restore(tmp_path / "ckpt", head(True))


@pytest.mark.parametrize(("emb", "vocab"), [(64, 32), (32, 128), (16, 64)], ids=str)
def test_mismatched_record_raises(tmp_path, emb, vocab):
    """Either feature size differing is refused by name, each alone too."""
    save(tmp_path / "ckpt", head(False, emb=32, vocab=64))
    records = r"records in_features \[32\] and out_features \[64\]"
    with pytest.raises(OrientationError, match=rf"{records}, the model \[{emb}\] and \[{vocab}\]"):
        restore(tmp_path / "ckpt", head(True, emb=emb, vocab=vocab))


def test_a_kernel_without_a_record_raises(tmp_path):
    class TwoHeads(nnx.Module):
        def __init__(self, rngs):
            self.a = DenseGeneral(8, 16, rngs=rngs)
            self.b = DenseGeneral(8, 16, kernel_transposed=True, rngs=rngs)

    save(tmp_path / "ckpt", DenseGeneral(8, 16, rngs=nnx.Rngs(0)))
    with pytest.raises(OrientationError, match="records no orientation for a/kernel"):
        restore(tmp_path / "ckpt", TwoHeads(nnx.Rngs(0)))


def test_kernel_orientations_come_from_the_modules():
    class TwoHeads(nnx.Module):
        def __init__(self, rngs):
            self.encoder = DenseGeneral(8, 16, rngs=rngs)
            self.head = DenseGeneral(16, (2, 4), kernel_transposed=True, rngs=rngs)

    orientations = kernel_orientations(TwoHeads(nnx.Rngs(0)))
    assert orientations == {
        "encoder/kernel": {"orientation": CANONICAL, "in_features": [8], "out_features": [16]},
        "head/kernel": {"orientation": TRANSPOSED, "in_features": [16], "out_features": [2, 4]},
    }
