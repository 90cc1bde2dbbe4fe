"""A compiled module's collectives, priced by the ring model per rank and per step."""

from __future__ import annotations

import dataclasses
import math
import re

from find_barriers import array_shapes, read_hlo, run_counts, shape_bytes
from snippets.ring_model import ring_bytes_per_rank


def group_size(attributes: str) -> int:
    """The ranks in each replica group: ``{{0,1},{2,3}}``, iota ``[2,2]<=[4]`` or ``mesh[...] {'x'}``.

    >>> group_size("replica_groups=mesh['a'=2,'b'=2], device_ids=([2,2]T(1,0)) {'a','b'}, x=1")
    4
    """
    if match := re.search(r"replica_groups=\{\{([\d,]*)\}", attributes):
        return len(match[1].split(","))
    if match := re.search(r"replica_groups=\[([\d,]+)\]<=", attributes):
        return int(match[1].split(",")[-1])
    if match := re.search(r"replica_groups=mesh\[([^\]]*)\][^{]*\{([^}]*)\}", attributes):
        sizes = dict(re.findall(r"'([^']+)'=(\d+)", match[1]))
        return math.prod(int(sizes[name.strip(" '")]) for name in match[2].split(","))
    raise ValueError(f"No replica_groups this reader understands in: {attributes[:200]!r}")


COLLECTIVES = ("all-reduce", "reduce-scatter", "all-gather", "all-to-all", "collective-permute")


@dataclasses.dataclass(frozen=True)
class Collective:
    """A collective in a compiled module: what each rank sends each time it runs, under the ring
    model, and ``trips``, how many times it runs per execution of the module (see :func:`~find_barriers.run_counts`)."""

    kind: str
    shape: str
    ranks: int
    bytes_per_rank: float
    trips: int = 1

    @property
    def bytes_per_step(self) -> float:
        """What each rank sends per execution of the module: ``bytes_per_rank * trips``."""
        return self.bytes_per_rank * self.trips


def collectives(hlo_text: str) -> list[Collective]:
    """The collectives of a module with their result shape, ranks, bytes sent per rank and trips."""
    program = read_hlo(hlo_text)
    count = run_counts(program, unknown=1)  # a loop of unknown trip count taken as running once
    found = []
    for comp, insts in program.computations.items():
        for inst in insts:
            kind = inst.opcode.removesuffix("-start")
            if kind not in COLLECTIVES:
                continue
            shape = inst.shape
            if inst.opcode.endswith("-start") and kind in ("all-gather", "collective-permute"):
                dtype, dims = array_shapes(shape)[-1]  # async start: (operand, result)
                shape = f"{dtype}[{','.join(map(str, dims))}]"
            ranks = 2 if kind == "collective-permute" else group_size(inst.attributes)
            sent = ring_bytes_per_rank(kind, shape_bytes(shape), ranks)
            found.append(Collective(kind, shape, ranks, sent, count(comp)))
    return found
