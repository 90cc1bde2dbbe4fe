"""Small readers of XLA programs, so every count a guide shows is read from the program itself.

They read HLO text: before optimisation, XLA's own dumps, or ``compiled.as_text()`` after. The
transpose-of-dot site finder reads a :class:`Program` of :class:`Instruction` records, which
:func:`read_hlo` makes from HLO text and :mod:`snippets.measure.stablehlo` from a lowered StableHLO
module, so both readings share one definition of a site. No JAX import; imported by the guides
and by :mod:`snippets.measure.barrier_check`, which has the command line.
"""

from __future__ import annotations

import dataclasses
import functools
import math
import re
from collections.abc import Callable, Mapping
from typing import NamedTuple

from snippets.measure import fold, provenance
from snippets.ring_model import ring_bytes_per_rank

DTYPE_BYTES = {
    "pred": 1, "s8": 1, "u8": 1, "f8e4m3fn": 1, "f8e5m2": 1,
    "bf16": 2, "f16": 2, "s16": 2, "u16": 2,
    "f32": 4, "s32": 4, "u32": 4,
    "f64": 8, "s64": 8, "u64": 8, "c64": 8, "c128": 16,
}  # fmt: skip
"""Bytes per element of the HLO element types the readers may meet."""

_ARRAY_SHAPE = re.compile(r"(?P<dtype>[a-z]\w*)\[(?P<dims>[\d,]*)\]")
_HEADER = re.compile(r"^\s*(?P<root>ROOT\s+)?%?(?P<name>[\w.\-]+)\s*=\s*(?=[(a-z])")
_COMMENT = re.compile(r"/\*.*?\*/")  # XLA numbers long operand lists: /*index=5*/%name
_COMPUTATION = re.compile(r"^\s*(?P<entry>ENTRY\s+)?%?(?P<name>[\w.\-]+)\s*(?:\(.*)?\{\s*$")
"""A computation's header: ``%name (params) -> shape {``, or ``name {`` as metadata printing writes it."""


class Instruction(NamedTuple):
    """One HLO instruction: name, result shape, opcode, operand names, attributes, ROOT or not (a
    tuple: a module has tens of thousands, and a tuple is the cheapest record to make)."""

    name: str
    shape: str
    opcode: str
    operands: tuple[str, ...]
    attributes: str
    root: bool = False


def _group(text: str) -> tuple[list[str], int]:
    """The top-level comma-separated parts of the bracketed group ``text`` opens, and its end."""
    if simple := _FLAT_GROUP.match(text):  # no nested brackets: one regex instead of a loop
        return simple[1].split(","), simple.end() - 1
    parts, depth, start = [], 0, 1
    for index, char in enumerate(text):
        depth += {"(": 1, "[": 1, "{": 1, ")": -1, "]": -1, "}": -1}.get(char, 0)
        if depth == 0:
            return [*parts, text[start:index]], index
        if depth == 1 and char == ",":
            parts.append(text[start:index])
            start = index + 1
    raise ValueError(f"Unbalanced brackets in HLO line: {text[:80]!r}")


_FLAT_GROUP = re.compile(r"\(([^()\[\]{}]*)\)")
_PLAIN = re.compile(
    r"\s*(ROOT\s+)?%?([\w.\-]+)\s*=\s*([a-z]\w*\[[\d,]*\](?:\{[^}\s]*\})?) ([\w\-]+)"
    r"\(([^()\[\]{}]*)\)(.*)"
)
"""An instruction whose result is one array and whose operands are bare names: parsed by one match."""


def parse_instruction(line: str) -> Instruction | None:
    """Parse one line of HLO text; ``None`` for lines that are not instructions.

    >>> parse_instruction("  ROOT %t = f32[4,2]{1,0} transpose(f32[2,4]{1,0} %d), dimensions={1,0}")
    Instruction(name='t', shape='f32[4,2]{1,0}', opcode='transpose', operands=('d',), attributes=', dimensions={1,0}', root=True)
    >>> parse_instruction("t = (f32[], f32[]) tuple(a, /*index=1*/%b)").operands
    ('a', 'b')
    """
    if plain := _PLAIN.match(line):  # most lines: one array result, operands without brackets
        root, name, shape, opcode, operands, attributes = plain.groups()
        if "/*" in operands:
            operands = _COMMENT.sub("", operands)
        names = tuple(
            words[-1].lstrip("%") for part in operands.split(",") if (words := part.split())
        )
        return Instruction(name, shape, opcode, names, attributes, root is not None)
    header = _HEADER.match(line)
    if header is None:
        return None
    rest = line[header.end() :]
    end = _group(rest)[1] + 1 if rest.startswith("(") else rest.find(" ")
    shape, rest = rest[:end], rest[end:].lstrip()
    opcode = rest.partition("(")[0]
    if end < 0 or opcode == rest:
        return None
    parts, close = _group(rest[len(opcode) :])
    if "/*" in rest:
        parts = [_COMMENT.sub("", part) for part in parts]
    operands = tuple(words[-1].lstrip("%") for part in parts if (words := part.split()))
    attributes = rest[len(opcode) + close + 1 :]
    return Instruction(header["name"], shape, opcode, operands, attributes, bool(header["root"]))


def instructions(hlo_text: str) -> list[Instruction]:
    """Every instruction in an HLO module, in text order, fused computations included."""
    return [inst for line in hlo_text.splitlines() if (inst := parse_instruction(line))]


_OP_NAME = re.compile(r'\bop_name="((?:[^"\\]|\\.)*)"')
_FRAME = re.compile(r"\bstack_frame_id=(\d+)")
_SOURCE = re.compile(r'\bsource_file="((?:[^"\\]|\\.)*)" source_line=(\d+)')
"""Metadata a site reports: the op's name, and its source as a stack frame or as a file and line."""

Value = str | tuple[str, int]
"""A value in a program: an instruction's result, or element ``i`` of its tuple ``(name, i)``."""


@dataclasses.dataclass
class Program:
    """A module as :class:`Instruction` records, what the site finder reads: each computation's
    instructions in order, the entry's name, and each stack frame id's ``file:line`` chain,
    innermost first (``debug_info``'s tables; empty without them). The finder asks only through
    the properties and methods below, so a reader can also make records on demand
    (:mod:`snippets.measure.stablehlo`)."""

    computations: dict[str, list[Instruction]]
    entry: str
    stacks: dict[int, tuple[str, ...]] = dataclasses.field(default_factory=dict)

    @property
    def frames(self) -> dict[int, str]:
        """The innermost ``file:line`` of each stack frame id."""
        return {key: stack[0] for key, stack in self.stacks.items() if stack}

    @functools.cached_property
    def by_name(self) -> Mapping[str, Instruction]:
        """Every instruction by name (names are unique in a module)."""
        return {inst.name: inst for insts in self.computations.values() for inst in insts}

    @functools.cached_property
    def owner(self) -> Mapping[str, str]:
        """The computation each instruction belongs to, by instruction name."""
        return {inst.name: comp for comp, insts in self.computations.items() for inst in insts}

    @functools.cached_property
    def roots(self) -> Mapping[str, str]:
        """Each computation's ROOT instruction, by computation name."""
        return {self.owner[inst.name]: inst.name for inst in self.by_name.values() if inst.root}

    def transposes(self) -> list[tuple[str, Instruction]]:
        """``(computation, instruction)`` of every transpose: where the site finder starts."""
        return [
            (comp, inst)
            for comp, insts in self.computations.items()
            for inst in insts
            if inst.opcode == "transpose"
        ]

    def callers_of(self, computation: str) -> list[tuple[str, Instruction]]:
        """``(computation, instruction)`` of each instruction that calls ``computation``."""
        return self._callers.get(computation, [])

    @functools.cached_property
    def _callers(self) -> dict[str, list[tuple[str, Instruction]]]:
        found: dict[str, list[tuple[str, Instruction]]] = {}
        for comp, insts in self.computations.items():
            for inst in insts:
                for callee in dict.fromkeys(_callees(inst)):
                    found.setdefault(callee, []).append((comp, inst))
        return found

    def users(self, value: Value) -> list[tuple[Instruction, int]]:
        """The instructions that read ``value``, each with the operand it reads it as; a
        ``get-tuple-element`` reads ``(tuple, index)``, not the whole tuple."""
        return self._users.get(value, [])

    @functools.cached_property
    def _users(self) -> dict[Value, list[tuple[Instruction, int]]]:
        found: dict[Value, list[tuple[Instruction, int]]] = {}
        for inst in self.by_name.values():
            for index, operand in enumerate(inst.operands):
                value = (
                    (operand, _tuple_index(inst)) if inst.opcode == "get-tuple-element" else operand
                )
                found.setdefault(value, []).append((inst, index))
        return found

    def where(self, inst: Instruction) -> tuple[str | None, str | None]:
        """``inst``'s ``op_name`` and ``file:line`` from its metadata (a stack frame id, or XLA's
        older ``source_file``/``source_line``), each None where the text has none."""
        stack = self.stack(inst)
        return self.op_name(inst), stack[0] if stack else None

    def op_name(self, inst: Instruction) -> str | None:
        """``inst``'s ``op_name`` metadata, None where it has none."""
        found = _OP_NAME.search(inst.attributes)
        return found and re.sub(r"\\(.)", r"\1", found[1])

    def stack(self, inst: Instruction) -> tuple[str, ...]:
        """``inst``'s call stack as ``file:line``, innermost first; only the innermost where the
        text has no frame tables; ``()`` where it has no source at all."""
        if frame := _FRAME.search(inst.attributes):
            return self.stacks.get(int(frame[1]), ())
        source = _SOURCE.search(inst.attributes)
        return (f"{source[1]}:{source[2]}",) if source else ()

    def parameter(self, computation: str, index: int) -> str | None:
        """The name of ``computation``'s parameter ``index``."""
        return self._parameters.get((computation, index))

    @functools.cached_property
    def _parameters(self) -> dict[tuple[str, int], str]:
        return {
            (comp, int(inst.operands[0])): inst.name
            for comp, insts in self.computations.items()
            for inst in insts
            if inst.opcode == "parameter" and inst.operands and inst.operands[0].isdigit()
        }


_CALLEE = re.compile(r"\b(?:condition|body|to_apply|calls|true_computation|false_computation)=%?([\w.\-]+)")  # fmt: skip
_BRANCHES = re.compile(r"\bbranch_computations=\{([^}]*)\}")


def _callees(inst: Instruction) -> list[str]:
    """The computations ``inst`` calls, in the order its attributes name them (metadata left out)."""
    if "=" not in inst.attributes:
        return []
    own = inst.attributes.partition(", metadata=")[0]
    branches = _BRANCHES.search(own)
    listed = [name.strip(" %") for name in branches[1].split(",")] if branches else []
    return [*listed, *_CALLEE.findall(own)]


_TABLES = ("FileNames", "FunctionNames", "FileLocations", "StackFrames")


def read_hlo(hlo_text: str) -> Program:
    """Read HLO text once: computations, the entry, and the stack-frame tables if printed.

    A line that starts an instruction but cannot be read (cut off mid-instruction) is an error
    naming its line number. Instructions outside any computation go under the name ``""``.
    """
    found: dict[str, list[Instruction]] = {}
    tables: dict[str, dict[int, str]] = {name: {} for name in _TABLES}
    entry = current = ""
    table = None
    for number, line in enumerate(hlo_text.splitlines(), 1):
        if table is not None and line[:1].isdigit():
            key, _, value = line.partition(" ")
            table[int(key)] = value.strip('"')
            continue
        table = tables.get(line.strip())
        is_header = line.rstrip().endswith("{") and " = " not in line.partition("(")[0]
        if is_header and (header := _COMPUTATION.match(line)):
            current = header["name"]
            found[current] = []
            entry = current if header["entry"] else entry
            continue
        try:
            inst = parse_instruction(line)
        except ValueError:
            raise ValueError(f"line {number} is not a whole instruction: {line[:60]!r}") from None
        if inst is not None:
            found.setdefault(current, []).append(inst)
    return Program(found, entry, _stacks(tables))


def _stacks(tables: dict[str, dict[int, str]]) -> dict[int, tuple[str, ...]]:
    """Each stack frame id's ``file:line`` chain, innermost first, from the tables XLA prints at
    the top of a dump (and ``as_text(debug_info=True)``). XLA's text gives each frame's parent
    one above its id, so frame 1, the outermost, reads ``parent_frame_id=1``; where no frame
    names itself, the ids are taken as they stand, 0 meaning none."""
    places = {}
    for key, text in tables["FileLocations"].items():
        place = dict(re.findall(r"(\w+)=(\d+)", text))
        places[key] = f"{tables['FileNames'].get(int(place['file_name_id']), '?')}:{place['line']}"
    frames = {
        key: tuple(int(n) for n in re.findall(r"(?:file_location_id|parent_frame_id)=(\d+)", text))
        for key, text in tables["StackFrames"].items()
    }
    shift = int(any(key == frame[-1] for key, frame in frames.items() if len(frame) == 2))

    def chain(key: int) -> tuple[str, ...]:
        found, seen = [], set()
        while key in frames and key not in seen:
            seen.add(key)
            location, *parent = frames[key]
            found.append(places.get(location, "?"))
            key = parent[0] - shift if parent else 0
        return tuple(found)

    return {key: chain(key) for key in frames}


def computations(hlo_text: str) -> tuple[dict[str, list[Instruction]], str, str]:
    """Each computation's instructions by name, the entry computation's name and its root's name."""
    program = read_hlo(hlo_text)
    found = {name: insts for name, insts in program.computations.items() if name}
    return found, program.entry, program.roots.get(program.entry, "") if program.entry else ""


def array_shapes(shape: str) -> list[tuple[str, tuple[int, ...]]]:
    """The (dtype, dims) of every array in a shape, tuple shapes flattened.

    >>> array_shapes("(f32[2,3]{1,0}, bf16[])")
    [('f32', (2, 3)), ('bf16', ())]
    """
    return [
        (m["dtype"], tuple(int(d) for d in m["dims"].split(",") if d))
        for m in _ARRAY_SHAPE.finditer(shape)
    ]


def shape_bytes(shape: str) -> int:
    """Bytes of all arrays in a shape."""
    return sum(DTYPE_BYTES[dtype] * math.prod(dims) for dtype, dims in array_shapes(shape))


def layout(shape: str) -> tuple[int, ...] | None:
    """An array shape's layout: its dimensions from minor to major, ``None`` when none is printed.

    >>> layout("f32[8,4]{0,1}"), layout("f32[8,4]")
    ((0, 1), None)
    """
    match = re.search(r"\]\{([\d,]*)", shape)
    return tuple(int(d) for d in match[1].split(",") if d) if match else None


def elements(shape: str) -> int:
    """How many elements an array shape has; -1 for a tuple.

    >>> elements("f32[8,4]{1,0}"), elements("s32[]"), elements("(f32[2], f32[2])")
    (32, 1, -1)
    """
    shapes = array_shapes(shape)
    return math.prod(shapes[0][1]) if len(shapes) == 1 else -1


def _elements(inst: Instruction | None) -> int:
    """How many elements ``inst``'s result has; -1 for a tuple or an unknown instruction."""
    return elements(inst.shape) if inst else -1


def _has_dims(inst: Instruction, dims: tuple[int, ...] | None) -> bool:
    """Whether ``inst``'s first array has exactly the sizes ``dims``, in any order (``None``: any)."""
    shapes = array_shapes(inst.shape)
    return bool(shapes) and (dims is None or sorted(shapes[0][1]) == sorted(dims))


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
    model, and ``trips``, how many times it runs per execution of the module (see :func:`runs`)."""

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
    count = runs(program, unknown=1)
    found = []
    for comp, insts in program.computations.items():
        for inst in insts:
            kind = inst.opcode.removesuffix("-start")
            if kind not in COLLECTIVES:
                continue
            shape = inst.shape
            if inst.opcode.endswith("-start") and kind in ("all-gather", "collective-permute"):
                shape = list(_ARRAY_SHAPE.finditer(shape))[-1][0]  # async start: (operand, result)
            ranks = 2 if kind == "collective-permute" else group_size(inst.attributes)
            sent = ring_bytes_per_rank(kind, shape_bytes(shape), ranks)
            found.append(Collective(kind, shape, ranks, sent, count(comp)))
    return found


_KNOWN_TRIPS = re.compile(r'"known_trip_count":\{"n":"(\d+)"\}')
_LOOP_PARTS = re.compile(r"\b(condition|body)=%?([\w.\-]+)")


def _loop_parts(loop: Instruction) -> dict[str, str]:
    """A ``while``'s ``condition`` and ``body`` computations, by those words."""
    return dict(_LOOP_PARTS.findall(loop.attributes.partition(", metadata=")[0]))


def trip_count(loop: Instruction, program: Program) -> int | None:
    """How many times a ``while`` runs its body: the ``known_trip_count`` XLA writes into its
    ``backend_config``, else, as before optimisation, read from the loop: a counter that starts at
    a constant, is compared with a constant and grows by one each step. None when neither says."""
    if known := _KNOWN_TRIPS.search(loop.attributes):
        return int(known[1])
    parts = _loop_parts(loop)
    by_name, roots = program.by_name, program.roots
    compare = by_name.get(roots.get(parts.get("condition", ""), ""))
    state = by_name.get(loop.operands[0]) if loop.operands else None  # the loop's first state
    step = by_name.get(roots.get(parts.get("body", ""), ""))  # the next iteration's state
    if compare is None or compare.opcode != "compare" or state is None or step is None:
        return None
    direction = re.search(r"direction=(\w+)", compare.attributes)[1]
    counter, bound = (_unwrapped(name, by_name) for name in compare.operands)
    if _constant(counter) is not None:  # ``bound > counter`` is ``counter < bound``
        counter, bound = bound, counter
        direction = {"GT": "LT", "GE": "LE"}.get(direction, direction)
    index = _counter_index(counter, by_name)
    if index is None or index >= min(len(state.operands), len(step.operands)):
        return None
    start = _constant(_unwrapped(state.operands[index], by_name))
    grow = _unwrapped(step.operands[index], by_name)
    terms = [_unwrapped(name, by_name) for name in grow.operands] if grow else []
    reads_counter = any(_counter_index(term, by_name) == index for term in terms)
    stride = next((s for term in terms if (s := _constant(term)) is not None), 0)
    limit = _constant(bound)
    if grow is None or grow.opcode != "add" or not reads_counter or None in (start, limit):
        return None
    span = limit - start
    if stride <= 0 or direction not in ("LT", "LE", "NE"):
        return None
    if direction == "NE":
        return span // stride if span >= 0 and span % stride == 0 else None
    return max(0, -(-span // stride) if direction == "LT" else span // stride + 1)


def _unwrapped(name: str, by_name: dict[str, Instruction]) -> Instruction | None:
    """The instruction behind ``name`` once ``Sharding`` calls, converts and copies are skipped."""
    inst = by_name.get(name)
    while inst and inst.operands and (is_sharding_call(inst) or inst.opcode in _SAME_VALUE):
        inst = by_name.get(inst.operands[0])
    return inst


_SAME_VALUE = {"bitcast", "copy", "reshape", "convert"}


def _constant(inst: Instruction | None) -> int | None:
    """The value of an integer scalar constant, else None."""
    if inst is None or inst.opcode != "constant" or len(inst.operands) != 1:
        return None
    return int(inst.operands[0]) if re.fullmatch(r"-?\d+", inst.operands[0]) else None


def _counter_index(inst: Instruction | None, by_name: dict[str, Instruction]) -> int | None:
    """Which element of a loop's state ``inst`` is, if it reads one from the loop's parameter."""
    if inst is None or inst.opcode != "get-tuple-element":
        return None
    state = by_name.get(inst.operands[0])
    return _tuple_index(inst) if state and state.opcode == "parameter" else None


def runs(program: Program, unknown: int | None = None) -> Callable[[str], int | None]:
    """How many times a computation runs per execution of the entry: summed over the instructions
    that call it, the caller's count, times the trip count where a loop calls it (plus one for
    its condition; :func:`trip_count`, ``unknown`` where that is unknown: None then propagates).
    The entry, and a computation nothing calls, run once."""

    @functools.cache
    def count(comp: str) -> int | None:
        callers = [] if comp == program.entry else program.callers_of(comp)
        total = 0 if callers else 1
        for caller, inst in callers:
            factor: int | None = 1
            if inst.opcode == "while":
                trips = trip_count(inst, program)
                factor = unknown if trips is None else trips
                if factor is not None and comp != _loop_parts(inst).get("body"):
                    factor += 1  # the condition runs once more than the body
            runs_there = count(caller)
            if factor is None or runs_there is None:
                return None
            total += runs_there * factor
        return total

    return count


def opcode_counts(hlo_text: str, *opcodes: str) -> dict[str, int]:
    """How many instructions of each named opcode the module has."""
    found = [inst.opcode for inst in instructions(hlo_text)]
    return {opcode: found.count(opcode) for opcode in opcodes}


def is_sharding_call(inst: Instruction) -> bool:
    """Whether ``inst`` is the ``Sharding`` custom call that sharding-in-types lowering emits."""
    return inst.opcode == "custom-call" and 'custom_call_target="Sharding"' in inst.attributes


def sharding_call_count(hlo_text: str) -> int:
    """How many ``Sharding`` custom calls the module has (zero once XLA has partitioned it)."""
    return sum(is_sharding_call(inst) for inst in instructions(hlo_text))


def relayouts(hlo_text: str, dims: tuple[int, ...] | None = None) -> list[Instruction]:
    """The transposes and copies of a module; ``dims`` keeps those of that size set."""
    return [
        inst
        for inst in instructions(hlo_text)
        if inst.opcode in ("transpose", "copy") and _has_dims(inst, dims)
    ]


def kernel_order_dots(hlo_text: str, dims: tuple[int, ...]) -> list[Instruction]:
    """The dots that write an array of exactly ``dims`` in row-major order: a gradient in kernel order."""
    return [
        inst
        for inst in instructions(hlo_text)
        if inst.opcode == "dot"
        and array_shapes(inst.shape)[0][1] == tuple(dims)
        and layout(inst.shape) in (None, tuple(reversed(range(len(dims)))))
    ]


_PASS_THROUGH = {"bitcast", "copy", "reshape", "convert", "all-reduce", "get-tuple-element"}
"""Ops that stand between a dot and its transpose without making a new value."""


@dataclasses.dataclass(frozen=True)
class TransposeSite:
    """A transpose fed by a dot; ``kind`` says what stands between: ``foldable`` (nothing),
    ``barrier`` (a ``Sharding`` call), ``all-reduce`` or ``other``. Shapes are without layouts.
    ``output``: the result element (index, or name from :func:`snippets.measure.barrier.find_barriers`)
    its value reaches; ``trips``: how many times it runs per step (:func:`runs`; None: unknown).

    ``no_fold``: why XLA's simplifier would keep the transpose anyway
    (:func:`snippets.measure.fold.no_fold`), None when it would fold it; ``stack``: the dot's
    call stack, innermost first; ``parameter``: the parameter whose gradient the dot makes, as
    the module names it; ``role`` (:func:`snippets.measure.provenance.role`); ``placed_by``:
    ``explicit`` or ``constraint``, what put the ``Sharding`` call there, and ``placed_at`` the
    user's line of a constraint."""

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

    def __str__(self) -> str:
        output = "(no output)" if self.output is None else self.output
        loop = "" if self.trips == 1 else f"  x{self.trips or '?'} (in a loop)"
        return f"{self.chain}  {output}  {self.source or ''}".rstrip() + loop


def value_source(
    inst: Instruction, by_name: dict[str, Instruction]
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
                source = by_name.get(source.operands[_tuple_index(current)])
        current = source
    return chain, current


def _tuple_index(inst: Instruction) -> int:
    return int(re.search(r"index=(\d+)", inst.attributes)[1])


def transpose_of_dot_sites(
    hlo_text: str, dims: tuple[int, ...] | None = None
) -> list[TransposeSite]:
    """Every transpose-of-dot site of HLO text (:func:`find_sites` on :func:`read_hlo`)."""
    return find_sites(read_hlo(hlo_text), dims)


def find_sites(program: Program, dims: tuple[int, ...] | None = None) -> list[TransposeSite]:
    """Every transpose fed, through pass-through ops only, by a dot, in ``_site_order``;
    ``dims`` keeps those of that size set. XLA folds ``transpose(dot(a, b))`` into ``dot(b, a)``
    only if nothing stands between. The one definition of a site, whichever reader made
    ``program`` (:func:`read_hlo`, or :func:`snippets.measure.stablehlo.read_stablehlo`)."""
    by_name = program.by_name
    count = runs(program)
    parameters = None  # made for the first site: most modules of a dump have none
    sites = []
    for comp, inst in program.transposes():
        if not _has_dims(inst, dims):
            continue
        chain, origin = value_source(inst, by_name)
        if origin is None or origin.opcode != "dot":
            continue
        between = tuple("Sharding" if is_sharding_call(op) else op.opcode for op in chain)
        kinds = {"Sharding": "barrier", "all-reduce": "all-reduce"}  # in this order
        kind = next((kinds[k] for k in kinds if k in between), "other" if between else "foldable")
        shapes = inst.shape.split("{")[0], origin.shape.split("{")[0]
        where, trips = program.where(origin), count(comp)
        names = inst.name, shapes[0], origin.name
        placed = provenance.placed_by(program, [op for op in chain if is_sharding_call(op)])
        sizes = tuple(sorted(array_shapes(inst.shape)[0][1]))
        parameters = parameters or provenance.Parameters(program)
        found = TransposeSite(*names, between, kind, shapes[1], *where, trips=trips)
        sites.append(
            dataclasses.replace(
                found,
                no_fold=fold.no_fold(program, inst, chain, origin),
                stack=program.stack(origin),
                parameter=parameters.of(origin, sizes),
                placed_by=placed[0],
                placed_at=placed[1],
            )
        )
    reached = _outputs_reached(program, [site.transpose for site in sites])
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


def source_locations(hlo_text: str) -> dict[int, str]:
    """``file:line`` of each stack frame id, from the tables ``as_text(debug_info=True)`` prints."""
    return read_hlo(hlo_text).frames


_CARRIES = _PASS_THROUGH - {"get-tuple-element"} | {"transpose", "add", "custom-call"}
"""Ops that pass a value on whole (same element count) on its way to the module's result."""


def outputs_reached(hlo_text: str, names: list[str]) -> dict[str, int | None]:
    """For each named instruction, the element of the entry's result its value reaches, else None:
    a weight gradient reaches its parameter's output, an activation gradient none."""
    return _outputs_reached(read_hlo(hlo_text), names)


def _outputs_reached(program: Program, names: list[str]) -> dict[str, int | None]:
    """:func:`outputs_reached` on a read program; what each value reaches is worked out once."""
    by_name, owner, roots, entry = program.by_name, program.owner, program.roots, program.entry

    @functools.cache
    def loop_of(comp: str) -> str | None:
        """The ``while`` whose body ``comp`` is, if any."""
        loops = [i for _, i in program.callers_of(comp) if i.opcode == "while"]
        return next((i.name for i in loops if _loop_parts(i).get("body") == comp), None)

    def onward(value: str | tuple[str, int]) -> list:
        """Where ``value`` goes next: instructions, tuple elements, or an entry output's index."""
        found: list = [0] if value == roots.get(entry) else []
        for user, index in program.users(value):
            comp = owner[user.name]
            if user.opcode == "tuple" and roots.get(comp) == user.name and comp == entry:
                found.append(index)
            elif user.opcode == "tuple" and roots.get(comp) == user.name and loop_of(comp):
                found.append((loop_of(comp), index))  # the next iteration's, or the loop's result
            elif user.opcode in ("tuple", "all-reduce") and len(user.operands) > 1:
                found.append((user.name, index))
            elif (
                user.opcode == "get-tuple-element"
                or (user.opcode == "dynamic-update-slice" and index == 1)
                or (user.opcode == "call" and passes_through(user, index))
                or (user.opcode in _CARRIES and _elements(user) == _elements(by_name[value]))
            ):
                found.append(user.name)
        return found

    @functools.cache
    def passes_through(call: Instruction, index: int) -> bool:
        """Whether operand ``index`` of ``call`` reaches its computation's root."""
        callee = _CALLS.search(call.attributes)[1]
        pending, seen = [program.parameter(callee, index)], set()
        while pending:  # within the callee only
            value = pending.pop()
            name = value[0] if isinstance(value, tuple) else value  # an int is an output
            if value not in seen and isinstance(name, str) and owner[name] == callee:
                pending += onward(value)
            seen.add(value)
        return roots.get(callee) in seen

    reached: dict = {}  # value -> the outputs it reaches, worked out once

    def reach(start: str) -> set[int]:
        pending, waiting = [(start, False)], {}
        while pending:  # depth first; a value is done once everything after it is
            value, done = pending.pop()
            if done:
                after = waiting.pop(value)
                reached[value] = set().union(
                    *({n} if isinstance(n, int) else reached.get(n, set()) for n in after)
                )
            elif value not in reached and value not in waiting:
                waiting[value] = after = onward(value)
                pending += [(value, True), *((n, False) for n in after if not isinstance(n, int))]
        return reached[start]

    outputs = {name: reach(name) for name in names}
    return {name: min(found) if found else None for name, found in outputs.items()}


_CALLS = re.compile(r"(?:calls|to_apply)=%?([\w.\-]+)")


def _called(inst: Instruction, comps: dict[str, list[Instruction]]) -> list[Instruction]:
    """The instructions of the computations ``inst`` calls, nested calls included, each once."""
    inside = [i for name in _CALLS.findall(inst.attributes) for i in comps.get(name, [])]
    return list(dict.fromkeys(deeper for i in inside for deeper in (i, *_called(i, comps))))


def kernel_relayouts(
    hlo_text: str, outputs: tuple[int, ...], kernel_elements: set[int]
) -> dict[Instruction, list[Instruction]]:
    """The entry's instructions between a weight-gradient dot and the root's ``outputs`` that are,
    or contain, transposes and copies, with those; walks back through operands of a size in
    ``kernel_elements``, so a same-shaped array on another path (an embedding table) stays out."""
    comps, entry, root = computations(hlo_text)
    by_name = {inst.name: inst for inst in comps.get(entry, [])}
    if root not in by_name:
        raise ValueError("No entry computation with a ROOT instruction in this HLO text.")
    pending = [by_name[root].operands[index] for index in outputs]
    seen: set[str] = set()
    found = {}
    while pending:
        inst = by_name.get(pending.pop())
        if inst is None or inst.name in seen:
            continue
        seen.add(inst.name)
        inside = _called(inst, comps)
        computes_dot = any(i.opcode == "dot" for i in inside)
        if computes_dot or inst.opcode in ("dot", "convolution", "parameter"):
            continue
        if moved := [i for i in (inst, *inside) if i.opcode in ("transpose", "copy")]:
            found[inst] = moved
        if inst.opcode == "get-tuple-element":
            source = by_name.get(inst.operands[0])
            if source is not None and len(source.operands) > _tuple_index(inst):
                seen.add(source.name)
                pending.append(source.operands[_tuple_index(inst)])
        else:
            pending += [o for o in inst.operands if _elements(by_name.get(o)) in kernel_elements]
    return found


def gradient_path(
    hlo_text: str, outputs: tuple[int, ...], kernel_elements: set[int]
) -> list[Instruction]:
    """The entry's instructions from the root's ``outputs`` back to the dots that make them,
    through operands of a size in ``kernel_elements``; unlike :func:`kernel_relayouts` it keeps
    every one, a fusion holding the dot and a whole tuple's collective included."""
    comps, entry, root = computations(hlo_text)
    by_name = {inst.name: inst for inst in comps[entry]}
    pending, seen, path = [by_name[root].operands[i] for i in outputs], set(), []
    while pending:
        inst = by_name.get(pending.pop())
        if inst is None or inst.name in seen or inst.opcode in ("dot", "parameter"):
            continue
        seen.add(inst.name)
        path.append(inst)
        if inst.opcode == "get-tuple-element":
            pending.append(inst.operands[0])
        elif not any(i.opcode == "dot" for i in _called(inst, comps)):
            pending += [o for o in inst.operands if _elements(by_name.get(o)) in kernel_elements]
    return path


_DUMP_NAME = re.compile(r"^module_\d+\.[^.]+\.(?P<index>\d{4})\.(?P<pipeline>[^.]+)\.after_(?P<after>[^.]+)\.before_(?P<before>[^.]+)\.txt$")  # fmt: skip


def parse_dump_name(name: str) -> tuple[int, str, str, str] | None:
    """``(index, pipeline, pass before, pass after)`` of a per-pass dump file name, else None.

    >>> parse_dump_name("module_0001.jit_f.0010.simplification.after_dce.before_algsimp.txt")
    (10, 'simplification', 'dce', 'algsimp')
    """
    match = _DUMP_NAME.match(name)
    return (int(match[1]), match[2], match[3], match[4]) if match else None


PARTITIONER_PASSES = {
    "shardy-xla": "ShardyXLA, xla/service/spmd/shardy/shardy_xla_pass.h (CPU and GPU with Shardy)",
    "spmd-partitioning": "SpmdPartitioner's name, xla/service/spmd/spmd_partitioner.h; XLA:CPU "
    "(cpu_compiler.cc) and XLA:GPU (gpu_spmd_pipeline.cc) both add its subclass "
    "StatefulRngSpmdPartitioner",
    "xla-partitioner": "the TPU compiler's partitioner, as its dumps are quoted in MaxText's "
    "docs/guides/optimization/shard_mode_performance.md (the TPU compiler is not open source)",
}
"""Pass and pipeline names that partition a module, per backend, with where each name comes from."""

SIMPLIFIER_PASSES = {
    "algsimp": "AlgebraicSimplifier, xla/hlo/transforms/simplifiers/algebraic_simplifier.h "
    "(GpuAlgebraicSimplifier keeps the name; TPU dumps quote it too)",
}
"""Pass names of XLA's algebraic simplifier, the pass that folds ``transpose(dot)``."""


def pass_order(dump_files: dict[str, str]) -> dict:
    """Where the first algebraic simplifier and partitioner run (the first dump naming each, else
    None), and the modules that simplifier received and returned, from per-pass dumps by name."""
    dumps = sorted(
        (parsed, text) for name, text in dump_files.items() if (parsed := parse_dump_name(name))
    )
    if not dumps:
        raise ValueError("No per-pass HLO dumps found: compile with xla_dump_hlo_pass_re='.*'.")

    def first(names: dict[str, str], slots: slice = slice(1, 4)) -> tuple:
        """``(index, name, text)`` of the first dump naming one of ``names`` in ``slots``."""
        found = ((parsed[0], name, text) for parsed, text in dumps for name in parsed[slots])
        return next((dump for dump in found if dump[1] in names), (None, None, ""))

    algsimp, _, before = first(SIMPLIFIER_PASSES)
    partitioner, partitioner_pass, _ = first(PARTITIONER_PASSES)
    return {
        "first_algsimp": algsimp,
        "first_spmd_partitioner": partitioner,
        "partitioner_pass": partitioner_pass,
        "partitioner_first": None if None in (algsimp, partitioner) else partitioner < algsimp,
        "module_before_first_algsimp": before,
        "module_after_first_algsimp": first(SIMPLIFIER_PASSES, slice(2, 3))[2],
    }
