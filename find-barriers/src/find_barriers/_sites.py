"""Transpose-of-dot sites: every transpose a dot feeds, what stands between, and whether XLA would
fold it; one definition, whichever reader made the :class:`~find_barriers.Program`."""

from __future__ import annotations

import dataclasses
import functools
import re
from collections.abc import Mapping

from find_barriers import _fold as fold
from find_barriers._cost import Cost, Costs
from find_barriers._dumps import Module
from find_barriers._flow import Flow, Reach
from find_barriers._frames import layer_lines, placed_by, readable, user_frames
from find_barriers._loops import run_counts
from find_barriers._parameters import Parameters, role
from find_barriers._phases import FORWARD, Phases
from find_barriers._program import (
    Frame,
    Instruction,
    Program,
    is_sharding_call,
    passes_on,
    tuple_index,
)
from find_barriers._shapes import array_shapes
from find_barriers._vocabulary import Placement, Role, Verdict

POSITION = re.compile(r"^[\w.]*\bstates\[\d+\]\[\d+\]$")
"""A name that is only a position in a flattened state (``model.states[0][32]``, as ``nnx.jit``
names a parameter in graph mode): it shifts when a layer is added, and says nothing of the path
(``params[0]``, an element of the user's own list, is a path)."""
BY_POSITION_NOTE = (
    "{names} name parameters by their position in nnx.jit's flattened state: "
    "nnx.jit(..., graph=False), Flax's tree mode, dumps each parameter's path"
)
_ALSO_BETWEEN = frozenset({"all-reduce", "get-tuple-element"})
"""Ops that, besides those that pass a value on unchanged (:func:`passes_on`), stand between a dot
and its transpose without making a new value."""


@dataclasses.dataclass(frozen=True)
class TransposeSite:
    """A transpose fed by a dot: what stands between, whether XLA would fold it, and whose it is.

    Attributes:
        transpose: the transpose's name in the module.
        shape: the transpose's result shape, without layout.
        dot: the dot's name.
        between: what stands between, nearest the transpose first (``Sharding`` for the call).
        dot_shape: the dot's result shape, without layout.
        op_name: the dot's ``op_name``.
        output: the result element its value reaches (an index, or a name from the lowering);
            looked for in the backward pass only (a forward value names no parameter).
        trips: how many times it runs per step (None: unknown).
        no_fold: why XLA's simplifier would keep the transpose anyway (None: it would fold it).
        wide_swap: whether the transpose only puts the dot's rhs dimensions before its lhs ones,
            one operand having several non-contracting dimensions.
        stack: the dot's Python stack, innermost first.
        user_line: the layer's own line: the innermost user frame, or, where a helper several
            layers share makes the dot (``via``), the first frame out of it.
        via: the shared helper the layer went through to make the dot, if any.
        parameter: the parameter whose gradient the dot makes, as the module names it.
        role: what the dot computes (:class:`~find_barriers.Role`).
        placed_by: what put the ``Sharding`` call there (:class:`~find_barriers.Placement`).
        placed_at: where that constraint is, in the user's code.
        cost: a blocked weight gradient's estimated cost (:class:`~find_barriers.Cost`); None
            where its parameter is unknown, or nothing blocks its fold.
    """

    transpose: str
    shape: str
    dot: str
    between: tuple[str, ...]
    dot_shape: str = ""
    op_name: str | None = None
    output: int | str | None = None
    trips: int | None = 1
    no_fold: str | None = None
    wide_swap: bool = False
    stack: tuple[Frame, ...] = ()
    user_line: Frame | None = None
    via: Frame | None = None
    parameter: str | None = None
    role: Role = Role.UNKNOWN
    placed_by: Placement | None = None
    placed_at: Frame | None = None
    cost: Cost | None = None

    @property
    def verdict(self) -> Verdict:
        """``blocked``: XLA would fold it but a ``Sharding`` call stands between; ``foldable``: it
        folds; ``kept``: XLA keeps the transpose whatever stands between (``no_fold`` says why);
        ``pinned``: a weight gradient's transpose XLA's simplifier keeps only because a dot operand
        has several non-contracting dimensions, with a ``Sharding`` call between, which stops
        TPU's layout assignment from giving the gradient its parameter's layout (§4.8)."""
        sharded = "Sharding" in self.between
        if self.no_fold is None:
            return Verdict.BLOCKED if sharded else Verdict.FOLDABLE
        weight = self.role is Role.WEIGHT_GRADIENT
        return Verdict.PINNED if self.wide_swap and sharded and weight else Verdict.KEPT

    @property
    def blocked(self) -> bool:
        """Whether a ``Sharding`` call blocks what XLA would otherwise do: fold the transpose, or,
        where it is pinned, lay the weight gradient out as its parameter on TPU."""
        return self.verdict in (Verdict.BLOCKED, Verdict.PINNED)

    @property
    def source(self) -> Frame | None:
        """The dot's innermost frame, library or not."""
        return self.stack[0] if self.stack else None

    @functools.cached_property
    def user_stack(self) -> tuple[Frame, ...]:
        """The frames of the dot's stack that are the user's, innermost first."""
        return user_frames(self.stack)

    @property
    def chain(self) -> str:
        """``dot f32[8,2] -> Sharding -> transpose f32[2,8]``: in data-flow order, no layouts."""
        ends = [f"dot {self.dot_shape.split('{')[0]}", f"transpose {self.shape.split('{')[0]}"]
        return " -> ".join([ends[0], *reversed(self.between), ends[1]])

    @property
    def by_position(self) -> bool:
        """Whether the module names the parameter only by a position in a flattened state (``model.states[0][32]``)."""
        return self.parameter is not None and POSITION.match(self.parameter) is not None

    @property
    def what(self) -> str:
        """The site's role and parameter as far as the module names it."""
        if self.parameter is not None:
            return f"{self.role} of {self.parameter}" + " (by position)" * self.by_position
        return self.role if self.output is None else f"{self.role} (output {self.output})"

    @property
    def where(self) -> str:
        """The user's line, with the helper it went through: ``model.py:54 via model.py:38``."""
        line = readable(self.user_line or self.source) or "no source line"
        return f"{line} via {readable(self.via)}" if self.via else line

    def one_line(self, label: str | None = None) -> str:
        """The site on one line: its verdict (or ``label``), the user's line, what it computes,
        the chain and how often it runs; as find-barriers prints it, and ``print(site)``."""
        trips = "" if self.trips == 1 else f"  x{self.trips or '?'} per run (in a loop)"
        return f"{label or self.verdict:<9} {self.where}  {self.what}  {self.chain}{trips}"

    __str__ = one_line


def value_source(
    inst: Instruction, by_name: Mapping[str, Instruction]
) -> tuple[list[Instruction], Instruction | None]:
    """The pass-through ops behind ``inst``'s operand, nearest first, and what made the value
    (``None``: from outside); a tuple or combined all-reduce is followed into the operand selected,
    a call's or loop's result is not."""
    chain: list[Instruction] = []
    current = by_name.get(inst.operands[0]) if inst.operands else None
    while current is not None and (passes_on(current) or current.opcode in _ALSO_BETWEEN):
        chain.append(current)
        source = by_name.get(current.operands[0]) if current.operands else None
        if current.opcode == "get-tuple-element" and source is not None:
            if source.opcode not in ("tuple", "all-reduce"):
                return chain, source  # a call's or a loop's result is made there
            if source.operands:
                chain.append(source)
                source = by_name.get(source.operands[tuple_index(current)])
        current = source
    return chain, current


def find_sites(program: Program | Module) -> list[TransposeSite]:
    """Every transpose a dot feeds through pass-through ops only, in ``_site_order``, in a program
    or a module read from a dump. A TypeError says what to pass instead."""
    if isinstance(program, Module):
        program = program.program
    if not isinstance(program, Program):
        raise TypeError(
            f"find_sites takes a program or a module, not {_kind(program)}: {HOW_TO_READ}"
        )
    count, parameters, phases, flow = (
        run_counts(program),
        Parameters(program),
        Phases(program),
        Flow(program),
    )
    costs = Costs(program, flow)
    sites = []
    for comp, inst in program.transposes():
        chain, origin = value_source(inst, program.by_name)
        if origin is None or origin.opcode != "dot":
            continue
        between = tuple("Sharding" if is_sharding_call(op) else op.opcode for op in chain)
        shapes = inst.shape.split("{")[0], origin.shape.split("{")[0]
        placed = placed_by(program, [op for op in chain if is_sharding_call(op)])
        phase = phases.of(origin)
        backward = phase != FORWARD  # a forward value is no parameter's: nothing to look for
        reach = flow.reach(inst.name) if backward else Reach()
        output = min(reach.outputs, default=None)
        sizes = array_shapes(inst.shape)[0][1]
        weight = parameters.of(origin, sizes) if backward else None
        named = weight or _updated(program, reach)
        site = TransposeSite(
            *(inst.name, shapes[0], origin.name, between, shapes[1]),
            op_name=program.op_name(origin),
            output=output,
            no_fold=fold.no_fold(program, inst, chain, origin),
            wide_swap=fold.swaps_wide_operands(program, inst, chain, origin),
            trips=count(comp),
            stack=program.stack(origin),
            parameter=named and (program.op_name(named) or named.name),
            role=role(phase, weight and weight.name, reach),
            placed_by=placed[0],
            placed_at=placed[1],
        )
        if site.blocked and named:
            site = dataclasses.replace(site, cost=costs.of(inst, origin, named))
        sites.append(site)
    known = [user_frames(stack) for stack in program.known_stacks()] if sites else []
    lines = layer_lines([site.user_stack for site in sites], known)
    return sorted(
        (
            dataclasses.replace(site, user_line=line, via=via)
            for site, (line, via) in zip(sites, lines, strict=True)
        ),
        key=_site_order,
    )


HOW_TO_READ = (
    "find_barriers.jax.lowered_sites(lowered) for a jax.stages.Lowered, "
    "find_sites(read_module(path)) for a dump file, find_sites(read_hlo(text)) for HLO text"
)


def _kind(value: object) -> str:
    """What a value is, for an error message: ``a jax.stages.Lowered``, ``a str``."""
    kind = type(value)
    module = "jax.stages" if kind.__module__.startswith("jax") else kind.__module__
    return f"a {kind.__name__}" if module == "builtins" else f"a {module}.{kind.__name__}"


def _updated(program: Program, reach: Reach) -> Instruction | None:
    """The donated parameter whose buffer the first output ``reach`` reaches reuses: the one that
    output updates."""
    for output in sorted(reach.outputs):
        if (number := program.aliases.get(output)) is not None:
            name = program.parameter(program.entry, number)
            return program.by_name.get(name) if name else None
    return None


def _site_order(site: TransposeSite) -> tuple:
    """Weight gradients first, by output, then the rest by source line: an order that does not
    depend on how a program was printed (XLA prints instructions in an order of its own)."""
    where = tuple(site.source or ("", 0))[:2]
    shapes = (site.dot_shape, site.shape, site.between, site.trips or 0)
    return (site.output is None, site.output, *where, site.op_name or "", *shapes)
