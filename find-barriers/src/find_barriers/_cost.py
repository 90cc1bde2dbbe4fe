"""What a blocked weight-gradient fold is estimated to cost per step and device, read from the
module JAX hands XLA, by the two mechanisms MaxText's design doc measured on TPU ([revision
37ba11cc][doc]); an estimate, not a measurement: a TPU profile, or the copies of a TPU
``after_optimizations`` dump (:func:`measured_copy_bytes`), says what it costs.

- **Relayout copies** ([§4.3][relayout]): the gradient comes out of its dot transposed, and that
  layout carries through the optimizer's update, so the parameter and each optimizer state
  updated with it are copied into it on the way in and back on the way out, each copy reading
  and writing one device's shard. None are counted where the gradient is summed with another
  contribution first (a tied table's lookup, whose head never has an optimizer chain of its own:
  [§4.6][tied]) or stacked into a loop's state (a scanned layer, gradient accumulation: the loop's
  buffers keep one layout, [§4.7][loop]), nor where exactly one of the shard's last dimension
  and the one the gradient holds minor-most fills whole 128-element tiles, so TPU's layout
  assignment keeps that one minor-most ([§4.1][root]: under tp4 it "chose ``{0,1}`` entry and
  paid nothing"). A pinned gradient (``Verdict.PINNED``: the transpose XLA's simplifier keeps,
  [§4.8][dense]) whose dot's lhs has several non-contracting dimensions, an attention query's,
  is copied out in auto mode too, so only the copies in are counted ([§4.7][loop] lists three
  for each of gemma3's q, k and v). These last rules were measured with libtpu's compiler.
  Not estimated: the tied table's convert tax (§4.6) and
  the penalty the doc measured inside a loop, a median +0.463% of a step at healthy depths
  ([§4.8][dense]).
- **A lost reduce-scatter** ([§4.2][scatter]): where the parameter is sharded on the dimension the
  transposed gradient holds minor-most, and one shard of that dimension is under 512 bytes, TPU's
  compiler may not turn the gradient's all-reduce into a reduce-scatter: ``(N - 1) / N`` of the
  gradient more on the wire, for ``N`` shards. Necessary, not sufficient: on qwen3's head the doc
  found an all-reduce in both modes. Counted wherever it applies, summed or stacked too.

[doc]: https://github.com/AI-Hypercomputer/maxtext/blob/37ba11cc7db4ae6b5d58f25a993caa5e9c4e125e/docs/guides/optimization/shard_mode_performance.md
[root]: https://github.com/AI-Hypercomputer/maxtext/blob/37ba11cc7db4ae6b5d58f25a993caa5e9c4e125e/docs/guides/optimization/shard_mode_performance.md#41-root-cause-the-sharding-custom-call-is-an-optimization-barrier
[relayout]: https://github.com/AI-Hypercomputer/maxtext/blob/37ba11cc7db4ae6b5d58f25a993caa5e9c4e125e/docs/guides/optimization/shard_mode_performance.md#43-consequence-b--six-relayout-copies-per-step-universal
[tied]: https://github.com/AI-Hypercomputer/maxtext/blob/37ba11cc7db4ae6b5d58f25a993caa5e9c4e125e/docs/guides/optimization/shard_mode_performance.md#46-the-natural-control-tied-embeddings
[loop]: https://github.com/AI-Hypercomputer/maxtext/blob/37ba11cc7db4ae6b5d58f25a993caa5e9c4e125e/docs/guides/optimization/shard_mode_performance.md#47-gemma3s-449-is-an-artifact-of-the-shrink-and-it-reverses-at-real-depth
[dense]: https://github.com/AI-Hypercomputer/maxtext/blob/37ba11cc7db4ae6b5d58f25a993caa5e9c4e125e/docs/guides/optimization/shard_mode_performance.md#48-consequence-c--the-dense-layer-weight-gradients-layout-is-un-pinned-and-that-cuts-both-ways
[scatter]: https://github.com/AI-Hypercomputer/maxtext/blob/37ba11cc7db4ae6b5d58f25a993caa5e9c4e125e/docs/guides/optimization/shard_mode_performance.md#42-consequence-a--the-lost-reduce-scatter
"""

from __future__ import annotations

import dataclasses

from find_barriers._flow import Flow
from find_barriers._fold import free_dims
from find_barriers._program import (
    Instruction,
    Program,
    Value,
    attribute_dims,
    behind,
    callees,
    read_hlo,
)
from find_barriers._shapes import (
    array_shapes,
    elements,
    shape_bytes,
    shard_bytes,
    shard_counts,
    shard_dims,
)

DOC = (
    "https://github.com/AI-Hypercomputer/maxtext/blob/37ba11cc7db4ae6b5d58f25a993caa5e9c4e125e/"
    "docs/guides/optimization/shard_mode_performance.md"
)
SECTIONS = {
    "4.1": "#41-root-cause-the-sharding-custom-call-is-an-optimization-barrier",
    "4.2": "#42-consequence-a--the-lost-reduce-scatter",
    "4.3": "#43-consequence-b--six-relayout-copies-per-step-universal",
    "4.6": "#46-the-natural-control-tied-embeddings",
    "4.7": "#47-gemma3s-449-is-an-artifact-of-the-shrink-and-it-reverses-at-real-depth",
    "4.8": "#48-consequence-c--the-dense-layer-weight-gradients-layout-is-un-pinned-and-that-cuts-both-ways",
}
"""The design doc's sections each estimate follows, by number."""
TILE = 128
"""Elements: the minor-most extent of TPU's array tiles (``T(8,128)``)."""
REDUCE_SCATTER_GATE = 512
"""Bytes: a shard's minor-most extent under which TPU's compiler keeps an all-reduce (§4.2)."""
_CONTRIBUTIONS = frozenset({"dot", "scatter", "transpose", "convolution"})
"""What another contribution to the same gradient is made by: a second use of the weight."""


@dataclasses.dataclass(frozen=True)
class Cost:
    """A blocked fold's estimated cost, per step and device.

    Attributes:
        relayout_copies: the copies of the parameter and its optimizer states (§4.3).
        relayout_copy_bytes: the bytes those copies read and write.
        lost_reduce_scatter_bytes: the wire bytes an all-reduce adds over a reduce-scatter (§4.2).
        basis: the design doc's sections the estimate follows, or why it is zero.
    """

    relayout_copies: int = 0
    relayout_copy_bytes: int = 0
    lost_reduce_scatter_bytes: int = 0
    basis: tuple[str, ...] = ()

    @property
    def bytes(self) -> int:
        """Every byte the estimate counts: copies and wire."""
        return self.relayout_copy_bytes + self.lost_reduce_scatter_bytes

    @property
    def links(self) -> list[str]:
        """The design doc's section of each basis."""
        return [DOC + SECTIONS[section] for section in self.basis]


class Costs:
    """The estimates of one program's sites, its flows worked out once."""

    def __init__(self, program: Program, flow: Flow) -> None:
        self.program = program
        self.flow = flow
        self.loops: dict[str, bool] = {}

    def of(self, transpose: Instruction, dot: Instruction, weight: Instruction) -> Cost:
        """The estimated cost of the blocked fold of ``transpose(dot)``, the gradient of the entry
        parameter ``weight``. Where the dot's lhs has several non-contracting dimensions (an
        attention query's gradient, pinned), auto mode, too, copies the updated arrays out, so
        explicit adds only the copies in (§4.7 counts three for each of gemma3's q, k and v;
        measured with libtpu in ``tests/test_tpu_compile.py``)."""
        lost = self._lost_reduce_scatter(transpose, dot, weight)
        stacked = self._stacked(transpose.name)
        scatter = ("4.2",) if lost else ()
        if stacked or self._summed(transpose.name):
            why = ("4.7", "4.8") if stacked else ("4.6",)
            return Cost(lost_reduce_scatter_bytes=lost, basis=why + scatter)
        if _laid_out_without_copies(transpose, weight):
            return Cost(lost_reduce_scatter_bytes=lost, basis=("4.1", *scatter))
        counts = free_dims(self.program, dot)
        lhs_wide = counts is not None and counts[0] > 1
        copies = (1 if lhs_wide else 2) * len(self._updated(transpose, weight))  # in (and out)
        basis = ("4.3", "4.7") if lhs_wide else ("4.3",)
        return Cost(copies, 2 * copies * shard_bytes(weight), lost, (*basis, *scatter))

    def _updated(self, transpose: Instruction, weight: Instruction) -> list[int]:
        """The step's outputs the gradient reaches that hold the parameter's elements: its update
        and each optimizer state updated with it."""
        program = self.program
        root = program.by_name[program.roots[program.entry]]
        size = elements(weight.shape)
        return [
            output
            for output in sorted(self.flow.reach(transpose.name).outputs)
            if output < len(root.operands)
            and elements(program.by_name[root.operands[output]].shape) == size
        ]

    def _stacked(self, value: str) -> bool:
        """Whether the gradient goes through a loop on its way to the outputs: made in a loop's
        body (a scanned layer), or carried into one (gradient accumulation)."""
        return any(self._looped(self.program.owner[name]) for name in self._onward(value))

    def _looped(self, comp: str) -> bool:
        """Whether ``comp`` is a loop's body or condition, or is called from one."""
        if comp not in self.loops:
            self.loops[comp] = False  # a computation calling itself is not a loop
            callers = [] if comp == self.program.entry else self.program.callers_of(comp)
            self.loops[comp] = any(
                caller.opcode == "while" or self._looped(within) for within, caller in callers
            )
        return self.loops[comp]

    def _summed(self, value: str) -> bool:
        """Whether the gradient is added to another contribution to the same gradient, a second
        dot, scatter or transpose (a tied table's lookup), before it reaches the outputs."""
        program = self.program
        for name in self._onward(value):
            for user, index in program.users(name):
                if user.opcode == "add" and self._contribution(user.operands[1 - index]):
                    return True
        return False

    def _contribution(self, name: str) -> bool:
        """Whether value ``name`` is made by a dot, scatter or transpose, directly or as the
        result of a call (a jitted ``take``'s gradient is a scatter in its own computation)."""
        inst = behind(name, self.program.by_name)
        while inst is not None and inst.opcode == "call" and len(callees(inst)) == 1:
            inst = behind(self.program.roots.get(callees(inst)[0], ""), self.program.by_name)
        return inst is not None and inst.opcode in _CONTRIBUTIONS

    def _onward(self, value: str) -> list[str]:
        """``value`` and the values it goes on to with as many elements (or in a tuple): the
        gradient on its way to the update."""
        size = elements_of_name(self.program, value)
        seen: set[Value] = {value}
        pending: list[Value] = [value]
        while pending:
            for after in self.flow.onward(pending.pop()):
                if not isinstance(after, (str, tuple)) or after in seen:
                    continue
                if isinstance(after, tuple) or elements_of_name(self.program, after) == size:
                    seen.add(after)
                    pending.append(after)
        return [item if isinstance(item, str) else item[0] for item in seen]

    def _lost_reduce_scatter(
        self, transpose: Instruction, dot: Instruction, weight: Instruction
    ) -> int:
        """The wire bytes a lost reduce-scatter adds (§4.2): where the weight is sharded on the
        kernel dimension the dot writes minor-most, in shards under :data:`REDUCE_SCATTER_GATE`
        bytes."""
        arrays = array_shapes(dot.shape)
        kernel = array_shapes(weight.shape)[0][1]
        minor = _written_minor_most(transpose, len(kernel))
        if minor is None or len(arrays) != 1:
            return 0
        dtype = arrays[0][0]
        shards = shard_counts(weight.attributes, len(kernel))[minor]
        extent = shape_bytes(f"{dtype}[{-(-kernel[minor] // shards)}]")
        if shards < 2 or extent >= REDUCE_SCATTER_GATE:
            return 0
        return (shards - 1) * shape_bytes(dot.shape) // shards


def _laid_out_without_copies(transpose: Instruction, weight: Instruction) -> bool:
    """Whether TPU's layout assignment needs no copy of the parameter's shard: exactly one of the
    stored minor-most dimension (the last) and the one the dot writes minor-most fills whole
    tiles of :data:`TILE` elements, and TPU keeps that one minor-most: it stores the shard as the
    gradient comes (§4.1, tp4: "it chose ``{0,1}`` entry and paid nothing"), or lays the dot out
    as the shard is stored (measured with libtpu: ``tests/test_tpu_compile.py`` in the guides'
    repository)."""
    shard = shard_dims(weight)
    minor = _written_minor_most(transpose, len(shard))
    return minor is not None and (shard[-1] % TILE == 0) != (shard[minor] % TILE == 0)


def _written_minor_most(transpose: Instruction, rank: int) -> int | None:
    """The kernel dimension the gradient's dot writes minor-most, where ``transpose`` (of that
    dot, to the kernel's ``rank`` dimensions) says."""
    order = attribute_dims(transpose.attributes, "dimensions")
    return order.index(len(order) - 1) if order and len(order) == rank else None


def elements_of_name(program: Program, name: str) -> int:
    """How many elements value ``name`` holds (every value :class:`Flow` gives is an
    instruction's)."""
    return elements(program.by_name[name].shape)


def measured_copy_bytes(compiled: str) -> int:
    """The bytes a compiled module's entry copies read and write per step (``copy``, not
    ``copy-start``; a copy inside a loop body is not counted), on a TPU ``after_optimizations``
    dump. Both modes copy: explicit's bytes less auto's are what :class:`Cost`'s relayout
    estimate is of."""
    program = read_hlo(compiled)
    entry = program.computations[program.entry]
    return 2 * sum(shape_bytes(inst.shape) for inst in entry if inst.opcode == "copy")
