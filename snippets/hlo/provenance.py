"""Whose site it is: the user's own line, the parameter whose gradient the dot makes, and what
put the ``Sharding`` call there, as far as a module's metadata tells (no JAX import)."""

from __future__ import annotations

import functools
import os
import re
from collections.abc import Sequence
from pathlib import Path

from snippets.hlo.program import SAME_VALUE, Instruction, Program, callees, is_sharding_call
from snippets.hlo.shapes import has_dims

INSTALLED = r"(?:site|dist)-packages/"
"""Where an installed package's path begins."""
LIBRARIES = re.compile(
    rf"(?:^|/){INSTALLED}(?:jax|jaxlib|flax|optax|orbax|chex)/"
    r"|(?:^|/)jax/_src/|(?:^|/)snippets/(?:kernel_order_grad|vocab_parallel)\.py:"
    r"|(?:^|/)maxtext/integration/tunix/tunix_adapter\.py:"
)
"""Frames that are not the user's: JAX, Flax, optax, Orbax and chex wherever installed; this
project's recipe helpers (a site they make belongs to the line that called them); and MaxText's
tunix adapter, which, once imported, wraps ``jax.lax.with_sharding_constraint`` for the whole
process (``maxtext/integration/tunix/tunix_adapter.py``, MaxText 0.2.5)."""


def readable(source: str | None) -> str | None:
    """A source path as a reader finds it: from its package where installed, else from the root of
    the project the working directory is in (its nearest folder with ``pyproject.toml`` or
    ``.git``), else whole.

    >>> readable("/venv/lib/python3.12/site-packages/flax/nnx/nn/linear.py:422")
    'flax/nnx/nn/linear.py:422'
    """
    if source is None or re.search(INSTALLED, source):
        return source and re.split(INSTALLED, source)[-1]
    relative = os.path.relpath(source, project_root(os.getcwd()))
    return source if relative.startswith("..") else relative


@functools.cache
def project_root(directory: str) -> str:
    """``directory``'s nearest folder, itself included, with ``pyproject.toml`` or ``.git``;
    ``directory`` itself where none has."""
    folders = [directory, *map(str, Path(directory).parents)]
    marked = (f for f in folders if any(Path(f, m).exists() for m in ("pyproject.toml", ".git")))
    return next(marked, directory)


def user_frame(stack: Sequence[str]) -> str | None:
    """The first ``file:line`` of ``stack`` (innermost first) outside :data:`LIBRARIES`; the
    innermost where every frame is a library's, None for no stack.

    >>> user_frame(["/v/site-packages/flax/nnx/nn/linear.py:422", "/home/me/model.py:58"])
    '/home/me/model.py:58'
    """
    innermost = stack[0] if stack else None
    return next((frame for frame in stack if not LIBRARIES.search(frame)), innermost)


def placed_by(program: Program, calls: Sequence[Instruction]) -> tuple[str | None, str | None]:
    """What put the ``Sharding`` calls ``calls`` there: ``"constraint"``, the user's own
    ``with_sharding_constraint`` (its ``op_name`` says so), with that call's user line, else
    ``"explicit"``, a result typed by an explicit mesh; ``(None, None)`` for no call."""
    for call in calls:
        if "sharding_constraint" in (program.op_name(call) or ""):
            return "constraint", user_frame(program.stack(call))
    return ("explicit", None) if calls else (None, None)


def role(op_name: str | None, parameter: str | None, output: int | str | None) -> str:
    """What the dot computes: the ``forward`` pass (JAX names the backward pass
    ``transpose(...)`` in ``op_name``), a ``weight gradient`` (the parameter, or an output it
    reaches, is known), an ``activation gradient``, or ``unknown`` without an ``op_name``.

    >>> role("jit(step)/jvp(bhqk,bkhd->bqhd)/dot_general", None, None)
    'forward'
    >>> role("jit(step)/transpose(jvp())/dot_general", "model.states[0][3]", None)
    'weight gradient'
    """
    if op_name is not None and "transpose(" not in op_name:
        return "forward"
    if parameter is not None or output is not None:
        return "weight gradient"
    return "unknown" if op_name is None else "activation gradient"


class Parameters:
    """Which parameter each weight-gradient dot differentiates: the dot that reads the same
    activation in the forward pass and, as its other operand, an entry parameter with the
    gradient's sizes. Named as the dump names it (``model.head.kernel.value`` under
    ``jax.jit``, ``model.states[0][32]`` under ``nnx.jit``)."""

    def __init__(self, program: Program) -> None:
        self.program = program

    @functools.cache  # noqa: B019 - one instance per program, dropped with it
    def origin(self, name: str) -> Instruction | None:
        """What made value ``name``, once ops that pass it on unchanged are skipped; an argument
        of a called computation is followed to the caller's operand."""
        program = self.program
        inst = program.by_name.get(name)
        while inst is not None:
            if _passes_on(inst):
                inst = program.by_name.get(inst.operands[0]) if inst.operands else None
            elif inst.opcode == "parameter" and program.owner.get(inst.name) != program.entry:
                callers = program.callers_of(program.owner[inst.name])
                index = int(inst.operands[0]) if inst.operands[0].isdigit() else -1
                if len(callers) != 1 or callers[0][1].opcode != "call":
                    return inst
                operands = callers[0][1].operands
                inst = program.by_name.get(operands[index]) if index < len(operands) else None
            else:
                return inst
        return None

    def readers(self, value: Instruction) -> list[tuple[Instruction, int]]:
        """The dots that read ``value`` through ops that pass it on unchanged or into a called
        computation, each with the operand it reads it as."""
        program, found, pending, seen = self.program, [], [value.name], {value.name}
        while pending:
            for user, index in program.users(pending.pop()):
                if user.opcode == "dot":
                    found.append((user, index))
                    continue
                callee = callees(user) if user.opcode == "call" else None
                name = program.parameter(callee[0], index) if callee else None
                name = name or (user.name if _passes_on(user) else None)
                if name is not None and name not in seen:
                    seen.add(name)
                    pending.append(name)
        return found

    def of(self, dot: Instruction, sizes: tuple[int, ...]) -> str | None:
        """The parameter whose gradient ``dot`` makes (of sizes ``sizes`` in any order: a
        transposed kernel has the same), else None."""
        for operand in dot.operands[:2]:
            activation = self.origin(operand)
            for forward, index in self.readers(activation) if activation else []:
                weight = self.origin(forward.operands[1 - index]) if forward is not dot else None
                if weight is not None and weight.opcode == "parameter" and has_dims(weight, sizes):
                    return self.program.op_name(weight) or weight.name
        return None


def _passes_on(inst: Instruction) -> bool:
    """Whether ``inst`` passes its operand on unchanged, as far as naming a parameter goes."""
    return inst.opcode in SAME_VALUE or is_sharding_call(inst)
