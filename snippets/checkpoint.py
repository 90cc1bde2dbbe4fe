"""Checkpoints that keep every DenseGeneral kernel canonical, ``[in..., out...]``, on disk.

Save transposes a ``kernel_transposed=True`` kernel to canonical order; restore transposes
it back. Each kernel's stored orientation (read from the modules, not guessed from shapes) and
each array's SHA-256 are recorded and checked on restore. Storage is orbax-checkpoint.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Sequence
from pathlib import Path
from typing import Annotated, Final, Literal, TypedDict

import jax
import jax.numpy as jnp
import numpy as np
import orbax.checkpoint as ocp
from flax import nnx
from flax.traverse_util import flatten_dict, unflatten_dict
from jax.sharding import NamedSharding, PartitionSpec
from pydantic import Field, TypeAdapter, ValidationError

from snippets.lm_head import DenseGeneral
from snippets.support.cli import one_line
from snippets.support.config import PositiveInt

CANONICAL: Final = "in_out"
"""A kernel stored ``[in..., out...]``, as the record names it."""
TRANSPOSED: Final = "out_in"
"""A kernel stored ``[out..., in...]``, as the record names it."""
Features = Annotated[list[PositiveInt], Field(min_length=1)]


class KernelRecord(TypedDict):
    """One kernel's entry in the orientation record: its stored orientation and feature sizes."""

    orientation: Literal["in_out", "out_in"]
    in_features: Features
    out_features: Features


class Checksum(TypedDict):
    shape: list[int]
    dtype: str
    sha256: str


class CheckpointError(ValueError):
    """A checkpoint is incomplete, damaged, or does not fit the model restoring it."""


class OrientationError(CheckpointError):
    """A checkpoint's orientation record is missing or does not fit the model restoring it."""


def kernel_orientations(model: nnx.Module) -> dict[str, KernelRecord]:
    """The orientation of every DenseGeneral kernel in ``model``, keyed by its parameter path."""
    return {
        "/".join(map(str, (*path, "kernel"))): {
            "orientation": TRANSPOSED if module.kernel_transposed else CANONICAL,
            "in_features": list(module.in_features),
            "out_features": list(module.out_features),
        }
        for path, module in nnx.iter_graph(model)
        if isinstance(module, DenseGeneral)
    }


def checksum(array: jax.Array) -> Checksum:
    """An array's shape, dtype and the SHA-256 of its bytes, as the checkpoint records them."""
    host = np.asarray(array)
    digest = hashlib.sha256(host.tobytes()).hexdigest()  # tobytes is C order, whatever the layout
    return {"shape": list(host.shape), "dtype": str(host.dtype), "sha256": digest}


def _flip(record: KernelRecord) -> tuple[int, ...]:
    """The axis permutation that takes a kernel in the record's orientation to the other."""
    n_in, n_out = len(record["in_features"]), len(record["out_features"])
    lead = n_in if record["orientation"] == CANONICAL else n_out
    return (*range(lead, n_in + n_out), *range(lead))


def save(directory: str | Path, model: nnx.Module) -> Path:
    """Write ``model``'s parameters, DenseGeneral kernels canonical, with record and checksums."""
    directory = Path(directory).expanduser().resolve()
    if directory.exists():
        raise CheckpointError(f"{directory} already exists; save into a new directory.")
    params = flatten_dict(nnx.to_pure_dict(nnx.state(model, nnx.Param)), sep="/")
    orientations = kernel_orientations(model)
    for path, record in orientations.items():
        if record["orientation"] == TRANSPOSED:
            params[path] = jnp.transpose(params[path], _flip(record))
            record["orientation"] = CANONICAL
    args = ocp.args.Composite(
        params=ocp.args.StandardSave(unflatten_dict(params, sep="/")),
        orientation=ocp.args.JsonSave(orientations),
        checksums=ocp.args.JsonSave({path: checksum(a) for path, a in params.items()}),
    )
    with ocp.Checkpointer(ocp.CompositeCheckpointHandler()) as checkpointer:
        checkpointer.save(directory, args=args)
    return directory


WHY_RECORDS = {
    "orientation": "its kernels' orientation cannot be known (a square kernel looks the same both ways)",
    "checksums": "damaged data could not be detected",
}


def _read_record[R](directory: Path, item: str, schema: type[R], error: type[CheckpointError]) -> R:
    """One JSON record of the checkpoint, checked against ``schema``."""
    if not directory.is_dir():
        raise FileNotFoundError(f"There is no checkpoint at {directory}: no such directory.")
    if not (directory / item).exists():
        raise error(
            f"Checkpoint {directory} has no {item} record, so {WHY_RECORDS[item]}; re-save it "
            "with snippets.checkpoint.save."
        )
    try:
        with ocp.Checkpointer(ocp.CompositeCheckpointHandler()) as checkpointer:
            args = ocp.args.Composite(**{item: ocp.args.JsonRestore()})
            record = checkpointer.restore(directory, args=args)[item]
        return TypeAdapter(schema).validate_python(record)
    except (json.JSONDecodeError, ValidationError) as cause:
        raise error(
            f"The {item} record of {directory} is malformed: {one_line(cause)}; re-save it."
        ) from cause


def read_orientation(directory: str | Path) -> dict[str, KernelRecord]:
    """The orientation record of a checkpoint; raises if it is missing or malformed."""
    directory = Path(directory).expanduser().resolve()
    return _read_record(directory, "orientation", dict[str, KernelRecord], OrientationError)


def _check_records(stored: dict[str, KernelRecord], target: dict[str, KernelRecord]) -> None:
    """Every target kernel has a record with the same features."""
    for path, want in target.items():
        have = stored.get(path)
        if have is None:
            raise OrientationError(f"The checkpoint records no orientation for {path}.")
        if have | {"orientation": want["orientation"]} != want:
            raise OrientationError(
                f"{path}: the checkpoint records in_features {have['in_features']} and out_features "
                f"{have['out_features']}, the model {want['in_features']} and {want['out_features']}."
            )


def _permuted(target: jax.Array, permutation: Sequence[int]) -> jax.ShapeDtypeStruct:
    """``target``'s shape and named sharding with their axes reordered by ``permutation``."""
    sharding = target.sharding
    if isinstance(sharding, NamedSharding):
        spec = tuple(sharding.spec) + (None,) * (len(permutation) - len(sharding.spec))
        sharding = NamedSharding(sharding.mesh, PartitionSpec(*(spec[a] for a in permutation)))
    shape = tuple(target.shape[a] for a in permutation)
    return jax.ShapeDtypeStruct(shape, target.dtype, sharding=sharding)


def _check_arrays(expected: dict[str, jax.ShapeDtypeStruct], checksums: dict[str, Checksum]):
    """The checkpoint holds exactly the model's parameters, each in the shape and dtype it needs."""
    missing = sorted(expected.keys() - checksums.keys())
    extra = sorted(checksums.keys() - expected.keys())
    if missing or extra:
        problems = [f"it lacks the model's {missing}"] * bool(missing)
        problems += [f"it holds {extra}, which the model does not have"] * bool(extra)
        raise CheckpointError(f"The checkpoint does not fit the model: {' and '.join(problems)}.")
    for path, want in expected.items():
        have = checksums[path]
        if tuple(have["shape"]) != want.shape:
            raise CheckpointError(
                f"{path}: the checkpoint holds shape {tuple(have['shape'])} but the model needs "
                f"{want.shape}, as the orientation record stores it: record and data disagree."
            )
        if have["dtype"] != str(want.dtype):
            raise CheckpointError(
                f"{path}: the checkpoint holds {have['dtype']} but the model has {want.dtype}."
            )


def restore(directory: str | Path, model: nnx.Module) -> nnx.Module:
    """Load a checkpoint into ``model`` in place: each array is read into the target's sharding
    (axes permuted for a flipped kernel) and checked against its SHA-256, then a jitted transpose
    gives each kernel its module's orientation and sharding."""
    directory = Path(directory).expanduser().resolve()
    orientations, recorded = kernel_orientations(model), read_orientation(directory)
    if not (directory / "params").is_dir():
        raise CheckpointError(f"Checkpoint {directory} has no params/ folder: it holds no arrays.")
    _check_records(recorded, orientations)
    checksums = _read_record(directory, "checksums", dict[str, Checksum], CheckpointError)
    state = nnx.state(model, nnx.Param)
    targets = flatten_dict(nnx.to_pure_dict(state), sep="/")
    flips = {  # kernel path -> the permutation from the model's orientation to the stored one
        path: _flip(record)
        for path, record in orientations.items()
        if recorded[path]["orientation"] != record["orientation"]
    }
    expected = {path: _permuted(t, flips.get(path, range(t.ndim))) for path, t in targets.items()}
    _check_arrays(expected, checksums)
    try:
        with ocp.Checkpointer(ocp.CompositeCheckpointHandler()) as checkpointer:
            stored = ocp.args.StandardRestore(unflatten_dict(expected, sep="/"))
            args = ocp.args.Composite(params=stored)
            arrays = flatten_dict(checkpointer.restore(directory, args=args).params, sep="/")
    except Exception as error:
        cause = one_line(error)[:200] or type(error).__name__
        raise CheckpointError(
            f"The arrays of checkpoint {directory} cannot be read; the files are damaged or "
            f"incomplete. Restore from an intact copy. (orbax: {cause})"
        ) from error
    for path, array in arrays.items():
        if checksum(array)["sha256"] != checksums[path]["sha256"]:
            raise CheckpointError(
                f"{path}: the data in {directory} do not match the checksum recorded at save; "
                "the checkpoint is damaged. Restore from an intact copy."
            )
    for path, permutation in flips.items():
        flip = jax.jit(jnp.transpose, static_argnums=1, out_shardings=targets[path].sharding)
        arrays[path] = flip(arrays[path], tuple(np.argsort(permutation).tolist()))
    nnx.replace_by_pure_dict(state, unflatten_dict(arrays, sep="/"))
    nnx.update(model, state)
    return model
