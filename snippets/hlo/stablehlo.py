"""A lowered program's StableHLO module read as :mod:`snippets.hlo`'s records, on demand.

Printing ``lowered.compiler_ir()`` as HLO text costs seconds on a large model; this walks it
with the MLIR Python bindings and makes the records XLA's conversion to HLO would print only for
the operations the site finder reaches (a few thousand of a llama2-7b step's tens of thousands).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator, Mapping
from typing import Any

from jax.extend.mlir import ir

from find_barriers.program import Frame, Instruction, Value
from find_barriers.shapes import elements

_OPCODES = {
    "stablehlo.dot_general": "dot",
    "stablehlo.broadcast_in_dim": "broadcast",
    "sdy.sharding_constraint": "custom-call",
    "sdy.reshard": "custom-call",
    "func.call": "call",
}
"""MLIR operations whose HLO opcode is not their name after the dialect with ``_`` as ``-``;
Shardy's constraints become the ``Sharding`` custom call."""
_TERMINATORS = {"func.return", "stablehlo.return", "sdy.return"}
_DTYPES = {"i1": "pred", "complex<f32>": "c64", "complex<f64>": "c128"}
_DETAILED = {"broadcast", "call", "compare", "constant", "custom-call", "dot", "transpose"}
"""Opcodes whose record needs more than the operation's name (:func:`_details`)."""


def hlo_shape(mlir_type: str) -> str:
    """A tensor type as HLO writes it.

    >>> hlo_shape("tensor<8x16xf32>"), hlo_shape("tensor<i32>"), hlo_shape("tensor<4xui8>")
    ('f32[8,16]', 's32[]', 'u8[4]')
    """
    if not mlir_type.startswith("tensor<"):
        return mlir_type
    *dims, dtype = mlir_type[7:-1].split("x")
    dtype = _DTYPES.get(dtype) or dtype.lower().replace("ui", "u").replace("i", "s")
    return f"{dtype}[{','.join(dims)}]"


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
    """A StableHLO module (``lowered.compiler_ir()``) as the :class:`~find_barriers.program.Program`
    the site finder reads, its entry the function ``main``, laid out as XLA's conversion to HLO
    lays it out (several results a tuple and one element each, a loop's state one tuple, a region
    a computation); records hold only what the readers use (which is a root: ``roots`` says)."""

    def __init__(self, module: Any) -> None:
        self.entry = "main"
        name = module.operation.attributes.get("sym_name")  # a StringAttr, printed quoted
        self.name = "" if name is None else str(name).strip('"')
        self.handles: dict[str, tuple] = {}  # a record's name -> what it is made from
        self.computations: dict[str, tuple[Any, bool, bool]] = {}  # name -> block and tuples
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
        for op in module.body.operations:
            if op.operation.name == "func.func":
                self._computation(_symbol(op.attributes["sym_name"]), op.regions[0].blocks[0])
        module.operation.walk(self._visit)

    def _visit(self, op: Any) -> ir.WalkResult:
        """Note what the finder starts from, and what it cannot reach from there: transposes,
        and each function's calls."""
        if op.name == "stablehlo.transpose":
            self.found_transposes.append(op)
        elif op.name == "func.call":
            self.calls_to.setdefault(_symbol(op.attributes["callee"]), []).append(op)
        return ir.WalkResult.ADVANCE

    def _kind(self, op: Any) -> tuple[str, int]:
        """An operation's HLO opcode and number of regions, worked out once per kind."""
        if (kind := self.kinds.get(op.name)) is None:
            opcode = _OPCODES.get(op.name) or op.name.partition(".")[2].replace("_", "-")
            kind = self.kinds[op.name] = opcode, len(op.regions)
        return kind

    def _computation(
        self, name: str, block: Any, state: bool = False, tuple_root: bool = False
    ) -> str:
        """Register ``block`` as computation ``name``; ``state``: its arguments arrive as one
        tuple (a loop's), ``tuple_root``: its results leave as one tuple even when one."""
        self.computations[name], self.blocks[block] = (block, state, tuple_root), name
        return name

    def _register(self, name: str, *handle: Any) -> str:
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
            self.handles[name] = ("op", op)
        return name

    def _value_name(self, value: Any) -> str:
        """The record that holds an MLIR value: its operation's, a tuple element, a parameter."""
        if isinstance(value, ir.OpResult):
            op = value.owner.operation
            if not _tupled(op):
                return self._name(op)
            return self._element(op, value.result_number)
        comp, number = self._block(value.owner), value.arg_number
        if not self.computations[comp][1]:
            return self._register(f"{comp}.arg{number}", "arg", comp, number)
        self._register(f"{comp}.state", "state", comp)
        return self._state_element(comp, number)

    def _element(self, op: Any, number: int) -> str:
        """The record of element ``number`` of a tupled operation's results."""
        return self._register(f"{self._name(op)}.{number}", "element", op, number)

    def _state_element(self, comp: str, number: int) -> str:
        """The record of element ``number`` of a loop computation's state tuple."""
        return self._register(f"{comp}.state.{number}", "state element", comp, number)

    def _init(self, loop: Any) -> str:
        """The record of the tuple a ``while`` loop starts from."""
        return self._register(f"{self._name(loop)}.init", "init", loop)

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
        operands: tuple[str, ...]
        kind, first, *rest = self.handles[name]
        if kind == "op":
            return self._operation(name, first)
        if kind == "element":
            shape, operands = self._shape(first.results[rest[0]]), (self._name(first),)
            return Instruction(name, shape, "get-tuple-element", operands, f", index={rest[0]}")
        if kind == "init":
            operands = tuple(map(self._value_name, first.operands))
            return Instruction(name, self._tuple_shape(first.operands), "tuple", operands, "")
        block = self.computations[first][0]
        if kind == "arg":
            shape = self._shape(block.arguments[rest[0]])
            return Instruction(name, shape, "parameter", (str(rest[0]),), "")
        if kind == "state":
            return Instruction(name, self._tuple_shape(block.arguments), "parameter", ("0",), "")
        if kind == "state element":
            shape, operands = self._shape(block.arguments[rest[0]]), (f"{first}.state",)
            return Instruction(name, shape, "get-tuple-element", operands, f", index={rest[0]}")
        values = _terminator(block).operands  # the root tuple
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
        elif opcode in _DETAILED:
            opcode, operands, attributes = _details(op, opcode, operands, self._shape)
        results = op.results
        tupled = len(results) != 1 or opcode == "while"  # as _tupled, without asking again
        shape = self._tuple_shape(results) if tupled else self._shape(results[0])
        return Instruction(name, shape, opcode, operands, attributes)

    def _owner(self, name: str) -> str:
        kind, first, *_ = self.handles[name]
        return self._block(first.block) if kind in ("op", "element", "init") else first

    def _root(self, comp: str) -> str:
        block, _, tuple_root = self.computations[comp]
        values = _terminator(block).operands
        if len(values) == 1 and not tuple_root:
            return self._value_name(values[0])
        return self._register(f"{comp}.root", "root", comp)

    def transposes(self) -> list[tuple[str, Instruction]]:
        """Every transpose, noted by the walk."""
        return [
            (self.owner[name], self.by_name[name])
            for name in map(self._name, self.found_transposes)
        ]

    def callers_of(self, computation: str) -> list[tuple[str, Instruction]]:
        """A region's operation, or a function's calls."""
        found = self.computations.get(computation)
        parent = found[0].owner.operation if found else None
        if parent is None or computation == self.entry:
            return []
        ops = self.calls_to.get(computation, []) if parent.name == "func.func" else [parent]
        return [(self.owner[name], self.by_name[name]) for name in map(self._name, ops)]

    def users(self, value: Value) -> list[tuple[Instruction, int]]:
        """Made from the MLIR value's uses; a loop's state is read through its init tuple."""
        if isinstance(value, tuple):  # an element of a tuple: its get-tuple-element
            return self._element_users(*value)
        kind, first, *rest = self.handles.get(value, ("?", None))
        if kind == "init":
            return [(self.by_name[self._name(first)], 0)]
        if kind == "op" and not _tupled(first):
            return self._uses(first.results[0])
        if kind == "element":
            return self._uses(first.results[rest[0]])
        if kind in ("arg", "state element"):
            return self._uses(self.computations[first][0].arguments[rest[0]])
        return []

    def _element_users(self, name: str, index: int) -> list[tuple[Instruction, int]]:
        """The get-tuple-element that reads element ``index`` of tuple ``name``."""
        kind, first, *_ = self.handles.get(name, ("?", None))
        if kind == "op" and _tupled(first):
            return [(self.by_name[self._element(first, index)], 0)]
        if kind == "state":
            return [(self.by_name[self._state_element(first, index)], 0)]
        return []

    def _uses(self, mlir_value: Any) -> list[tuple[Instruction, int]]:
        """The records that read ``mlir_value``: a return is its block's root tuple, a loop's
        operand its init tuple."""
        found = []
        for use in mlir_value.uses:
            user, index = use.owner.operation, use.operand_number
            if user.name in _TERMINATORS:
                root = self.roots[self._block(user.block)]
                if self.handles[root][0] == "root":
                    found.append((self.by_name[root], index))
            elif user.name == "stablehlo.while":
                found.append((self.by_name[self._init(user)], index))
            else:
                found.append((self.by_name[self._name(user)], index))
        return found

    def _location(self, inst: Instruction) -> Any:
        """The MLIR location of the operation or function argument behind a record, if any."""
        kind, first, *rest = self.handles[inst.name]
        if kind == "arg":
            return self.computations[first][0].arguments[rest[0]].location
        return first.location if kind == "op" else None

    def op_name(self, inst: Instruction) -> str | None:
        """The location's name, as XLA's conversion to HLO takes it for ``op_name``."""
        location = self._location(inst)
        return location.name_str if type(location).__name__ == "NameLoc" else None

    def stack(self, inst: Instruction) -> tuple[Frame, ...]:
        """The location's frames, innermost first (each record's read once)."""
        if (found := self.stacks.get(inst.name)) is None:
            found = self.stacks[inst.name] = _frames(self._location(inst))
        return found

    def known_stacks(self) -> tuple[()]:
        """No stacks beyond those asked about: a lowered module's locations are read only for
        the records the site finder asks for."""
        return ()

    def parameter(self, computation: str, index: int) -> str | None:
        """A function's parameter ``index``."""
        found = self.computations.get(computation)
        if found is None or found[1] or index >= len(found[0].arguments):
            return None
        return self._register(f"{computation}.arg{index}", "arg", computation, index)


def _frames(location: Any) -> tuple[Frame, ...]:
    """The frames of a location, innermost first, walked through MLIR's location classes,
    ``NameLoc(op_name, CallSiteLoc(callee, caller))`` with each callee
    ``NameLoc(function, FileLineColLoc)`` (printing it and parsing the text costs six times as
    much)."""
    if type(location).__name__ == "NameLoc":  # the op_name
        location = location.child_loc
    frames, pending = [], [(location, "")]
    while pending:
        location, function = pending.pop()
        kind = type(location).__name__
        if kind == "CallSiteLoc":
            pending += [(location.caller, ""), (location.callee, "")]  # the callee first
        elif kind == "NameLoc":
            pending.append((location.child_loc, location.name_str))
        elif kind == "FileLineColLoc":
            frames.append(Frame(location.filename, location.start_line, function))
    return tuple(frames)


def _symbol(attribute: Any) -> str:
    """A function's name (``@"<lambda>"`` as printed) as a computation name: ``_lambda_``."""
    return re.sub(r"[^\w.\-]", "_", str(attribute).lstrip("@").strip('"'))


def _tupled(op: Any) -> bool:
    """Whether HLO holds an operation's results as a tuple: several, or a loop's state."""
    return len(op.results) != 1 or op.name == "stablehlo.while"


def _terminator(block: Any) -> Any:
    operations = block.operations
    return operations[len(operations) - 1]


def _details(op: Any, opcode: str, operands: tuple, shape: Callable) -> tuple[str, tuple, str]:
    """The opcode, operands and attributes of an operation whose record needs more than its
    name: a broadcast that only adds dimensions of size 1 (XLA makes it a reshape), a call's
    callee, a comparison's direction, an integer scalar constant's value, a custom call's target
    (``Sharding`` for Shardy's constraints)."""
    if opcode == "broadcast":
        same = elements(shape(op.results[0])) == elements(shape(op.operands[0]))
        return ("reshape" if same else opcode), operands, ""
    if opcode == "call":
        return opcode, operands, f", to_apply={_symbol(op.attributes['callee'])}"
    if opcode == "transpose":
        order = ",".join(map(str, ir.DenseI64ArrayAttr(op.attributes["permutation"])))
        return opcode, operands, f", dimensions={{{order}}}"
    if opcode == "dot":
        numbers = str(op.attributes["dot_dimension_numbers"])
        parts = [
            f", {side}_{kind}_dims={{{found[1].replace(' ', '') if found else ''}}}"
            for side in ("lhs", "rhs")
            for kind in ("batch", "contracting")
            if (found := re.search(rf"{side}_{kind}\w* = \[([\d, ]*)\]", numbers))
            or kind == "contracting"
        ]
        return opcode, operands, "".join(parts)
    if opcode == "compare":
        direction = re.search(r"direction (\w+)", str(op.attributes["comparison_direction"]))
        return opcode, operands, f", direction={direction[1] if direction else '?'}"
    if opcode == "constant":
        value = re.fullmatch(r"dense<(-?\d+)> : tensor<u?i\d+>", str(op.attributes["value"]))
        return opcode, (value[1],) if value else (), ""
    custom = op.name == "stablehlo.custom_call"  # the one detailed opcode left: a custom call
    target = op.attributes["call_target_name"] if custom else '"Sharding"'
    return opcode, operands, f", custom_call_target={target}"
