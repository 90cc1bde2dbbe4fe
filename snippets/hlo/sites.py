"""Transpose-of-dot sites: every transpose a dot feeds, what stands between, and whether XLA
would fold it. One definition of a site, whichever reader made the :class:`~snippets.hlo.program.Program`.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping

from snippets.hlo import fold, provenance
from snippets.hlo.loops import run_counts
from snippets.hlo.outputs import outputs_reached
from snippets.hlo.program import (
    SAME_VALUE,
    Instruction,
    Program,
    is_sharding_call,
    read_hlo,
    tuple_index,
)
from snippets.hlo.shapes import array_shapes, has_dims

_PASS_THROUGH = SAME_VALUE | {"all-reduce", "get-tuple-element"}
"""Ops that stand between a dot and its transpose without making a new value."""


@dataclasses.dataclass(frozen=True)
class TransposeSite:
    """A transpose fed by a dot, shapes without layouts; ``kind`` says what stands between:
    ``foldable`` (nothing), ``barrier`` (a ``Sharding`` call), ``all-reduce`` or ``other``.
    ``output``: the result element its value reaches (index, or name from
    :func:`snippets.hlo.lowered.find_barriers`); ``trips``: runs per step (None: unknown);
    ``no_fold``: why XLA's simplifier would keep the transpose anyway (None: it would fold it);
    ``stack``: the dot's call stack, innermost first; ``parameter``: the parameter whose gradient
    the dot makes, as the module names it; ``role`` (:func:`snippets.hlo.provenance.role`);
    ``placed_by``: what put the ``Sharding`` call there (``explicit`` or ``constraint``), and
    ``placed_at`` a constraint's user line."""

    transpose: str
    shape: str
    dot: str
    between: tuple[str, ...]
    kind: str
    dot_shape: str = ""
    op_name: str | None = None
    source: str | None = None
    output: int | str | None = None
    trips: int | None = 1
    no_fold: str | None = None
    stack: tuple[str, ...] = ()
    parameter: str | None = None
    role: str = "unknown"
    placed_by: str | None = None
    placed_at: str | None = None

    @property
    def verdict(self) -> str:
        """``blocked``: XLA would fold it but a ``Sharding`` call stands between; ``foldable``:
        it folds; ``kept``: XLA keeps the transpose whatever stands between (``no_fold`` says why)."""
        if self.no_fold is not None:
            return "kept"
        return "blocked" if "Sharding" in self.between else "foldable"

    @property
    def blocked(self) -> bool:
        """Whether a ``Sharding`` call blocks a fold XLA would otherwise make."""
        return self.verdict == "blocked"

    @property
    def user_source(self) -> str | None:
        """The user's own line: the first frame outside JAX, Flax, optax and the recipe helpers."""
        return provenance.user_frame(self.stack) or self.source

    @property
    def chain(self) -> str:
        """``dot f32[8,2] -> Sharding -> transpose f32[2,8]``, in data-flow order, without layouts."""
        ends = [f"dot {self.dot_shape.split('{')[0]}", f"transpose {self.shape.split('{')[0]}"]
        return " -> ".join([ends[0], *reversed(self.between), ends[1]])

    @property
    def what(self) -> str:
        """The site's role and parameter as far as the module names it."""
        if self.parameter is not None:
            return f"{self.role} of {self.parameter}"
        return self.role if self.output is None else f"{self.role} (output {self.output})"

    def line(self, label: str | None = None) -> str:
        """The site on one line: its verdict (or ``label``), the user's line, what it computes,
        the chain and how often it runs; as find-barriers prints it, and ``print(site)``."""
        trips = "" if self.trips == 1 else f"  x{self.trips or '?'} per run (in a loop)"
        where = provenance.readable(self.user_source) or "no source line"
        return f"{label or self.verdict:<9} {where}  {self.what}  {self.chain}{trips}"

    __str__ = line


def value_source(
    inst: Instruction, by_name: Mapping[str, Instruction]
) -> tuple[list[Instruction], Instruction | None]:
    """The pass-through ops behind ``inst``'s operand, nearest first, and what made the value
    (``None``: from outside); a tuple or combined all-reduce is followed into the operand selected,
    a call's or loop's result is not."""
    chain: list[Instruction] = []
    current = by_name.get(inst.operands[0]) if inst.operands else None
    while current is not None and (current.opcode in _PASS_THROUGH or is_sharding_call(current)):
        chain.append(current)
        source = by_name.get(current.operands[0]) if current.operands else None
        if current.opcode == "get-tuple-element" and source is not None:
            if source.opcode not in ("tuple", "all-reduce"):
                return chain, source  # a call's or a loop's result is made there
            if len(source.operands) > 1:
                chain.append(source)
                source = by_name.get(source.operands[tuple_index(current)])
        current = source
    return chain, current


def transpose_of_dot_sites(
    hlo_text: str, dims: tuple[int, ...] | None = None
) -> list[TransposeSite]:
    """Every transpose-of-dot site of HLO text (:func:`find_sites` on :func:`~snippets.hlo.program.read_hlo`)."""
    return find_sites(read_hlo(hlo_text), dims)


def find_sites(program: Program, dims: tuple[int, ...] | None = None) -> list[TransposeSite]:
    """Every transpose fed, through pass-through ops only, by a dot, in ``_site_order``;
    ``dims`` keeps those of that size set. XLA folds ``transpose(dot(a, b))`` into ``dot(b, a)``
    only if nothing stands between."""
    by_name = program.by_name
    count = run_counts(program)
    parameters = None  # made for the first site: most modules of a dump have none
    sites = []
    for comp, inst in program.transposes():
        if not has_dims(inst, dims):
            continue
        chain, origin = value_source(inst, by_name)
        if origin is None or origin.opcode != "dot":
            continue
        between = tuple("Sharding" if is_sharding_call(op) else op.opcode for op in chain)
        kinds = {"Sharding": "barrier", "all-reduce": "all-reduce"}  # in this order
        kind = next((kinds[k] for k in kinds if k in between), "other" if between else "foldable")
        shapes = inst.shape.split("{")[0], origin.shape.split("{")[0]
        stack = program.stack(origin)  # innermost first
        names = inst.name, shapes[0], origin.name
        placed = provenance.placed_by(program, [op for op in chain if is_sharding_call(op)])
        sizes = array_shapes(inst.shape)[0][1]
        parameters = parameters or provenance.Parameters(program)
        source = stack[0] if stack else None
        found = TransposeSite(*names, between, kind, shapes[1], program.op_name(origin), source)
        sites.append(
            dataclasses.replace(
                found,
                no_fold=fold.no_fold(program, inst, chain, origin),
                trips=count(comp),
                stack=stack,
                parameter=parameters.of(origin, sizes),
                placed_by=placed[0],
                placed_at=placed[1],
            )
        )
    reached = outputs_reached(program, [site.transpose for site in sites])
    return sorted(
        (
            dataclasses.replace(
                site,
                output=reached[site.transpose],
                role=provenance.role(site.op_name, site.parameter, reached[site.transpose]),
            )
            for site in sites
        ),
        key=_site_order,
    )


def _site_order(site: TransposeSite) -> tuple:
    """Weight gradients first, by output, then the rest by source line: an order that does not
    depend on how a program was printed (XLA prints instructions in an order of its own)."""
    file, _, line = (site.source or "").rpartition(":")
    output = -1 if site.output is None else site.output
    shapes = (site.dot_shape, site.shape, site.between, site.trips or 0)
    return (site.output is None, output, file, int(line or 0), site.op_name or "", *shapes)
