"""Small readers of HLO text (before optimisation, or ``compiled.as_text()`` after), so every
count a guide shows is read from the program itself. Imported by the guides; no command line."""

from __future__ import annotations

import dataclasses
import math
import re

from snippets.cli import run_module
from snippets.collective_cost import ring_bytes_per_rank

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


@dataclasses.dataclass(frozen=True)
class Instruction:
    """One HLO instruction: name, result shape, opcode, operand names, attributes, ROOT or not."""

    name: str
    shape: str
    opcode: str
    operands: tuple[str, ...]
    attributes: str
    root: bool = False


def _group(text: str) -> tuple[list[str], int]:
    """The top-level comma-separated parts of the bracketed group ``text`` opens, and its end."""
    parts, depth, start = [], 0, 1
    for index, char in enumerate(text):
        depth += {"(": 1, "[": 1, "{": 1, ")": -1, "]": -1, "}": -1}.get(char, 0)
        if depth == 0:
            return [*parts, text[start:index]], index
        if depth == 1 and char == ",":
            parts.append(text[start:index])
            start = index + 1
    raise ValueError(f"Unbalanced brackets in HLO line: {text!r}")


def parse_instruction(line: str) -> Instruction | None:
    """Parse one line of HLO text; ``None`` for lines that are not instructions.

    >>> parse_instruction("  ROOT %t = f32[4,2]{1,0} transpose(f32[2,4]{1,0} %d), dimensions={1,0}")
    Instruction(name='t', shape='f32[4,2]{1,0}', opcode='transpose', operands=('d',), attributes=', dimensions={1,0}', root=True)
    >>> parse_instruction("t = (f32[], f32[]) tuple(a, /*index=1*/%b)").operands
    ('a', 'b')
    """
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
    names = [_COMMENT.sub("", part).split() for part in parts]
    operands = tuple(name[-1].lstrip("%") for name in names if name)
    attributes = rest[len(opcode) + close + 1 :]
    return Instruction(header["name"], shape, opcode, operands, attributes, bool(header["root"]))


def instructions(hlo_text: str) -> list[Instruction]:
    """Every instruction in an HLO module, in text order, fused computations included."""
    return [inst for line in hlo_text.splitlines() if (inst := parse_instruction(line))]


def computations(hlo_text: str) -> tuple[dict[str, list[Instruction]], str, str]:
    """Each computation's instructions by name, the entry computation's name and its root's name."""
    found: dict[str, list[Instruction]] = {}
    entry = root = current = ""
    for line in hlo_text.splitlines():
        header = _COMPUTATION.match(line) if " = " not in line.split("(")[0] else None
        if header is not None:
            current = header["name"]
            found[current] = []
            entry = current if header["entry"] else entry
        elif (inst := parse_instruction(line)) is not None and current:
            found[current].append(inst)
            root = inst.name if current == entry and inst.root else root
    return found, entry, root


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


def _elements(inst: Instruction | None) -> int:
    """How many elements ``inst``'s result has; -1 for a tuple or an unknown instruction."""
    shapes = array_shapes(inst.shape) if inst else []
    return math.prod(shapes[0][1]) if len(shapes) == 1 else -1


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
    """A collective in a compiled module and what each rank sends under the ring model."""

    kind: str
    shape: str
    ranks: int
    bytes_per_rank: float


def collectives(hlo_text: str) -> list[Collective]:
    """The collectives of a module with their result shape, ranks and bytes sent per rank."""
    found = []
    for inst in instructions(hlo_text):
        kind = inst.opcode.removesuffix("-start")
        if kind not in COLLECTIVES:
            continue
        shape = inst.shape
        if inst.opcode.endswith("-start") and kind in ("all-gather", "collective-permute"):
            shape = list(_ARRAY_SHAPE.finditer(shape))[-1][0]  # async start: (operand, result)
        ranks = 2 if kind == "collective-permute" else group_size(inst.attributes)
        sent = ring_bytes_per_rank(kind, shape_bytes(shape), ranks)
        found.append(Collective(kind, shape, ranks, sent))
    return found


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
    ``barrier`` (a ``Sharding`` call), ``all-reduce`` or ``other``. ``output``: the result element
    (index, or path from :func:`snippets.barrier.find_barriers`) its value reaches."""

    transpose: str
    shape: str
    dot: str
    between: tuple[str, ...]
    kind: str
    dot_shape: str = ""
    op_name: str | None = None
    source: str | None = None
    output: int | str | None = None

    @property
    def blocked(self) -> bool:
        """Whether anything stands between the dot and the transpose (the fold cannot fire)."""
        return bool(self.between)

    @property
    def chain(self) -> str:
        """``dot f32[8,2] -> Sharding -> transpose f32[2,8]``, in data-flow order, without layouts."""
        ends = [f"dot {self.dot_shape.split('{')[0]}", f"transpose {self.shape.split('{')[0]}"]
        return " -> ".join([ends[0], *reversed(self.between), ends[1]])

    def __str__(self) -> str:
        output = "(no output)" if self.output is None else self.output
        return f"{self.chain}  {output}  {self.source or ''}".rstrip()


def value_source(
    inst: Instruction, by_name: dict[str, Instruction]
) -> tuple[list[Instruction], Instruction | None]:
    """The pass-through ops behind ``inst``'s operand, nearest first, and what made the value
    (``None``: from outside); a combined all-reduce is followed into the operand selected."""
    chain: list[Instruction] = []
    current = by_name.get(inst.operands[0]) if inst.operands else None
    while current is not None and (current.opcode in _PASS_THROUGH or is_sharding_call(current)):
        chain.append(current)
        source = by_name.get(current.operands[0]) if current.operands else None
        if current.opcode == "get-tuple-element" and source and len(source.operands) > 1:
            chain.append(source)
            source = by_name.get(source.operands[_tuple_index(current)])
        current = source
    return chain, current


def _tuple_index(inst: Instruction) -> int:
    return int(re.search(r"index=(\d+)", inst.attributes)[1])


def transpose_of_dot_sites(
    hlo_text: str, dims: tuple[int, ...] | None = None
) -> list[TransposeSite]:
    """Every transpose fed, through pass-through ops only, by a dot; ``dims`` keeps those of that
    size set. XLA folds ``transpose(dot(a, b))`` into ``dot(b, a)`` only if nothing stands between."""
    by_name = {inst.name: inst for inst in instructions(hlo_text)}
    frames = source_locations(hlo_text)
    sites = []
    for inst in by_name.values():
        if inst.opcode != "transpose" or not _has_dims(inst, dims):
            continue
        chain, origin = value_source(inst, by_name)
        if origin is None or origin.opcode != "dot":
            continue
        between = tuple("Sharding" if is_sharding_call(op) else op.opcode for op in chain)
        kinds = {"Sharding": "barrier", "all-reduce": "all-reduce"}  # in this order
        kind = next((kinds[k] for k in kinds if k in between), "other" if between else "foldable")
        op_name = re.search(r'op_name="([^"]*)"', origin.attributes)
        frame = re.search(r"stack_frame_id=(\d+)", origin.attributes)
        where = (op_name and op_name[1], frame and frames.get(int(frame[1])))
        sites.append(
            TransposeSite(inst.name, inst.shape, origin.name, between, kind, origin.shape, *where)
        )
    reached = outputs_reached(hlo_text, [site.transpose for site in sites])
    return [dataclasses.replace(site, output=reached[site.transpose]) for site in sites]


def source_locations(hlo_text: str) -> dict[int, str]:
    """``file:line`` of each stack frame id, from the tables ``as_text(debug_info=True)`` prints."""
    tables: dict[str, dict[int, str]] = {"FileNames": {}, "FileLocations": {}, "StackFrames": {}}
    current = None
    for line in hlo_text.splitlines():
        if entry := re.match(r"^(\d+) (.*)$", line):
            tables.get(current, {})[int(entry[1])] = entry[2].strip('"')
        else:
            current = line.strip()
    places = {}
    for key, text in tables["FileLocations"].items():
        place = dict(re.findall(r"(\w+)=(\d+)", text))
        places[key] = f"{tables['FileNames'].get(int(place['file_name_id']), '?')}:{place['line']}"
    return {
        key: places.get(int(re.search(r"file_location_id=(\d+)", text)[1]), "?")
        for key, text in tables["StackFrames"].items()
    }


_BODY = re.compile(r"\bbody=%?([\w.\-]+)")
_CARRIES = _PASS_THROUGH - {"get-tuple-element"} | {"transpose", "add", "custom-call"}
"""Ops that pass a value on whole (same element count) on its way to the module's result."""


def outputs_reached(hlo_text: str, names: list[str]) -> dict[str, int | None]:
    """For each named instruction, the element of the entry's result its value reaches, else None:
    a weight gradient reaches its parameter's output, an activation gradient none."""
    comps, entry, _ = computations(hlo_text)
    owner = {inst.name: comp for comp, insts in comps.items() for inst in insts}
    by_name = {inst.name: inst for insts in comps.values() for inst in insts}
    roots = {owner[name]: name for name, inst in by_name.items() if inst.root}
    loops = {_BODY.search(i.attributes)[1]: i.name for i in by_name.values() if i.opcode == "while"}
    users: dict[str | tuple[str, int], list[tuple[Instruction, int]]] = {}
    for inst in by_name.values():  # a get-tuple-element reads one element of a tuple value
        for index, operand in enumerate(inst.operands):
            value = (operand, _tuple_index(inst)) if inst.opcode == "get-tuple-element" else operand
            users.setdefault(value, []).append((inst, index))

    def onward(value: str | tuple[str, int]) -> list:
        """Where ``value`` goes next: instructions, tuple elements, or an entry output's index."""
        found: list = [0] if value == roots[entry] else []
        for user, index in users.get(value, []):
            comp = owner[user.name]
            if user.opcode == "tuple" and roots[comp] == user.name and comp == entry:
                found.append(index)
            elif user.opcode == "tuple" and roots[comp] == user.name and comp in loops:
                found.append((loops[comp], index))  # the next iteration's, or the loop's result
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

    def passes_through(call: Instruction, index: int) -> bool:
        """Whether operand ``index`` of ``call`` reaches its computation's root."""
        callee = _CALLS.search(call.attributes)[1]
        starts = [
            p.name for p in comps[callee] if p.opcode == "parameter" and p.operands == (str(index),)
        ]
        return roots[callee] in walk(starts, within=callee)

    def walk(starts: list, within: str | None = None) -> set:
        pending, seen = list(starts), set()
        while pending:
            value = pending.pop()
            name = value[0] if isinstance(value, tuple) else value  # an int is an output
            if value not in seen and isinstance(name, str) and within in (None, owner[name]):
                pending += onward(value)
            seen.add(value)
        return seen

    reached = {name: sorted(i for i in walk([name]) if isinstance(i, int)) for name in names}
    return {name: outputs[0] if outputs else None for name, outputs in reached.items()}


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


if __name__ == "__main__":
    run_module()
