"""Whose line a site is: the frames of its stack that are the user's, the layer's own line and the
shared helper it went through, and what put a ``Sharding`` call there."""

from __future__ import annotations

import functools
import os
import re
from collections.abc import Iterable, Sequence
from pathlib import Path

from find_barriers._program import Frame, Instruction, Program
from find_barriers._vocabulary import Placement

INSTALLED = r"(?:site|dist)-packages/"
"""Where an installed package's path begins."""
LIBRARIES = re.compile(
    rf"(?:^|/){INSTALLED}(?:jax|jaxlib|flax|optax|orbax|chex)/|(?:^|/)jax/_src/"
    r"|(?:^|/)maxtext/integration/tunix/tunix_adapter\.py$"
    r"|^<frozen |/lib/python3\.\d+/(?!site-packages/|dist-packages/)[^/]+\.py$"
)
"""Files that are not the user's: JAX, Flax, optax, Orbax and chex wherever installed; Python's
own (``<frozen runpy>``, ``lib/python3.12/runpy.py``); and MaxText 0.2.5's tunix adapter, which
wraps ``jax.lax.with_sharding_constraint`` once imported."""


def readable(frame: Frame | None) -> str | None:
    """A frame as ``file:line`` where a reader finds it: from its package where installed, else from
    the root of the project the working directory is in (the nearest folder up with a ``pyproject.toml`` or ``.git``), else whole.

    >>> readable(Frame("/venv/lib/python3.12/site-packages/flax/nnx/nn/linear.py", 422))
    'flax/nnx/nn/linear.py:422'
    """
    return None if frame is None else _readable(frame, os.getcwd())


@functools.lru_cache(maxsize=4096)
def _readable(frame: Frame, directory: str) -> str:
    """:func:`readable` from ``directory`` (a module's frames repeat: each is worked out once)."""
    if re.search(INSTALLED, frame.file):
        return f"{re.split(INSTALLED, frame.file)[-1]}:{frame.line}"
    relative = os.path.relpath(frame.file, project_root(directory))
    return str(frame) if relative.startswith("..") else f"{relative}:{frame.line}"


@functools.cache
def project_root(directory: str) -> str:
    """``directory``'s nearest folder, itself included, with ``pyproject.toml`` or ``.git``;
    ``directory`` itself where none has."""
    folders = [directory, *map(str, Path(directory).parents)]
    marked = (f for f in folders if any(Path(f, m).exists() for m in ("pyproject.toml", ".git")))
    return next(marked, directory)


def user_frames(stack: Sequence[Frame]) -> tuple[Frame, ...]:
    """The frames of ``stack`` (innermost first) outside :data:`LIBRARIES`, each once, where it
    first appears: JAX's stacks repeat each trace's frames under nested transformations.

    >>> flax = Frame("/v/site-packages/flax/nnx/nn/linear.py", 422, "Linear.__call__")
    >>> model, step = Frame("/home/me/model.py", 58, "Model.__call__"), Frame("/home/me/t.py", 9)
    >>> [str(frame) for frame in user_frames([flax, model, step, model, step])]
    ['/home/me/model.py:58', '/home/me/t.py:9']
    """
    return tuple(dict.fromkeys(frame for frame in stack if not _is_library(frame.file)))


@functools.cache
def _is_library(file: str) -> bool:
    """Whether ``file`` is one of :data:`LIBRARIES` (a module's frames repeat a few files)."""
    return LIBRARIES.search(file) is not None


def layer_lines(
    stacks: Sequence[tuple[Frame, ...]], context: Iterable[tuple[Frame, ...]] = ()
) -> list[tuple[Frame | None, Frame | None]]:
    """For each user stack, the line to show and the shared helper it went through (or None).

    A frame that stacks with other outer frames begin with (in ``stacks`` or the module's other
    stacks, ``context``) is a helper several layers call, as an FSDP ``dot_general``: the line
    shown is then the first frame outward where this stack parts from every other (a stack JAX
    cut short parts from none), ``via`` the helper; else the innermost user frame.

    >>> helper, a, b = Frame("m.py", 38), Frame("m.py", 54), Frame("m.py", 60)
    >>> [(str(line), str(via)) for line, via in layer_lines([(helper, a), (helper, b), (a,)])]
    [('m.py:54', 'm.py:38'), ('m.py:60', 'm.py:38'), ('m.py:54', 'None')]
    """
    by_innermost: dict[Frame, set[tuple[Frame, ...]]] = {}
    for stack in (*stacks, *context):
        if stack:
            by_innermost.setdefault(stack[0], set()).add(stack)
    found: list[tuple[Frame | None, Frame | None]] = []
    for stack in stacks:
        others = by_innermost[stack[0]] - {stack} if stack else set()
        parting = [n for other in others if (n := _parting(stack, other)) is not None]
        if parting:
            found.append((stack[max(parting)], stack[0]))
        else:
            found.append((stack[0] if stack else None, None))
    return found


def _parting(one: tuple[Frame, ...], other: tuple[Frame, ...]) -> int | None:
    """How many frames two stacks share from the innermost out; None where one begins the other."""
    return next((i for i, (a, b) in enumerate(zip(one, other, strict=False)) if a != b), None)


def placed_by(
    program: Program, calls: Sequence[Instruction]
) -> tuple[Placement | None, Frame | None]:
    """What put the ``Sharding`` calls ``calls`` there: the user's own
    ``with_sharding_constraint``, with its line (as :func:`layer_lines` picks it), else a result
    typed by an explicit mesh; ``(None, None)`` for no call."""
    for call in calls:
        if "sharding_constraint" in (program.op_name(call) or ""):
            stack = user_frames(program.stack(call))
            context = (user_frames(other) for other in program.known_stacks())
            return Placement.CONSTRAINT, layer_lines([stack], context)[0][0]
    return (Placement.EXPLICIT, None) if calls else (None, None)
