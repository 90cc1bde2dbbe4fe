"""What the site's counts read of an array shape beyond find-barriers' reading layer: its printed
layout, and whether its sizes are a parameter's."""

from __future__ import annotations

import re

from find_barriers import Instruction, array_shapes


def layout(shape: str) -> tuple[int, ...] | None:
    """An array shape's layout: its dimensions from minor to major, ``None`` when none is printed.

    >>> layout("f32[8,4]{0,1}"), layout("f32[8,4]")
    ((0, 1), None)
    """
    match = re.search(r"\]\{([\d,]*)", shape)
    return tuple(int(d) for d in match[1].split(",") if d) if match else None


def has_dims(inst: Instruction, dims: tuple[int, ...] | None, stacked: bool = False) -> bool:
    """Whether ``inst``'s first array has exactly the sizes ``dims``, in any order (``None``: any);
    with ``stacked``, and one dimension more (a stack of layers, read one slice at a time).

    >>> has_dims(Instruction("w", "f32[32,3,48]", "parameter", ("0",), ""), (48, 32), stacked=True)
    True
    """
    shapes = array_shapes(inst.shape)
    if not shapes or dims is None:
        return bool(shapes)
    sizes = list(shapes[0][1])
    if not stacked:
        return sorted(sizes) == sorted(dims)
    return any(sorted(sizes[:i] + sizes[i + 1 :]) == sorted(dims) for i in range(len(sizes)))
