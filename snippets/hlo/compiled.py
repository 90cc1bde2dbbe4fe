"""What a compiled program spends that the module JAX handed XLA does not show: the copies its
entry computation runs each step, and its reduce-scatters, read from the compiled text (a TPU's
``after_optimizations`` dump, or ``compiled.as_text()``)."""

from __future__ import annotations

import math
import re

from find_barriers import array_shapes, measured_copy_bytes, read_hlo, shape_bytes


def entry_copies(compiled: str) -> list[str]:
    """The shapes of the ``copy`` instructions in the compiled module's entry computation: the
    relayouts each step runs once (a copy inside a loop body is not counted)."""
    program = read_hlo(compiled)
    return [inst.shape for inst in program.computations[program.entry] if inst.opcode == "copy"]


def parameter_copies(compiled: str) -> list[str]:
    """The shapes of the entry's copies of arrays shaped as one of its parameters (element type
    and dimensions): the relayouts of the stored parameters and optimizer states, not of
    activations.

    >>> text = "ENTRY %m (a: f32[8,256]) -> f32[8,256] {\\n  %a = f32[8,256]{1,0} parameter(0)\\n  %x = bf16[4,8]{1,0} constant({...})\\n  %y = bf16[4,8]{0,1} copy(%x)\\n  ROOT %c = f32[8,256]{0,1} copy(%a)\\n}\\n"
    >>> parameter_copies(text), relayout_traffic(text)
    (['f32[8,256]{0,1}'], 16384)
    """
    program = read_hlo(compiled)
    entry = program.computations[program.entry]
    stored = {array_shapes(inst.shape) for inst in entry if inst.opcode == "parameter"}
    return [shape for shape in entry_copies(compiled) if array_shapes(shape) in stored]


def relayout_traffic(compiled: str) -> int:
    """Bytes the entry's :func:`parameter_copies` move per step and device, read and written."""
    return 2 * sum(shape_bytes(shape) for shape in parameter_copies(compiled))


def reduce_scatters(compiled: str) -> int:
    """How many times the compiled text names a reduce-scatter (an op, a fusion calling one, a
    computation of one). The design doc's item 03 counts the lines of its ``after_codegen`` dump
    that do; on the four models it lists the two counts agree."""
    return len(re.findall(r"reduce-scatter", compiled))


def kernel_copies(compiled: str, kernel: tuple[int, int]) -> list[str]:
    """The entry's copies of the ``(emb, vocab)`` head kernel or of a device's shard of it: the
    vocabulary whole, the elements dividing the kernel's.

    >>> text = "ENTRY %m (a: f32[128,32000]) -> f32[128,32000] {\\n  %a = f32[128,32000]{1,0} parameter(0)\\n  ROOT %c = f32[128,32000]{0,1} copy(%a)\\n}\\n"
    >>> kernel_copies(text, (512, 32000)), kernel_copies(text, (512, 1000))
    (['f32[128,32000]{0,1}'], [])
    """
    found = []
    for shape in entry_copies(compiled):
        ((_, dims),) = array_shapes(shape)[:1] or (("", ()),)
        if kernel[1] in dims and math.prod(kernel) % max(math.prod(dims), 1) == 0:
            found.append(shape)
    return found


def compiled_facts(compiled: str, kernel: tuple[int, int]) -> dict[str, object]:
    """A compiled program's entry copies (how many, their bytes read and written), those of the
    head ``kernel``, and its reduce-scatters."""
    return {
        "entry_copies": len(entry_copies(compiled)),
        "copy_traffic": measured_copy_bytes(compiled),
        "kernel_copies": kernel_copies(compiled, kernel),
        "reduce_scatters": reduce_scatters(compiled),
    }
