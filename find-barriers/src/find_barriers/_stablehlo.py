"""A lowered program's StableHLO module read as :class:`~find_barriers._program.Instruction`
records, on demand: walked with the MLIR Python bindings (its HLO text costs seconds to print on a
large model), a record made only for each operation the site finder reaches (a few thousand of a
llama2-7b step's tens of thousands)."""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Callable, Iterator, Mapping
from typing import Any, NamedTuple

from jax.extend.mlir import ir

from find_barriers._mlir_operations import (
    DETAILED,
    OPCODES,
    TERMINATORS,
    details,
    hlo_shape,
    location_frames,
    symbol,
    terminator,
    tupled,
)
from find_barriers._program import Frame, Instruction, Value

# ruff: noqa: UP014 - the record kinds read best as one line each, documented together here
# What a record is made from, one type each: an operation's result, or a tupled operation's
# results as one tuple; element ``index`` of those (a ``get-tuple-element``); the tuple a
# ``while`` loop starts from; argument ``index`` of a computation whose arguments arrive one by
# one; a loop computation's arguments, which arrive as one tuple, and element ``index`` of them;
# a computation's results returned as one tuple.
_Op = NamedTuple("_Op", [("op", Any)])
_Element = NamedTuple("_Element", [("op", Any), ("index", int)])
_Init = NamedTuple("_Init", [("loop", Any)])
_Argument = NamedTuple("_Argument", [("computation", str), ("index", int)])
_State = NamedTuple("_State", [("computation", str)])
_StateElement = NamedTuple("_StateElement", [("computation", str), ("index", int)])
_Root = NamedTuple("_Root", [("computation", str)])
_Handle = _Op | _Element | _Init | _Argument | _State | _StateElement | _Root
"""What a record is made from."""


@dataclasses.dataclass(frozen=True, slots=True)
class _Computation:
    """A block, and whether its arguments (``state``) and results (``tuple_root``) are tuples."""

    block: Any
    state: bool
    tuple_root: bool


class _OnDemand(Mapping):
    """A mapping over ``known``'s keys whose values ``make`` computes on first access."""

    def __init__(self, make: Callable[[str], Any], known: Mapping) -> None:
        self.make, self.known, self.made = make, known, dict[str, Any]()

    def __getitem__(self, key: str) -> Any:
        if key not in self.made:
            if key not in self.known:
                raise KeyError(key)
            self.made[key] = self.make(key)
        return self.made[key]

    def get(self, key: str, default: Any = None) -> Any:
        """As a dict's ``get``: without ``Mapping.get``'s exception for every key it lacks."""
        return self[key] if key in self.made or key in self.known else default

    def __iter__(self) -> Iterator[str]:
        return iter(self.known)

    def __len__(self) -> int:
        return len(self.known)


class StableHLOProgram:
    """A StableHLO module (``lowered.compiler_ir()``) as the
    :class:`~find_barriers._program.Program` the site finder reads, its entry the function
    ``main``, laid out as XLA's conversion to HLO lays it out (several results a tuple and one
    element each, a loop's state one tuple, a region a computation); records hold only what the
    readers use (which is a root: ``roots`` says)."""

    def __init__(self, module: Any) -> None:
        self.entry = "main"
        name = module.operation.attributes.get("sym_name")  # a StringAttr, printed quoted
        self.name = "" if name is None else str(name).strip('"')
        self.handles: dict[str, _Handle] = {}  # a record's name -> what it is made from
        self.computations: dict[str, _Computation] = {}
        self.blocks: dict[Any, str] = {}  # MLIR block -> computation
        self.names: dict[Any, str] = {}  # MLIR operation -> record name
        self.shapes: dict[Any, str] = {}  # MLIR type -> HLO shape
        self.kinds: dict[str, tuple[str, int]] = {}  # operation name -> opcode, regions
        self.found_transposes: list[Any] = []
        self.stacks: dict[str, tuple[Frame, ...]] = {}  # record name -> its location's frames
        self.calls_to: dict[str, list[Any]] = {}  # function -> the calls of it
        self.by_name = _OnDemand(self._record, self.handles)
        self.owner = _OnDemand(self._owner, self.handles)
        self.roots = _OnDemand(self._root, self.computations)
        self.aliases: dict[int, int] = {}  # output -> the donated argument whose buffer it reuses
        for op in module.body.operations:
            if op.operation.name == "func.func":
                self._computation(symbol(op.attributes["sym_name"]), op.regions[0].blocks[0])
        main = self.computations[self.entry].block.owner.operation
        meshes = _meshes(module)
        self.shardings: dict[int, str] = {}  # entry argument -> its sharding, as HLO prints it
        if "arg_attrs" in main.attributes:
            for number, attributes in enumerate(main.attributes["arg_attrs"]):
                if "tf.aliasing_output" in attributes:
                    self.aliases[attributes["tf.aliasing_output"].value] = number
                if "sdy.sharding" in attributes:
                    self.shardings[number] = _hlo_sharding(str(attributes["sdy.sharding"]), meshes)
        module.operation.walk(self._visit)

    def _visit(self, op: Any) -> ir.WalkResult:
        """Note what the finder starts from, and what it cannot reach from there: transposes,
        and each function's calls."""
        if op.name == "stablehlo.transpose":
            self.found_transposes.append(op)
        elif op.name == "func.call":
            self.calls_to.setdefault(symbol(op.attributes["callee"]), []).append(op)
        return ir.WalkResult.ADVANCE

    def _kind(self, op: Any) -> tuple[str, int]:
        """An operation's HLO opcode and number of regions, worked out once per kind."""
        if (kind := self.kinds.get(op.name)) is None:
            opcode = OPCODES.get(op.name) or op.name.partition(".")[2].replace("_", "-")
            kind = self.kinds[op.name] = opcode, len(op.regions)
        return kind

    def _computation(
        self, name: str, block: Any, state: bool = False, tuple_root: bool = False
    ) -> str:
        """Register ``block`` as computation ``name``; ``state``: its arguments arrive as one
        tuple (a loop's), ``tuple_root``: its results leave as one tuple even when one."""
        self.computations[name] = _Computation(block, state, tuple_root)
        self.blocks[block] = name
        return name

    def _register(self, name: str, handle: _Handle) -> str:
        self.handles.setdefault(name, handle)
        return name

    def _shape(self, value: Any) -> str:
        if (shape := self.shapes.get(value.type)) is None:
            shape = self.shapes[value.type] = hlo_shape(str(value.type))
        return shape

    def _tuple_shape(self, values: Any) -> str:
        return f"({', '.join(self._shape(value) for value in values)})"

    def _name(self, op: Any) -> str:
        """The record name of an operation (``dot.12``), given when first asked for."""
        if (name := self.names.get(op)) is None:
            name = self.names[op] = f"{self._kind(op)[0]}.{len(self.names) + 1}"
            self.handles[name] = _Op(op)
        return name

    def _value_name(self, value: Any) -> str:
        """The record that holds an MLIR value: its operation's, a tuple element, a parameter."""
        if isinstance(value, ir.OpResult):
            op = value.owner.operation
            return self._element(op, value.result_number) if tupled(op) else self._name(op)
        comp, number = self._block(value.owner), value.arg_number
        if not self.computations[comp].state:
            return self._register(f"{comp}.arg{number}", _Argument(comp, number))
        self._register(f"{comp}.state", _State(comp))
        return self._state_element(comp, number)

    def _element(self, op: Any, number: int) -> str:
        return self._register(f"{self._name(op)}.{number}", _Element(op, number))

    def _state_element(self, comp: str, number: int) -> str:
        return self._register(f"{comp}.state.{number}", _StateElement(comp, number))

    def _init(self, loop: Any) -> str:
        return self._register(f"{self._name(loop)}.init", _Init(loop))

    def _block(self, block: Any) -> str:
        """The computation a block is: a function's body, or a region of an operation."""
        if (comp := self.blocks.get(block)) is None:
            parent = block.owner.operation
            index = next(i for i, region in enumerate(parent.regions) if region == block.region)
            loop = parent.name == "stablehlo.while"
            part = ("cond", "body")[index] if loop else f"region{index}"
            comp = self._computation(f"{self._name(parent)}.{part}", block, loop, part == "body")
        return comp

    def _record(self, name: str) -> Instruction:
        """The record ``name`` as XLA's conversion to HLO would print it."""
        operands: tuple[str, ...]
        match self.handles[name]:
            case _Op(op):
                return self._operation(name, op)
            case _Element(op, index):
                shape, operands = self._shape(op.results[index]), (self._name(op),)
                return Instruction(name, shape, "get-tuple-element", operands, f", index={index}")
            case _Init(loop):
                operands = tuple(map(self._value_name, loop.operands))
                return Instruction(name, self._tuple_shape(loop.operands), "tuple", operands, "")
            case _Argument(comp, index):
                shape = self._shape(self.computations[comp].block.arguments[index])
                sharding = self.shardings.get(index, "") if comp == self.entry else ""
                return Instruction(name, shape, "parameter", (str(index),), sharding)
            case _State(comp):
                shape = self._tuple_shape(self.computations[comp].block.arguments)
                return Instruction(name, shape, "parameter", ("0",), "")
            case _StateElement(comp, index):
                shape = self._shape(self.computations[comp].block.arguments[index])
                operands = (f"{comp}.state",)
                return Instruction(name, shape, "get-tuple-element", operands, f", index={index}")
            case _Root(comp):
                values = terminator(self.computations[comp].block).operands
                operands = tuple(map(self._value_name, values))
                return Instruction(name, self._tuple_shape(values), "tuple", operands, "", True)

    def _operation(self, name: str, op: Any) -> Instruction:
        """An operation's record; its regions become computations it calls."""
        opcode, regions = self._kind(op)
        operands = tuple(map(self._value_name, op.operands))
        attributes = ""
        if opcode == "while":
            cond, body = (self._block(region.blocks[0]) for region in op.regions)
            init = self._init(op)
            operands, attributes = (init,), f", condition={cond}, body={body}"
        elif regions:
            called = [self._block(region.blocks[0]) for region in op.regions if len(region.blocks)]
            attributes = f", to_apply={called[0]}" if len(called) == 1 else ""
            attributes = attributes or f", branch_computations={{{', '.join(called)}}}"
        elif opcode in DETAILED:
            opcode, operands, attributes = details(op, opcode, operands, self._shape)
        results = op.results
        tupled = len(results) != 1 or opcode == "while"  # as tupled, without asking again
        shape = self._tuple_shape(results) if tupled else self._shape(results[0])
        return Instruction(name, shape, opcode, operands, attributes)

    def _owner(self, name: str) -> str:
        match self.handles[name]:
            case _Op(op) | _Element(op) | _Init(op):
                return self._block(op.block)
            case handle:
                return handle.computation

    def _root(self, comp: str) -> str:
        found = self.computations[comp]
        values = terminator(found.block).operands
        if len(values) == 1 and not found.tuple_root:
            return self._value_name(values[0])
        return self._register(f"{comp}.root", _Root(comp))

    def transposes(self) -> list[tuple[str, Instruction]]:
        """Every transpose, noted by the walk."""
        return [
            (self.owner[name], self.by_name[name])
            for name in map(self._name, self.found_transposes)
        ]

    def callers_of(self, computation: str) -> list[tuple[str, Instruction]]:
        """A region's operation, or a function's calls."""
        found = self.computations.get(computation)
        parent = found.block.owner.operation if found else None
        if parent is None or computation == self.entry:
            return []
        ops = self.calls_to.get(computation, []) if parent.name == "func.func" else [parent]
        return [(self.owner[name], self.by_name[name]) for name in map(self._name, ops)]

    def users(self, value: Value) -> list[tuple[Instruction, int]]:
        """Made from the MLIR value's uses; a loop's state is read through its init tuple."""
        if isinstance(value, tuple):  # an element of a tuple: its get-tuple-element
            name, index = value
            match self.handles.get(name):
                case _Op(op) if tupled(op):
                    return [(self.by_name[self._element(op, index)], 0)]
                case _State(comp):
                    return [(self.by_name[self._state_element(comp, index)], 0)]
            return []
        match self.handles.get(value):
            case _Init(loop):
                return [(self.by_name[self._name(loop)], 0)]
            case _Op(op) if not tupled(op):
                return self._uses(op.results[0])
            case _Element(op, index):
                return self._uses(op.results[index])
            case _Argument(comp, index) | _StateElement(comp, index):
                return self._uses(self.computations[comp].block.arguments[index])
        return []

    def _uses(self, mlir_value: Any) -> list[tuple[Instruction, int]]:
        """The records that read ``mlir_value``: a return is its block's root tuple, a loop's
        operand its init tuple."""
        found = []
        for use in mlir_value.uses:
            user, index = use.owner.operation, use.operand_number
            if user.name in TERMINATORS:
                root = self.roots[self._block(user.block)]
                if isinstance(self.handles.get(root), _Root):
                    found.append((self.by_name[root], index))
            elif user.name == "stablehlo.while":
                found.append((self.by_name[self._init(user)], index))
            else:
                found.append((self.by_name[self._name(user)], index))
        return found

    def _location(self, inst: Instruction) -> Any:
        """The MLIR location of the operation or function argument behind a record, if any."""
        match self.handles[inst.name]:
            case _Argument(comp, index):
                return self.computations[comp].block.arguments[index].location
            case _Op(op):
                return op.location
        return None

    def op_name(self, inst: Instruction) -> str | None:
        """The location's name, as XLA's conversion to HLO takes it for ``op_name``."""
        location = self._location(inst)
        return location.name_str if type(location).__name__ == "NameLoc" else None

    def stack(self, inst: Instruction) -> tuple[Frame, ...]:
        """The location's frames, innermost first (each record's read once)."""
        if (found := self.stacks.get(inst.name)) is None:
            found = self.stacks[inst.name] = location_frames(self._location(inst))
        return found

    def known_stacks(self) -> tuple[()]:
        """No stacks beyond those asked about: a lowered module's locations are read only for
        the records the site finder asks for."""
        return ()

    def parameter(self, computation: str, index: int) -> str | None:
        """A function's parameter ``index``."""
        found = self.computations.get(computation)
        if found is None or found.state or index >= len(found.block.arguments):
            return None
        return self._register(f"{computation}.arg{index}", _Argument(computation, index))


def _meshes(module: Any) -> dict[str, str]:
    """The module's Shardy meshes by name, each as HLO prints one: ``'fsdp'=4, 'data'=2``."""
    found = {}
    for op in module.body.operations:
        if op.operation.name == "sdy.mesh":
            axes = re.findall(r'"([^"]+)"\s*=\s*(\d+)', str(op.attributes["mesh"]))
            found[str(op.attributes["sym_name"]).strip('"')] = ", ".join(
                f"'{a}'={n}" for a, n in axes
            )
    return found


def _hlo_sharding(text: str, meshes: Mapping[str, str]) -> str:
    """An argument's ``#sdy.sharding<@mesh, [{"fsdp"}, {}]>`` as HLO prints a parameter's:
    ``, sharding={mesh['fsdp'=4], [{'fsdp'}, {}]}``; empty for a mesh the module does not name.

    >>> _hlo_sharding('#sdy.sharding<@mesh, [{"fsdp"}, {}, {?}]>', {"mesh": "'fsdp'=4"})
    ", sharding={mesh['fsdp'=4], [{'fsdp'}, {}, {}]}"
    """
    found = re.match(r"#sdy\.sharding<@([\w.$-]+), \[(.*?)\]", text)
    if not found or found[1] not in meshes:
        return ""
    dims = re.findall(r"\{([^}]*)\}", found[2])
    axes = [", ".join(f"'{a}'" for a in re.findall(r'"([^"]+)"', d)) for d in dims]
    return f", sharding={{mesh[{meshes[found[1]]}], [{', '.join(f'{{{a}}}' for a in axes)}]}}"
