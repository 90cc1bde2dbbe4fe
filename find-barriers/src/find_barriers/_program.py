"""HLO text read as :class:`Instruction` records, and :class:`Program`, what every reader of a
module's records asks of it; :func:`read_hlo` makes one from HLO text."""

from __future__ import annotations

import dataclasses
import functools
import re
from collections.abc import Iterable, Mapping, Sequence
from typing import NamedTuple, Protocol, runtime_checkable

_HEADER = re.compile(r"^\s*(?P<root>ROOT\s+)?%?(?P<name>[\w.\-]+)\s*=\s*(?=[(a-z])")
_PLAIN = re.compile(
    r"\s*(ROOT\s+)?%?([\w.\-]+)\s*=\s*([a-z]\w*\[[\d,]*\](?:\{[^}\s]*\})?) ([\w\-]+)"
    r"\(([^()\[\]{}]*)\)(.*)"
)
"""An instruction of one array result and bare-name operands, parsed by this one match."""
_COMMENT = re.compile(r"/\*.*?\*/")  # XLA numbers long operand lists: /*index=5*/%name
_FLAT_GROUP = re.compile(r"\(([^()\[\]{}]*)\)")  # a group with no brackets inside
_COMPUTATION = re.compile(r"^\s*(?P<entry>ENTRY\s+)?%?(?P<name>[\w.\-]+)\s*(?:\(.*)?\{\s*$")
"""A computation's header: ``%name (params) -> shape {``, or ``name {`` (as metadata prints it)."""
_MODULE = re.compile(r"\s*HloModule\s+([\w.\-]+)")
_ALIAS = re.compile(r"\{(\d*)\}: \((\d+), \{\}")
"""An ``input_output_alias`` entry: ``{1}: (0, {}, may-alias)``, output 1 reusing parameter 0."""
HOW_TO_GET_HLO = (
    "pass HLO text: XLA's module_*.before_optimizations.txt from "
    "XLA_FLAGS='--xla_dump_to=DIR --xla_dump_hlo_as_text', or lowered.as_text(dialect=\"hlo\")"
)
MLIR = re.compile(
    r"^[^\S\n]*(module\b|func\.func\b|#loc\d* = |%\S+ = \"?(stablehlo|sdy|func)\.)", re.MULTILINE
)
"""Lines only MLIR has: StableHLO, what ``lowered.as_text()`` gives by default."""
_TABLES = ("FileNames", "FunctionNames", "FileLocations", "StackFrames")  # debug_info's tables

_CALLEE = re.compile(r"\b(?:condition|body|to_apply|calls|true_computation|false_computation)=%?([\w.\-]+)")  # fmt: skip
_BRANCHES = re.compile(r"\bbranch_computations=\{([^}]*)\}")
_OP_NAME = re.compile(r'\bop_name="((?:[^"\\]|\\.)*)"')
_FRAME = re.compile(r"\bstack_frame_id=(\d+)")
_SOURCE = re.compile(r'\bsource_file="((?:[^"\\]|\\.)*)" source_line=(\d+)')
"""Metadata a site reports: the op's name, and its source as a stack frame or as a file and line."""

SAME_VALUE = frozenset({"bitcast", "copy", "reshape", "convert"})
"""Opcodes whose result holds its operand's values, in another shape, layout or type: what the
readers step through when they follow a value."""


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
    parts, depth, start = list[str](), 0, 1
    for index, char in enumerate(text):
        depth += {"(": 1, "[": 1, "{": 1, ")": -1, "]": -1, "}": -1}.get(char, 0)
        if depth == 0:
            return [*parts, text[start:index]], index
        if depth == 1 and char == ",":
            parts.append(text[start:index])
            start = index + 1
    raise ValueError(
        f"Unbalanced brackets in HLO line: {text[:80]!r}"  # pragma: no mutate
    )


def parse_instruction(line: str) -> Instruction | None:
    """Parse one line of HLO text; ``None`` for lines that are not instructions.

    >>> parse_instruction("  ROOT %t = f32[4,2]{1,0} transpose(f32[2,4]{1,0} %d), dimensions={1,0}")
    Instruction(name='t', shape='f32[4,2]{1,0}', opcode='transpose', operands=('d',), attributes=', dimensions={1,0}', root=True)
    >>> parse_instruction("t = (f32[], f32[]) tuple(a, /*index=1*/%b)").operands
    ('a', 'b')
    """
    if plain := _PLAIN.match(line):  # most lines: one array result, operands without brackets
        root, name, shape, opcode, listed, attributes = plain.groups()
        parts = listed.split(",")
    elif header := _HEADER.match(line):
        root, name, rest = header["root"], header["name"], line[header.end() :]
        end = _group(rest)[1] + 1 if rest.startswith("(") else rest.find(" ")
        shape, rest = rest[:end], rest[end:].lstrip()
        opcode = rest.partition("(")[0]
        if opcode == rest:  # no operand list; one cut off (``add(``) is an error below
            return None
        parts, close = _group(rest[len(opcode) :])
        attributes = rest[len(opcode) + close + 1 :]
    else:
        return None
    if "/*" in line:
        parts = [_COMMENT.sub("", part) for part in parts]
    operands = tuple(words[-1].lstrip("%") for part in parts if (words := part.split()))
    return Instruction(name, shape, opcode, operands, attributes, root is not None)


def instructions(hlo_text: str) -> list[Instruction]:
    """Every instruction in an HLO module, in text order, fused computations included."""
    return [inst for line in hlo_text.splitlines() if (inst := parse_instruction(line))]


class Frame(NamedTuple):
    """One frame of an instruction's Python stack: file, line and function ("" where unknown)."""

    file: str
    line: int
    function: str = ""

    def __str__(self) -> str:
        return f"{self.file}:{self.line}"


Value = str | tuple[str, int]
"""A value in a program: an instruction's result, or element ``i`` of its tuple ``(name, i)``."""


@runtime_checkable
class Program(Protocol):
    """What the readers of a module's records ask of it (the site finder, the fold rule, the
    provenance): :class:`HloProgram` answers from HLO text, a StableHLO reader from its MLIR."""

    entry: str
    name: str
    """XLA's name for the module (``jit_train_step``); "" where the text gives none."""

    @property
    def aliases(self) -> Mapping[int, int]:
        """Each entry output that reuses a donated parameter's buffer: output index -> parameter
        number (``input_output_alias``); a donated parameter's update is that output."""

    @property
    def by_name(self) -> Mapping[str, Instruction]: ...
    @property
    def owner(self) -> Mapping[str, str]: ...
    @property
    def roots(self) -> Mapping[str, str]: ...

    def transposes(self) -> list[tuple[str, Instruction]]:
        """``(computation, instruction)`` of every transpose: where the site finder starts."""

    def callers_of(self, computation: str) -> list[tuple[str, Instruction]]:
        """``(computation, instruction)`` of each instruction that calls ``computation``."""

    def users(self, value: Value) -> list[tuple[Instruction, int]]:
        """The instructions that read ``value``, each with the operand it reads it as; a
        ``get-tuple-element`` reads ``(tuple, index)``, not the whole tuple."""

    def op_name(self, inst: Instruction) -> str | None:
        """``inst``'s ``op_name`` metadata, None where it has none."""

    def stack(self, inst: Instruction) -> tuple[Frame, ...]:
        """``inst``'s Python call stack, innermost first."""

    def parameter(self, computation: str, index: int) -> str | None:
        """The name of ``computation``'s parameter ``index``."""

    def known_stacks(self) -> Iterable[tuple[Frame, ...]]:
        """Stacks the module holds beyond those of the instructions asked about (a dump's stack
        frame table), to tell a helper several layers call; empty where there is no such table."""


@dataclasses.dataclass
class HloProgram:
    """A :class:`Program` read from HLO text: each computation's instructions in order, the entry's
    name, and each stack frame id's frames, innermost first (empty without ``debug_info``)."""

    computations: dict[str, list[Instruction]]
    entry: str
    stacks: dict[int, tuple[Frame, ...]] = dataclasses.field(default_factory=dict)
    name: str = ""
    aliases: dict[int, int] = dataclasses.field(default_factory=dict)
    path_map: Sequence[tuple[str, str]] = ()
    """Recorded path prefixes and what to read each as (a dump made on another machine)."""

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
        every = ((comp, inst) for comp, insts in self.computations.items() for inst in insts)
        return [(comp, inst) for comp, inst in every if inst.opcode == "transpose"]

    def callers_of(self, computation: str) -> list[tuple[str, Instruction]]:
        return self._callers.get(computation, [])

    @functools.cached_property
    def _callers(self) -> dict[str, list[tuple[str, Instruction]]]:
        found: dict[str, list[tuple[str, Instruction]]] = {}
        for comp, insts in self.computations.items():
            for inst in insts:
                for callee in dict.fromkeys(callees(inst)):
                    found.setdefault(callee, []).append((comp, inst))
        return found

    def users(self, value: Value) -> list[tuple[Instruction, int]]:
        return self._users.get(value, [])

    @functools.cached_property
    def _users(self) -> dict[Value, list[tuple[Instruction, int]]]:
        found: dict[Value, list[tuple[Instruction, int]]] = {}
        for inst in self.by_name.values():
            element = inst.opcode == "get-tuple-element"  # it reads (tuple, index)
            for index, operand in enumerate(inst.operands):
                value = (operand, tuple_index(inst)) if element else operand
                found.setdefault(value, []).append((inst, index))
        return found

    def op_name(self, inst: Instruction) -> str | None:
        found = _OP_NAME.search(inst.attributes)
        return found and re.sub(r"\\(.)", r"\1", found[1])

    def stack(self, inst: Instruction) -> tuple[Frame, ...]:
        """``inst``'s call stack, innermost first, from a stack frame id, or only the innermost
        frame from XLA's older ``source_file``/``source_line``; ``()`` with neither."""
        if frame := _FRAME.search(inst.attributes):
            return self.stacks.get(int(frame[1]), ())
        source = _SOURCE.search(inst.attributes)
        return (Frame(mapped(source[1], self.path_map), int(source[2])),) if source else ()

    def parameter(self, computation: str, index: int) -> str | None:
        return self._parameters.get((computation, index))

    def known_stacks(self) -> Iterable[tuple[Frame, ...]]:
        return self.stacks.values()

    @functools.cached_property
    def _parameters(self) -> dict[tuple[str, int], str]:
        return {
            (comp, int(inst.operands[0])): inst.name
            for comp, insts in self.computations.items()
            for inst in insts
            if inst.opcode == "parameter"
        }


def callees(inst: Instruction) -> list[str]:
    """The computations ``inst`` calls, in the order its attributes (not metadata) name them."""
    if "=" not in inst.attributes:
        return []
    own = inst.attributes.partition(", metadata=")[0]
    branches = _BRANCHES.search(own)
    listed = [name.strip(" %") for name in branches[1].split(",")] if branches else []
    return [*listed, *_CALLEE.findall(own)]


def mapped(path: str, path_map: Sequence[tuple[str, str]]) -> str:
    """``path`` with the first recorded prefix of ``path_map`` it begins with read as its
    replacement (a whole folder name: ``/srv/a`` is not a prefix of ``/srv/ab``).

    >>> mapped("/home/tpu/proj/model.py", [("/home/tpu/proj", "/ci/checkout")])
    '/ci/checkout/model.py'
    """
    for recorded, local in path_map:
        rest = path[len(recorded) :]
        if path.startswith(recorded) and (not rest or rest[0] == "/" or recorded.endswith("/")):
            return local.rstrip("/") + "/" + rest.lstrip("/") if rest else local
    return path


def read_hlo(hlo_text: str, path_map: Sequence[tuple[str, str]] = ()) -> HloProgram:
    """Read HLO text once: computations, the entry, the stack-frame tables if printed (each
    recorded path mapped by ``path_map``, a whole folder name at a time), the donated parameters; a line
    cut off mid-instruction is an error naming its number, StableHLO is refused, and
    instructions outside any computation go under the name ``""``."""
    if MLIR.search(hlo_text, 0, 100_000):
        raise ValueError(f"StableHLO/MLIR text, not HLO; {HOW_TO_GET_HLO}")
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
        if line.rstrip().endswith("{") and (header := _COMPUTATION.match(line)):
            current = header["name"]
            found[current] = []
            entry = current if header["entry"] else entry
            continue
        try:
            inst = parse_instruction(line)
        except ValueError:
            raise ValueError(
                f"line {number} is not a whole instruction: {line[:60]!r}; is the text cut off?"  # pragma: no mutate
            ) from None
        if inst is None:
            continue
        if inst.opcode == "parameter" and not (inst.operands and inst.operands[0].isdigit()):
            raise ValueError(
                f"line {number}: a parameter with no number: {line[:60]!r}"  # pragma: no mutate
            )
        found.setdefault(current, []).append(inst)
    if "#" in hlo_text:
        _add_element_reads(found)
    module = _MODULE.match(hlo_text)
    first = hlo_text[: hlo_text.find("\n", module.end())] if module else ""
    aliases = {int(out or 0): int(param) for out, param in _ALIAS.findall(first)}
    files = tables["FileNames"]
    tables["FileNames"] = {key: mapped(file, path_map) for key, file in files.items()}
    name = module[1] if module else ""
    return HloProgram(found, entry, _stacks(tables), name, aliases, tuple(path_map))


def _add_element_reads(computations: dict[str, list[Instruction]]) -> None:
    """Give each ``%state#2`` operand, HLO's shorthand for element 2 of tuple ``state`` (JAX 0.12's
    dumps read a loop's state so, with no ``get-tuple-element``), a ``get-tuple-element`` record of
    that name, placed after the tuple it reads."""
    for comp, insts in computations.items():
        shapes = {inst.name: inst.shape for inst in insts}
        reads: dict[str, set[str]] = {}
        for inst in insts:
            for operand in inst.operands:
                if "#" in operand and operand not in shapes:
                    reads.setdefault(operand.rpartition("#")[0], set()).add(operand)
        found = []
        for inst in insts:
            ordered = sorted(reads.pop(inst.name, ()), key=lambda name: (len(name), name))
            found += [inst, *(_element_read(read, inst) for read in ordered)]
        if reads:
            missing = min(name for names in reads.values() for name in names)
            raise ValueError(
                f"{missing} reads an element of {missing.rpartition('#')[0]}, which is not a tuple here"  # pragma: no mutate
            )
        computations[comp] = found


def _element_read(read: str, tuple_inst: Instruction) -> Instruction:
    """The ``get-tuple-element`` record of ``read`` (``state#2``), element of ``tuple_inst``."""
    index = read.rpartition("#")[2]
    elements = _group(_COMMENT.sub("", tuple_inst.shape))[0] if tuple_inst.shape[:1] == "(" else []
    if not index.isdigit() or int(index) >= len(elements):
        raise ValueError(f"{read} reads past the end of {tuple_inst.name}")
    shape = elements[int(index)].strip()
    return Instruction(read, shape, "get-tuple-element", (tuple_inst.name,), f", index={index}")


def _stacks(tables: dict[str, dict[int, str]]) -> dict[int, tuple[Frame, ...]]:
    """Each stack frame id's frames, innermost first, from the tables XLA prints at the top of a
    dump (and ``as_text(debug_info=True)``). XLA's text gives each frame's parent one above its
    id, so frame 1, the outermost, reads ``parent_frame_id=1``; where no frame names itself, the
    ids are taken as they stand, 0 meaning none."""
    places = {}
    for key, text in tables["FileLocations"].items():
        place = dict(re.findall(r"(\w+)=(\d+)", text))
        file = tables["FileNames"].get(int(place["file_name_id"]), "?")
        function = tables["FunctionNames"].get(int(place.get("function_name_id", 0)), "")
        places[key] = Frame(file, int(place["line"]), function)
    frames = {
        key: tuple(int(n) for n in re.findall(r"(?:file_location_id|parent_frame_id)=(\d+)", text))
        for key, text in tables["StackFrames"].items()
    }
    shift = int(any(key == frame[-1] for key, frame in frames.items() if len(frame) == 2))

    def chain(key: int) -> tuple[Frame, ...]:
        found, seen = [], set()
        while key in frames and key not in seen:
            seen.add(key)
            location, *parent = frames[key]
            found.append(places.get(location, Frame("?", 0)))
            key = parent[0] - shift if parent else 0
        return tuple(found)

    return {key: chain(key) for key in frames}


def is_sharding_call(inst: Instruction) -> bool:
    """Whether ``inst`` is the ``Sharding`` custom call that sharding-in-types lowering emits."""
    return inst.opcode == "custom-call" and 'custom_call_target="Sharding"' in inst.attributes


_HANDING_ON = re.compile(
    r'custom_call_target="(?:Sharding|SPMDFullToShardShape|SPMDShardToFullShape|xla\.sdy\.\w+|'
    r'MoveToHost|MoveToDevice|LayoutConstraint)"'
)


def hands_on(inst: Instruction) -> bool:
    """Whether ``inst`` is a custom call that hands its operands on as its results: a sharding,
    a manual computation's local or global shape, a memory placement."""
    return inst.opcode == "custom-call" and _HANDING_ON.search(inst.attributes) is not None


def passes_on(inst: Instruction) -> bool:
    """Whether ``inst`` hands its operand's values on unchanged: a :data:`SAME_VALUE` op or a
    ``Sharding`` call."""
    return inst.opcode in SAME_VALUE or is_sharding_call(inst)


def behind(name: str, by_name: Mapping[str, Instruction]) -> Instruction | None:
    """What makes value ``name``, past ops that pass it on (:func:`passes_on`); None if not held."""
    inst = by_name.get(name)
    while inst is not None and inst.operands and passes_on(inst):
        inst = by_name.get(inst.operands[0])
    return inst


def attribute_dims(attributes: str, name: str) -> tuple[int, ...]:
    """The integers of ``name={...}`` in an instruction's attributes; ``()`` where absent.

    >>> attribute_dims(", lhs_batch_dims={0,1}, lhs_contracting_dims={3}", "lhs_batch_dims")
    (0, 1)
    """
    found = re.search(rf"\b{name}=\{{([\d,]*)\}}", attributes)
    return tuple(int(d) for d in found[1].split(",") if d) if found else ()


def tuple_index(inst: Instruction) -> int:
    """Which element of its operand a ``get-tuple-element`` reads."""
    if found := re.search(r"index=(\d+)", inst.attributes):
        return int(found[1])
    raise ValueError(f"get-tuple-element {inst.name} names no index=: is the file edited?")
