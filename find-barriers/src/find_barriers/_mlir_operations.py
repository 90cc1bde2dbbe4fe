"""One MLIR operation of a lowered module as XLA's conversion to HLO prints it: its opcode, shape
and the attributes the site finder reads, and its location's frames."""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

from jax.extend.mlir import ir

from find_barriers._program import Frame
from find_barriers._shapes import elements

OPCODES = {
    "stablehlo.dot_general": "dot",
    "stablehlo.broadcast_in_dim": "broadcast",
    "sdy.sharding_constraint": "custom-call",
    "sdy.reshard": "custom-call",
    "func.call": "call",
}
"""MLIR operations whose HLO opcode is not their name after the dialect with ``_`` as ``-``;
Shardy's constraints become the ``Sharding`` custom call."""
TERMINATORS = {"func.return", "stablehlo.return", "sdy.return"}
_DTYPES = {"i1": "pred", "complex<f32>": "c64", "complex<f64>": "c128"}
DETAILED = {"broadcast", "call", "compare", "constant", "custom-call", "dot", "transpose"}
"""Opcodes whose record needs more than the operation's name (:func:`details`)."""


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


def location_frames(location: Any) -> tuple[Frame, ...]:
    """The frames of a location, innermost first, walked through MLIR's location classes,
    ``NameLoc(op_name, CallSiteLoc(callee, caller))`` with each callee ``NameLoc(function,
    FileLineColLoc)`` (printing it and parsing the text costs six times as much)."""
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


def symbol(attribute: Any) -> str:
    """A function's name (``@"<lambda>"`` as printed) as a computation name: ``_lambda_``."""
    return re.sub(r"[^\w.\-]", "_", str(attribute).lstrip("@").strip('"'))


def tupled(op: Any) -> bool:
    """Whether HLO holds an operation's results as a tuple: several, or a loop's state."""
    return len(op.results) != 1 or op.name == "stablehlo.while"


def terminator(block: Any) -> Any:
    """A block's last operation: its return."""
    return block.operations[len(block.operations) - 1]


def details(op: Any, opcode: str, operands: tuple, shape: Callable) -> tuple[str, tuple, str]:
    """The opcode, operands and attributes of an operation whose record needs more than its name:
    a broadcast that only adds dimensions of size 1 (XLA makes it a reshape), a call's callee, a
    comparison's direction, an integer scalar constant's value, a custom call's target."""
    if opcode == "broadcast":
        same = elements(shape(op.results[0])) == elements(shape(op.operands[0]))
        return ("reshape" if same else opcode), operands, ""
    if opcode == "call":
        return opcode, operands, f", to_apply={symbol(op.attributes['callee'])}"
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
