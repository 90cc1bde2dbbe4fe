"""Shapes as HLO text writes them: arrays, bytes, layouts, element counts."""

from __future__ import annotations

import functools
import math
import re

from find_barriers._program import Instruction

DTYPE_BYTES = {
    "pred": 1, "s8": 1, "u8": 1, "f8e4m3fn": 1, "f8e5m2": 1,
    "bf16": 2, "f16": 2, "s16": 2, "u16": 2,
    "f32": 4, "s32": 4, "u32": 4,
    "f64": 8, "s64": 8, "u64": 8, "c64": 8, "c128": 16,
}  # fmt: skip
"""Bytes per element of the HLO element types the readers may meet."""

ARRAY_SHAPE = re.compile(r"(?P<dtype>[a-z]\w*)\[(?P<dims>[\d,]*)\]")


@functools.lru_cache(maxsize=4096)
def array_shapes(shape: str) -> tuple[tuple[str, tuple[int, ...]], ...]:
    """The (dtype, dims) of every array in a shape, tuple shapes flattened (a module's shapes
    repeat: each is read once).

    >>> array_shapes("(f32[2,3]{1,0}, bf16[])")
    (('f32', (2, 3)), ('bf16', ()))
    """
    return tuple(
        (m["dtype"], tuple(int(d) for d in m["dims"].split(",") if d))
        for m in ARRAY_SHAPE.finditer(shape)
    )


def shape_bytes(shape: str) -> int:
    """Bytes of all arrays in a shape."""
    return sum(DTYPE_BYTES[dtype] * math.prod(dims) for dtype, dims in array_shapes(shape))


def elements(shape: str) -> int:
    """How many elements an array shape has; -1 for a tuple.

    >>> elements("f32[8,4]{1,0}"), elements("s32[]"), elements("(f32[2], f32[2])")
    (32, 1, -1)
    """
    shapes = array_shapes(shape)
    return math.prod(shapes[0][1]) if len(shapes) == 1 else -1


def elements_of(inst: Instruction | None) -> int:
    """How many elements ``inst``'s result has; -1 for a tuple or an unknown instruction."""
    return elements(inst.shape) if inst else -1


_MESH = re.compile(r"sharding=\{mesh\[([^\]]*)\], \[((?:\{[^}]*\}(?:, )?)*)\]")
_DEVICES = re.compile(r"sharding=\{devices=\[([\d,]+)\]")


def shard_counts(attributes: str, rank: int) -> tuple[int, ...]:
    """How many shards each of an array's ``rank`` dimensions is split into, from an instruction's
    ``sharding=``: Shardy's ``{mesh['fsdp'=4, ...], [{'fsdp'}, {}]}`` or GSPMD's
    ``{devices=[4,1]<=[4]}``; all 1 where it is replicated or has none.

    >>> shard_counts("sharding={mesh['data'=2,'fsdp'=4], [{'fsdp'}, {'data', 'fsdp'}]}", 2)
    (4, 8)
    >>> shard_counts("sharding={devices=[1,4]<=[4]}", 2), shard_counts("sharding={replicated}", 2)
    ((1, 4), (1, 1))
    """
    if mesh := _MESH.search(attributes):
        sizes = {name: int(size) for name, size in re.findall(r"'([^']+)'=(\d+)", mesh[1])}
        dims = re.findall(r"\{([^}]*)\}", mesh[2])
        counts = [
            math.prod(sizes.get(axis, 1) for axis in re.findall(r"'([^']+)'", d)) for d in dims
        ]
        return tuple(counts[:rank]) + (1,) * (rank - len(counts))
    if devices := _DEVICES.search(attributes):
        counts = [int(n) for n in devices[1].split(",")]
        return tuple(counts[:rank]) + (1,) * (rank - len(counts[:rank]))
    return (1,) * rank


def shard_dims(inst: Instruction) -> tuple[int, ...]:
    """The dimensions of one device's shard of ``inst``'s array, as its ``sharding=`` splits it
    (the whole array where it has none)."""
    ((_, dims),) = array_shapes(inst.shape)[:1] or (("f32", ()),)
    counts = shard_counts(inst.attributes, len(dims))
    return tuple(-(-d // c) for d, c in zip(dims, counts, strict=True))


def shard_bytes(inst: Instruction) -> int:
    """Bytes of one device's shard of ``inst``'s array (:func:`shard_dims`)."""
    ((dtype, _),) = array_shapes(inst.shape)[:1] or (("f32", ()),)
    return DTYPE_BYTES.get(dtype, 4) * math.prod(shard_dims(inst))
