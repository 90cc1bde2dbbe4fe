"""Checkpoints that keep every DenseGeneral kernel canonical, ``[in..., out...]``, on disk.

Saving transposes a ``kernel_transposed=True`` kernel back to canonical order;
restoring transposes it again for a model that stores it flipped. Which kernels
to transpose comes from the modules themselves (not from parameter names), and
the stored layout of each kernel is recorded in the checkpoint and checked on
restore, so a square kernel is never guessed and nothing restores silently in
the wrong orientation. Storage is orbax-checkpoint.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
import orbax.checkpoint as ocp
from flax import nnx
from jax.sharding import NamedSharding, PartitionSpec

from snippets.lm_head import DenseGeneral, stored_order

CANONICAL = "in_out"
TRANSPOSED = "out_in"
"""The two kernel layouts a record can name: ``[in..., out...]`` and ``[out..., in...]``."""


class OrientationError(ValueError):
    """A checkpoint's orientation record is missing or does not fit the model restoring it."""


def kernel_layouts(model: nnx.Module) -> dict[str, dict[str, Any]]:
    """The layout of every DenseGeneral kernel in ``model``, keyed by the kernel's parameter path."""
    return {
        "/".join(map(str, (*path, "kernel"))): {
            "layout": TRANSPOSED if module.kernel_transposed else CANONICAL,
            "in_features": list(module.in_features),
            "out_features": list(module.out_features),
        }
        for path, module in nnx.iter_graph(model)
        if isinstance(module, DenseGeneral)
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


def _set(tree: dict, path: str, value: Any) -> None:
    *parents, leaf = path.split("/")
    for key in parents:
        tree = tree[key]
    tree[leaf] = value


def save(directory: str | Path, model: nnx.Module) -> Path:
    """Write ``model``'s parameters with every DenseGeneral kernel in canonical order, plus the record."""
    params = nnx.to_pure_dict(nnx.state(model, nnx.Param))
    layouts = kernel_layouts(model)
    for path, record in layouts.items():
        _set(
            params,
            path,
            jnp.transpose(_get(params, path), _permutation(record, record["layout"], CANONICAL)),
        )
        record["layout"] = CANONICAL
    directory = Path(directory).resolve()
    with ocp.Checkpointer(ocp.CompositeCheckpointHandler()) as checkpointer:
        checkpointer.save(
            directory,
            args=ocp.args.Composite(
                params=ocp.args.StandardSave(params), orientation=ocp.args.JsonSave(layouts)
            ),
        )
    return directory


def read_orientation(directory: str | Path) -> dict[str, dict[str, Any]]:
    """The orientation record of a checkpoint; raises if it has none."""
    directory = Path(directory).resolve()
    if not (directory / "orientation").exists():
        raise OrientationError(
            f"Checkpoint {directory} has no kernel orientation record, so the layout of its "
            "kernels cannot be known (a square kernel looks the same both ways). Re-save it with "
            "snippets.checkpoint.save, or write the record for each DenseGeneral kernel."
        )
    with ocp.Checkpointer(ocp.CompositeCheckpointHandler()) as checkpointer:
        return dict(
            checkpointer.restore(
                directory, args=ocp.args.Composite(orientation=ocp.args.JsonRestore())
            ).orientation
        )


def _check(stored: dict[str, dict], target: dict[str, dict], directory: Path) -> None:
    """Every target kernel has a record with the same features and a known layout."""
    for path, want in target.items():
        have = stored.get(path)
        if have is None:
            raise OrientationError(f"Checkpoint {directory} records no orientation for {path}.")
        if have.get("layout") not in (CANONICAL, TRANSPOSED):
            raise OrientationError(
                f"{path}: unknown stored layout {have.get('layout')!r} in {directory}."
            )
        if (have["in_features"], have["out_features"]) != (
            want["in_features"],
            want["out_features"],
        ):
            raise OrientationError(
                f"{path}: the checkpoint records in_features {have['in_features']} and out_features "
                f"{have['out_features']}, the model has {want['in_features']} and {want['out_features']}."
            )


def _permuted(target: jax.ShapeDtypeStruct, permutation: tuple[int, ...]) -> jax.ShapeDtypeStruct:
    """``target``'s shape and named sharding with their axes reordered by ``permutation``."""
    sharding = target.sharding
    if isinstance(sharding, NamedSharding):
        spec = tuple(sharding.spec) + (None,) * (len(permutation) - len(sharding.spec))
        sharding = NamedSharding(sharding.mesh, PartitionSpec(*(spec[a] for a in permutation)))
    shape = tuple(target.shape[a] for a in permutation)
    return jax.ShapeDtypeStruct(shape, target.dtype, sharding=sharding)


def restore(directory: str | Path, model: nnx.Module) -> nnx.Module:
    """Load a checkpoint into ``model`` in place, transposing kernels to the layout each module stores.

    A kernel stored in the other layout is read straight into the target
    sharding, permuted to match, then transposed on the devices: each device
    reads and transposes only its own shard.
    """
    directory = Path(directory).resolve()
    target_layouts = kernel_layouts(model)
    stored_layouts = read_orientation(directory)
    _check(stored_layouts, target_layouts, directory)
    state = nnx.state(model, nnx.Param)
    abstract = jax.tree.map(
        lambda x: jax.ShapeDtypeStruct(x.shape, x.dtype, sharding=x.sharding),
        nnx.to_pure_dict(state),
    )
    flips = {}
    for path, want in target_layouts.items():
        source = stored_layouts[path]["layout"]
        if source != want["layout"]:
            target = _get(abstract, path)
            _set(abstract, path, _permuted(target, _permutation(want, want["layout"], source)))
            flips[path] = (_permutation(want, source, want["layout"]), target.sharding)
    with ocp.Checkpointer(ocp.CompositeCheckpointHandler()) as checkpointer:
        restored = checkpointer.restore(
            directory, args=ocp.args.Composite(params=ocp.args.StandardRestore(abstract))
        ).params
    for path, (permutation, sharding) in flips.items():
        flip = jax.jit(lambda a, p=permutation: jnp.transpose(a, p), out_shardings=sharding)
        _set(restored, path, flip(_get(restored, path)))
    nnx.replace_by_pure_dict(state, restored)
    nnx.update(model, state)
    return model
