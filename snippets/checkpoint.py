"""Checkpoints that keep every DenseGeneral kernel canonical, ``[in..., out...]``, on disk.

Saving transposes a ``kernel_transposed=True`` kernel back to canonical order;
restoring transposes it again for a model that stores it flipped. Which kernels
to transpose comes from the modules themselves (not from parameter names), and
the stored layout of each kernel is recorded in the checkpoint and checked on
restore, so a square kernel is never guessed and nothing restores silently in
the wrong orientation. Every array's SHA-256 is recorded at save and verified
at restore, so damaged data is refused, never loaded. Storage is orbax-checkpoint.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Annotated, Literal, TypedDict

import jax
import jax.numpy as jnp
import numpy as np
import orbax.checkpoint as ocp
from flax import nnx
from flax.traverse_util import flatten_dict, unflatten_dict
from jax.sharding import NamedSharding, PartitionSpec
from pydantic import Field, TypeAdapter, ValidationError

from snippets.cli import PositiveInt, one_line, run_module
from snippets.lm_head import DenseGeneral, stored_order

CANONICAL = "in_out"
TRANSPOSED = "out_in"
"""The two kernel layouts a record can name: ``[in..., out...]`` and ``[out..., in...]``."""
Features = Annotated[list[PositiveInt], Field(min_length=1)]


class KernelRecord(TypedDict):
    """One kernel's entry in the orientation record: its stored layout and feature sizes."""

    layout: Literal["in_out", "out_in"]
    in_features: Features
    out_features: Features


class Checksum(TypedDict):
    """One array's entry in the checksum record."""

    shape: list[int]
    dtype: str
    sha256: str


class CheckpointError(ValueError):
    """A checkpoint is incomplete, damaged, or does not fit the model restoring it."""


class OrientationError(CheckpointError):
    """A checkpoint's orientation record is missing or does not fit the model restoring it."""


def kernel_layouts(model: nnx.Module) -> dict[str, KernelRecord]:
    """The layout of every DenseGeneral kernel in ``model``, keyed by its parameter path."""
    return {
        "/".join(map(str, (*path, "kernel"))): {
            "layout": TRANSPOSED if module.kernel_transposed else CANONICAL,
            "in_features": list(module.in_features),
            "out_features": list(module.out_features),
        }
        for path, module in nnx.iter_graph(model)
        if isinstance(module, DenseGeneral)
    }


def checksum(array: jax.Array) -> Checksum:
    """An array's shape, dtype and the SHA-256 of its bytes, as the checkpoint records them."""
    host = np.ascontiguousarray(np.asarray(array))
    return {
        "shape": list(host.shape),
        "dtype": str(host.dtype),
        "sha256": hashlib.sha256(host.tobytes()).hexdigest(),
    }


def _permutation(record: KernelRecord, source: str, target: str) -> tuple[int, ...]:
    """The axis permutation that takes a kernel stored in ``source`` layout to ``target`` layout."""
    n_in, n_out = len(record["in_features"]), len(record["out_features"])
    ins, outs = tuple(range(n_in)), tuple(range(n_in, n_in + n_out))
    from_source = np.argsort(stored_order(ins, outs, source == TRANSPOSED))  # -> canonical
    return tuple(int(from_source[axis]) for axis in stored_order(ins, outs, target == TRANSPOSED))


def save(directory: str | Path, model: nnx.Module) -> Path:
    """Write ``model``'s parameters, DenseGeneral kernels canonical, with record and checksums."""
    directory = Path(directory).expanduser().resolve()
    if directory.exists():
        raise CheckpointError(
            f"{directory} already exists; save into a new directory (a checkpoint is never "
            "overwritten)."
        )
    params = flatten_dict(nnx.to_pure_dict(nnx.state(model, nnx.Param)), sep="/")
    layouts = kernel_layouts(model)
    for path, record in layouts.items():
        params[path] = jnp.transpose(
            params[path], _permutation(record, record["layout"], CANONICAL)
        )
        record["layout"] = CANONICAL
    with ocp.Checkpointer(ocp.CompositeCheckpointHandler()) as checkpointer:
        checkpointer.save(
            directory,
            args=ocp.args.Composite(
                params=ocp.args.StandardSave(unflatten_dict(params, sep="/")),
                orientation=ocp.args.JsonSave(layouts),
                checksums=ocp.args.JsonSave({path: checksum(a) for path, a in params.items()}),
            ),
        )
    return directory


def _read_record(directory: Path, item: str, schema: type, error: type[CheckpointError]) -> dict:
    """One JSON record of the checkpoint, each entry checked against ``schema``."""
    try:
        with ocp.Checkpointer(ocp.CompositeCheckpointHandler()) as checkpointer:
            record = checkpointer.restore(
                directory, args=ocp.args.Composite(**{item: ocp.args.JsonRestore()})
            )[item]
    except json.JSONDecodeError as cause:
        raise error(
            f"The {item} record of {directory} is not valid JSON ({cause}); re-save the checkpoint."
        ) from cause
    try:
        return TypeAdapter(dict[str, schema]).validate_python(record)
    except ValidationError as cause:
        raise error(
            f"The {item} record of {directory} is malformed: {one_line(cause)}; re-save the "
            "checkpoint."
        ) from cause


def read_orientation(directory: str | Path) -> dict[str, KernelRecord]:
    """The orientation record of a checkpoint; raises if it is missing or malformed."""
    directory = _checkpoint_dir(directory)
    if not (directory / "orientation").exists():
        raise OrientationError(
            f"Checkpoint {directory} has no kernel orientation record, so the layout of its "
            "kernels cannot be known (a square kernel looks the same both ways). Re-save it with "
            "snippets.checkpoint.save, or write the record for each DenseGeneral kernel."
        )
    return _read_record(directory, "orientation", KernelRecord, OrientationError)


def _checkpoint_dir(directory: str | Path) -> Path:
    """``directory`` with ``~`` expanded, or FileNotFoundError if it is not there."""
    directory = Path(directory).expanduser().resolve()
    if not directory.is_dir():
        raise FileNotFoundError(f"There is no checkpoint at {directory}: no such directory.")
    return directory


def _check_records(stored: dict[str, KernelRecord], target: dict[str, KernelRecord]) -> None:
    """Every target kernel has a record with the same features."""
    for path, want in target.items():
        have = stored.get(path)
        if have is None:
            raise OrientationError(f"The checkpoint records no orientation for {path}.")
        if have | {"layout": want["layout"]} != want:
            raise OrientationError(
                f"{path}: the checkpoint records in_features {have['in_features']} and "
                f"out_features {have['out_features']}, the model has {want['in_features']} and "
                f"{want['out_features']}."
            )


def _permuted(target: jax.Array, permutation: tuple[int, ...]) -> jax.ShapeDtypeStruct:
    """``target``'s shape and named sharding with their axes reordered by ``permutation``."""
    sharding = target.sharding
    if isinstance(sharding, NamedSharding):
        spec = tuple(sharding.spec) + (None,) * (len(permutation) - len(sharding.spec))
        sharding = NamedSharding(sharding.mesh, PartitionSpec(*(spec[a] for a in permutation)))
    shape = tuple(target.shape[a] for a in permutation)
    return jax.ShapeDtypeStruct(shape, target.dtype, sharding=sharding)


def _check_arrays(
    expected: dict[str, jax.Array | jax.ShapeDtypeStruct],
    checksums: dict[str, Checksum],
    allow_cast: bool,
) -> None:
    """The checkpoint holds exactly the model's parameters, each in the shape and dtype it needs."""
    missing = sorted(expected.keys() - checksums.keys())
    extra = sorted(checksums.keys() - expected.keys())
    if missing or extra:
        problems = [f"it lacks the model's {missing}"] * bool(missing)
        problems += [f"it holds {extra}, which the model does not have"] * bool(extra)
        raise CheckpointError(
            f"The checkpoint does not fit the model: {' and '.join(problems)}. "
            "Restore into a model with the parameters that were saved."
        )
    for path, want in expected.items():
        have = checksums[path]
        if tuple(have["shape"]) != want.shape:
            raise CheckpointError(
                f"{path}: the checkpoint holds shape {tuple(have['shape'])} but the model needs "
                f"{want.shape} in the stored layout (for a kernel, as its orientation record "
                "says); the record or the model does not match the data."
            )
        if have["dtype"] != str(want.dtype) and not allow_cast:
            raise CheckpointError(
                f"{path}: the checkpoint holds {have['dtype']} but the model has {want.dtype}; "
                "pass allow_cast=True to cast on restore."
            )


def restore(directory: str | Path, model: nnx.Module, *, allow_cast: bool = False) -> nnx.Module:
    """Load a checkpoint into ``model`` in place, each kernel transposed to its module's layout.

    A kernel stored in the other layout is read into the target sharding,
    permuted to match, then transposed on the devices by a jitted transpose
    whose output sharding is the target's. Every array is checked against the
    checksum recorded at save (read whole on the host); a dtype differs from
    the model's only with ``allow_cast=True``.
    """
    directory = _checkpoint_dir(directory)
    if not (directory / "params").is_dir():
        raise CheckpointError(f"Checkpoint {directory} has no params/ folder: it holds no arrays.")
    target_layouts = kernel_layouts(model)
    stored_layouts = read_orientation(directory)
    _check_records(stored_layouts, target_layouts)
    if not (directory / "checksums").exists():
        raise CheckpointError(
            f"Checkpoint {directory} has no checksum record, so damaged data could not be "
            "detected; re-save it with snippets.checkpoint.save."
        )
    checksums = _read_record(directory, "checksums", Checksum, CheckpointError)
    state = nnx.state(model, nnx.Param)
    targets = flatten_dict(nnx.to_pure_dict(state), sep="/")  # arrays, or their permuted shapes
    flips = {}
    for path, want in target_layouts.items():
        source = stored_layouts[path]["layout"]
        if source != want["layout"]:
            flips[path] = (_permutation(want, source, want["layout"]), targets[path].sharding)
            targets[path] = _permuted(targets[path], _permutation(want, want["layout"], source))
    _check_arrays(targets, checksums, allow_cast)
    stored = {  # read as stored: the checksums cover those bytes
        path: jax.ShapeDtypeStruct(
            t.shape, jnp.dtype(checksums[path]["dtype"]), sharding=t.sharding
        )
        for path, t in targets.items()
    }
    try:
        with ocp.Checkpointer(ocp.CompositeCheckpointHandler()) as checkpointer:
            restored = checkpointer.restore(
                directory,
                args=ocp.args.Composite(
                    params=ocp.args.StandardRestore(unflatten_dict(stored, sep="/"))
                ),
            ).params
    except Exception as error:
        cause = " ".join(str(error).split())[:200] or type(error).__name__
        raise CheckpointError(
            f"The arrays of checkpoint {directory} cannot be read; the files are damaged or "
            f"incomplete. Restore from an intact copy. (orbax: {cause})"
        ) from error
    arrays = flatten_dict(restored, sep="/")
    for path, array in arrays.items():
        if checksum(array)["sha256"] != checksums[path]["sha256"]:
            raise CheckpointError(
                f"{path}: the data in {directory} do not match the checksum recorded at save; "
                "the checkpoint is damaged. Restore from an intact copy."
            )
    for path, (permutation, sharding) in flips.items():
        flip = jax.jit(lambda a, p=permutation: jnp.transpose(a, p), out_shardings=sharding)
        arrays[path] = flip(arrays[path])
    for path, target in targets.items():
        if arrays[path].dtype != target.dtype:  # allow_cast=True was passed
            arrays[path] = arrays[path].astype(target.dtype)
    nnx.replace_by_pure_dict(state, unflatten_dict(arrays, sep="/"))
    nnx.update(model, state)
    return model


if __name__ == "__main__":
    run_module()
