"""Checkpoints that are missing, damaged or do not fit the model are refused with a clear error."""

import json
import shutil

import jax.numpy as jnp
import pytest
from flax import nnx

from snippets.checkpoint import (
    TRANSPOSED,
    CheckpointError,
    OrientationError,
    checksum,
    restore,
    save,
)
from snippets.lm_head import DenseGeneral


def head(seed=0, use_bias=True, param_dtype=jnp.float32, transposed=False):
    return DenseGeneral(
        64,
        256,
        use_bias=use_bias,
        param_dtype=param_dtype,
        kernel_transposed=transposed,
        rngs=nnx.Rngs(seed),
    )


@pytest.fixture
def saved(tmp_path):
    """A fresh checkpoint of ``head()``."""
    return save(tmp_path / "ckpt", head())


def edit_record(directory, edit):
    """Rewrite the orientation record's JSON text with ``edit``."""
    record_file = directory / "orientation" / "metadata"
    record_file.write_text(edit(record_file.read_text()))


def largest_file(directory):
    return max((p for p in directory.rglob("*") if p.is_file()), key=lambda p: p.stat().st_size)


def test_a_missing_directory_says_so(tmp_path):
    with pytest.raises(FileNotFoundError, match=r"no checkpoint at .*nowhere: no such directory"):
        restore(tmp_path / "nowhere", head())


def test_a_record_that_is_not_json_is_refused(saved):
    edit_record(saved, lambda text: text[: len(text) // 2])
    with pytest.raises(CheckpointError, match=r"orientation record of .* is malformed: "):
        restore(saved, head())


@pytest.mark.parametrize("key", ["in_features", "out_features"])
def test_a_record_without_features_is_refused(saved, key):
    def drop(text):
        record = json.loads(text)
        del record["kernel"][key]
        return json.dumps(record)

    edit_record(saved, drop)
    with pytest.raises(
        OrientationError, match=rf"record of .* is malformed: kernel\.{key}: Field required"
    ):
        restore(saved, head())


def test_a_flipped_orientation_on_a_rectangular_kernel_names_the_record(saved):
    edit_record(saved, lambda text: text.replace('"in_out"', f'"{TRANSPOSED}"'))
    with pytest.raises(
        CheckpointError,
        match=r"kernel: the checkpoint holds shape \(64, 256\) but the model needs \(256, 64\).*"
        "orientation record",
    ):
        restore(saved, head())


def test_a_deleted_params_folder_is_refused(saved):
    shutil.rmtree(saved / "params")
    with pytest.raises(CheckpointError, match="has no params/ folder"):
        restore(saved, head())


def test_a_missing_checksum_record_is_refused(saved):
    shutil.rmtree(saved / "checksums")
    with pytest.raises(CheckpointError, match="has no checksums record"):
        restore(saved, head())


def test_truncated_array_files_are_refused(saved):
    for path in (saved / "params").rglob("*"):
        if path.is_file() and path.parent.name == "d":
            path.write_bytes(path.read_bytes()[: path.stat().st_size // 2])
    with pytest.raises(CheckpointError, match="cannot be read; the files are damaged"):
        restore(saved, head())


def test_flipped_bytes_in_the_array_data_are_refused(saved):
    data_file = largest_file(saved)
    data = bytearray(data_file.read_bytes())
    middle = len(data) // 2
    data[middle : middle + 64] = bytes(b ^ 0xFF for b in data[middle : middle + 64])
    data_file.write_bytes(bytes(data))
    with pytest.raises(CheckpointError, match=r"kernel: the data in .* do not match the checksum"):
        restore(saved, head())


def test_a_parameter_the_model_lacks_is_refused(saved):
    with pytest.raises(CheckpointError, match=r"it holds \['bias'\], which the model does not"):
        restore(saved, head(use_bias=False))


def test_a_parameter_the_checkpoint_lacks_is_refused(tmp_path):
    directory = save(tmp_path / "ckpt", head(use_bias=False))
    with pytest.raises(CheckpointError, match=r"it lacks the model's \['bias'\]"):
        restore(directory, head())


def test_a_bias_of_another_shape_is_refused(saved):
    def widen_bias(text):
        record = json.loads(text)
        record["bias"]["shape"] = [128]
        return json.dumps(record)

    checksum_file = saved / "checksums" / "metadata"
    checksum_file.write_text(widen_bias(checksum_file.read_text()))
    with pytest.raises(CheckpointError, match=r"bias: the checkpoint holds shape \(128,\)"):
        restore(saved, head())


def test_a_dtype_change_is_refused(saved):
    with pytest.raises(CheckpointError, match="holds float32 but the model has bfloat16"):
        restore(saved, head(param_dtype=jnp.bfloat16))


def test_the_checksums_cover_every_array_as_saved(saved):
    record = json.loads((saved / "checksums" / "metadata").read_text())
    original = head()
    assert record == {
        "kernel": checksum(original.kernel[...]),
        "bias": checksum(original.bias[...]),
    }


def test_a_transposed_kernel_is_checksummed_in_canonical_order(tmp_path):
    flipped = head(transposed=True)
    directory = save(tmp_path / "ckpt", flipped)
    record = json.loads((directory / "checksums" / "metadata").read_text())
    assert record["kernel"] == checksum(flipped.kernel[...].T)


def test_an_existing_directory_is_never_overwritten(saved):
    with pytest.raises(CheckpointError, match="already exists; save into a new directory"):
        save(saved, head())


def test_a_home_relative_path_is_expanded(tmp_path, monkeypatch):
    monkeypatch.setenv("HOME", str(tmp_path))
    directory = save("~/ckpt", head())
    assert directory == tmp_path / "ckpt"
    assert restore("~/ckpt", head(seed=5)).kernel.shape == (64, 256)
