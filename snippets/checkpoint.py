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
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
import orbax.checkpoint as ocp
from flax import nnx
from jax.sharding import NamedSharding, PartitionSpec

from snippets.cli import run_module
from snippets.lm_head import DenseGeneral, stored_order

CANONICAL = "in_out"
TRANSPOSED = "out_in"
"""The two kernel layouts a record can name: ``[in..., out...]`` and ``[out..., in...]``."""


class CheckpointError(ValueError):
    """A checkpoint is incomplete, damaged, or does not fit the model restoring it."""


class OrientationError(CheckpointError):
    """A checkpoint's orientation record is missing or does not fit the model restoring it."""


def kernel_layouts(model: nnx.Module) -> dict[str, dict[str, Any]]:
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


def checksum(array: jax.Array) -> dict[str, Any]:
    """An array's shape, dtype and the SHA-256 of its bytes, as the checkpoint records them."""
    host = np.ascontiguousarray(np.asarray(array))
    return {
        "shape": list(host.shape),
        "dtype": str(host.dtype),
        "sha256": hashlib.sha256(host.tobytes()).hexdigest(),
    }


def _permutation(record: dict[str, Any], source: str, target: str) -> tuple[int, ...]:
    """The axis permutation that takes a kernel stored in ``source`` layout to ``target`` layout."""
    n_in, n_out = len(record["in_features"]), len(record["out_features"])
    ins, outs = tuple(range(n_in)), tuple(range(n_in, n_in + n_out))
    to_source = stored_order(ins, outs, source == TRANSPOSED)
    to_target = stored_order(ins, outs, target == TRANSPOSED)
    from_source = np.argsort(to_source)  # source -> canonical
    return tuple(int(from_source[axis]) for axis in to_target)


def _get(tree: dict, path: str) -> Any:
    for key in path.split("/"):
        tree = tree[key]
    return tree


def _set(tree: dict, path: str, value: Any, make_parents: bool = False) -> None:
    *parents, leaf = path.split("/")
    for key in parents:
        tree = tree.setdefault(key, {}) if make_parents else tree[key]
    tree[leaf] = value


def _flat(tree: dict, prefix: str = "") -> dict[str, Any]:
    """A nested dict's leaves keyed by their ``a/b/c`` paths."""
    leaves: dict[str, Any] = {}
    for key, value in tree.items():
        path = f"{prefix}{key}"
        leaves |= _flat(value, f"{path}/") if isinstance(value, dict) else {path: value}
    return leaves


def save(directory: str | Path, model: nnx.Module) -> Path:
    """Write ``model``'s parameters, DenseGeneral kernels canonical, with record and checksums."""
    directory = Path(directory).expanduser().resolve()
    if directory.exists():
        raise CheckpointError(
            f"{directory} already exists; save into a new directory (a checkpoint is never "
            "overwritten)."
        )
    params = nnx.to_pure_dict(nnx.state(model, nnx.Param))
    layouts = kernel_layouts(model)
    for path, record in layouts.items():
        _set(
            params,
            path,
            jnp.transpose(_get(params, path), _permutation(record, record["layout"], CANONICAL)),
        )
        record["layout"] = CANONICAL
    checksums = {path: checksum(array) for path, array in _flat(params).items()}
    with ocp.Checkpointer(ocp.CompositeCheckpointHandler()) as checkpointer:
        checkpointer.save(
            directory,
            args=ocp.args.Composite(
                params=ocp.args.StandardSave(params),
                orientation=ocp.args.JsonSave(layouts),
                checksums=ocp.args.JsonSave(checksums),
            ),
        )
    return directory


def _checkpoint_dir(directory: str | Path) -> Path:
    """``directory`` with ``~`` expanded, or FileNotFoundError if it is not there."""
    directory = Path(directory).expanduser().resolve()
    if not directory.is_dir():
        raise FileNotFoundError(f"There is no checkpoint at {directory}: no such directory.")
    return directory


def _read_json(directory: Path, item: str) -> Any:
    """One JSON item of the checkpoint, or CheckpointError if it cannot be read."""
    try:
        with ocp.Checkpointer(ocp.CompositeCheckpointHandler()) as checkpointer:
            restored = checkpointer.restore(
                directory, args=ocp.args.Composite(**{item: ocp.args.JsonRestore()})
            )
    except json.JSONDecodeError as error:
        raise CheckpointError(
            f"The {item} record of {directory} is not valid JSON ({error}); re-save the checkpoint."
        ) from error
    return restored[item]


def read_orientation(directory: str | Path) -> dict[str, dict[str, Any]]:
    """The orientation record of a checkpoint; raises if it is missing or malformed."""
    directory = _checkpoint_dir(directory)
    if not (directory / "orientation").exists():
        raise OrientationError(
            f"Checkpoint {directory} has no kernel orientation record, so the layout of its "
            "kernels cannot be known (a square kernel looks the same both ways). Re-save it with "
            "snippets.checkpoint.save, or write the record for each DenseGeneral kernel."
        )
    record = _read_json(directory, "orientation")
    if not isinstance(record, dict):
        raise OrientationError(f"The orientation record of {directory} is not a JSON object.")
    for path, entry in record.items():
        _check_record_entry(path, entry, directory)
    return dict(record)


def _check_record_entry(path: str, entry: Any, directory: Path) -> None:
    """One kernel's record has a known layout and lists of positive feature sizes."""
    if not isinstance(entry, dict):
        raise OrientationError(f"{path}: the orientation record in {directory} is not an object.")
    if entry.get("layout") not in (CANONICAL, TRANSPOSED):
        raise OrientationError(
            f"{path}: unknown stored layout {entry.get('layout')!r} in {directory}; "
            f"expected {CANONICAL!r} or {TRANSPOSED!r}."
        )
    for key in ("in_features", "out_features"):
        sizes = entry.get(key)
        if (
            not isinstance(sizes, list)
            or not sizes
            or not all(isinstance(s, int) and not isinstance(s, bool) and s >= 1 for s in sizes)
        ):
            raise OrientationError(
                f"{path}: the orientation record in {directory} has {key}={sizes!r}; expected a "
                "non-empty list of positive sizes."
            )


def _check(stored: dict[str, dict], target: dict[str, dict], directory: Path) -> None:
    """Every target kernel has a record with the same features."""
    for path, want in target.items():
        have = stored.get(path)
        if have is None:
            raise OrientationError(f"Checkpoint {directory} records no orientation for {path}.")
        if (have["in_features"], have["out_features"]) != (
            want["in_features"],
            want["out_features"],
        ):
            raise OrientationError(
                f"{path}: the checkpoint records in_features {have['in_features']} and "
                f"out_features {have['out_features']}, the model has {want['in_features']} and "
                f"{want['out_features']}."
            )


def _read_checksums(directory: Path) -> dict[str, dict[str, Any]]:
    """The checksum record of a checkpoint: shape, dtype and SHA-256 per array path."""
    if not (directory / "checksums").exists():
        raise CheckpointError(
            f"Checkpoint {directory} has no checksum record, so damaged data could not be "
            "detected; re-save it with snippets.checkpoint.save."
        )
    record = _read_json(directory, "checksums")
    if not isinstance(record, dict) or not all(
        isinstance(entry, dict) and {"shape", "dtype", "sha256"} <= entry.keys()
        for entry in record.values()
    ):
        raise CheckpointError(
            f"The checksum record of {directory} is malformed: expected shape, dtype and sha256 "
            "for every array; re-save the checkpoint."
        )
    return record


def _permuted(target: jax.ShapeDtypeStruct, permutation: tuple[int, ...]) -> jax.ShapeDtypeStruct:
    """``target``'s shape and named sharding with their axes reordered by ``permutation``."""
    sharding = target.sharding
    if isinstance(sharding, NamedSharding):
        spec = tuple(sharding.spec) + (None,) * (len(permutation) - len(sharding.spec))
        sharding = NamedSharding(sharding.mesh, PartitionSpec(*(spec[a] for a in permutation)))
    shape = tuple(target.shape[a] for a in permutation)
    return jax.ShapeDtypeStruct(shape, target.dtype, sharding=sharding)


def _check_arrays(
    expected: dict[str, jax.ShapeDtypeStruct],
    checksums: dict[str, dict[str, Any]],
    directory: Path,
    allow_cast: bool,
) -> None:
    """The checkpoint holds exactly the model's parameters, each in the shape and dtype it needs."""
    missing = sorted(expected.keys() - checksums.keys())
    extra = sorted(checksums.keys() - expected.keys())
    if missing or extra:
        problems = [f"it lacks the model's {missing}"] * bool(missing)
        problems += [f"it holds {extra}, which the model does not have"] * bool(extra)
        raise CheckpointError(
            f"Checkpoint {directory} does not fit the model: {' and '.join(problems)}. "
            "Restore into a model with the parameters that were saved."
        )
    for path, want in expected.items():
        have = checksums[path]
        if tuple(have["shape"]) != tuple(want.shape):
            raise CheckpointError(
                f"{path}: the checkpoint holds shape {tuple(have['shape'])} but the model needs "
                f"{tuple(want.shape)} in the stored layout (for a kernel, as its orientation "
                "record says); the record or the model does not match the data."
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
    _check(stored_layouts, target_layouts, directory)
    checksums = _read_checksums(directory)
    state = nnx.state(model, nnx.Param)
    targets = _flat(
        jax.tree.map(
            lambda x: jax.ShapeDtypeStruct(x.shape, x.dtype, sharding=x.sharding),
            nnx.to_pure_dict(state),
        )
    )
    flips = {}
    for path, want in target_layouts.items():
        source = stored_layouts[path]["layout"]
        if source != want["layout"]:
            target = targets[path]
            targets[path] = _permuted(target, _permutation(want, want["layout"], source))
            flips[path] = (_permutation(want, source, want["layout"]), target.sharding)
    _check_arrays(targets, checksums, directory, allow_cast)
    abstract: dict = {}
    for path, target in targets.items():  # read as stored: the checksums cover those bytes
        stored = jax.ShapeDtypeStruct(
            target.shape, jnp.dtype(checksums[path]["dtype"]), sharding=target.sharding
        )
        _set(abstract, path, stored, make_parents=True)
    try:
        with ocp.Checkpointer(ocp.CompositeCheckpointHandler()) as checkpointer:
            restored = checkpointer.restore(
                directory, args=ocp.args.Composite(params=ocp.args.StandardRestore(abstract))
            ).params
    except Exception as error:
        cause = " ".join(str(error).split())[:200] or type(error).__name__
        raise CheckpointError(
            f"The arrays of checkpoint {directory} cannot be read; the files are damaged or "
            f"incomplete. Restore from an intact copy. (orbax: {cause})"
        ) from error
    for path, array in _flat(restored).items():
        if checksum(array)["sha256"] != checksums[path]["sha256"]:
            raise CheckpointError(
                f"{path}: the data in {directory} do not match the checksum recorded at save; "
                "the checkpoint is damaged. Restore from an intact copy."
            )
    for path, (permutation, sharding) in flips.items():
        flip = jax.jit(lambda a, p=permutation: jnp.transpose(a, p), out_shardings=sharding)
        _set(restored, path, flip(_get(restored, path)))
    for path, target in targets.items():
        if _get(restored, path).dtype != target.dtype:  # allow_cast=True was passed
            _set(restored, path, _get(restored, path).astype(target.dtype))
    nnx.replace_by_pure_dict(state, restored)
    nnx.update(model, state)
    return model


if __name__ == "__main__":
    run_module()
