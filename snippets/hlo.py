"""Small readers of HLO text: instructions, shapes and the collectives a module runs.

They work on the text of ``lowered.compiler_ir("hlo").as_hlo_text()`` (before
optimisation) and ``compiled.as_text()`` (after), so every count a guide shows
is read from the program itself.
"""

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
_HEADER = re.compile(r"^\s*(?:ROOT\s+)?%?(?P<name>[\w.\-]+)\s*=\s*(?=[(a-z])")
_COMMENT = re.compile(r"/\*.*?\*/")  # XLA numbers long operand lists: /*index=5*/%name


@dataclasses.dataclass(frozen=True)
class Instruction:
    """One HLO instruction: its name, result shape text, opcode, operand names and attributes."""

    name: str
    shape: str
    opcode: str
    operands: tuple[str, ...]
    attributes: str


def _split_top_level(text: str) -> list[str]:
    """Split ``text`` at commas outside brackets, braces and parentheses."""
    parts, depth, current = [], 0, []
    for char in text:
        depth += {"(": 1, "[": 1, "{": 1, ")": -1, "]": -1, "}": -1}.get(char, 0)
        if char == "," and depth == 0:
            parts.append("".join(current))
            current = []
        else:
            current.append(char)
    parts.append("".join(current))
    return [part.strip() for part in parts if part.strip()]


def _balanced(text: str, start: int) -> int:
    """Index just past the parenthesis group that opens at ``text[start]``."""
    depth = 0
    for index in range(start, len(text)):
        depth += {"(": 1, ")": -1}.get(text[index], 0)
        if depth == 0:
            return index + 1
    raise ValueError(f"Unbalanced parentheses in HLO line: {text!r}")


def parse_instruction(line: str) -> Instruction | None:
    """Parse one line of HLO text; ``None`` for lines that are not instructions.

    >>> parse_instruction("  ROOT %t = f32[4,2]{1,0} transpose(f32[2,4]{1,0} %d), dimensions={1,0}")
    Instruction(name='t', shape='f32[4,2]{1,0}', opcode='transpose', operands=('d',), attributes=', dimensions={1,0}')
    >>> parse_instruction("ROOT t = (f32[], f32[]) tuple(a, /*index=1*/%b)").operands
    ('a', 'b')
    """
    header = _HEADER.match(line)
    if header is None:
        return None
    rest = line[header.end() :]
    if rest.startswith("("):
        end = _balanced(rest, 0)
        shape, rest = rest[:end], rest[end:].lstrip()
    else:
        shape, _, rest = rest.partition(" ")
    opcode, paren, rest = rest.partition("(")
    if not paren:
        return None
    end = _balanced("(" + rest, 0) - 1
    operands = tuple(
        _COMMENT.sub("", part).split()[-1].lstrip("%") for part in _split_top_level(rest[: end - 1])
    )
    return Instruction(header["name"], shape, opcode.strip(), operands, rest[end:])


def instructions(hlo_text: str) -> list[Instruction]:
    """Every instruction in an HLO module, in text order, fused computations included."""
    return [inst for line in hlo_text.splitlines() if (inst := parse_instruction(line))]


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
    """Bytes of all arrays in a shape.

    >>> shape_bytes("f32[1,2]{1,0}")
    8
    """
    return sum(DTYPE_BYTES[dtype] * math.prod(dims) for dtype, dims in array_shapes(shape))


def group_size(attributes: str) -> int:
    """The number of ranks in each replica group of a collective's attributes.

    Reads the three spellings XLA prints: explicit lists ``{{0,1},{2,3}}``, iota
    ``[2,2]<=[4]`` and named mesh axes ``mesh['x'=4,'y'=2] {'x'}``.

    >>> group_size("replica_groups={{0,1,2,3}}, dimensions={0}")
    4
    >>> group_size("replica_groups=[2,2]<=[4], dimensions={0}")
    2
    >>> group_size("replica_groups=mesh['axis_0'=4,'axis_1'=2] {'axis_0'}, to_apply=%add")
    4
    >>> group_size("replica_groups=mesh['a'=2,'b'=2], device_ids=([2,2]T(1,0)) {'a','b'}, x=1")
    4
    """
    if match := re.search(r"replica_groups=\{\{([\d,]*)\}", attributes):
        return len(match[1].split(","))
    if match := re.search(r"replica_groups=\[([\d,]+)\]<=", attributes):
        return int(match[1].split(",")[-1])
    if match := re.search(r"replica_groups=mesh\[([^\]]*)\][^{]*\{([^}]*)\}", attributes):
        sizes = {
            name.strip("'"): int(size) for name, size in re.findall(r"('[^']+')=(\d+)", match[1])
        }
        return math.prod(sizes[name.strip(" '")] for name in match[2].split(","))
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
        result = shape_bytes(shape)
        found.append(Collective(kind, shape, ranks, ring_bytes_per_rank(kind, result, ranks)))
    return found


def opcode_counts(hlo_text: str, *opcodes: str) -> dict[str, int]:
    """How many instructions of each named opcode the module has.

    >>> opcode_counts("%a = f32[2] add(%x, %y)\\n%b = f32[2] add(%a, %a)", "add", "dot")
    {'add': 2, 'dot': 0}
    """
    counts = dict.fromkeys(opcodes, 0)
    for inst in instructions(hlo_text):
        if inst.opcode in counts:
            counts[inst.opcode] += 1
    return counts


def without_metadata(line: str) -> str:
    """An HLO line without its ``metadata={...}``, for display.

    >>> without_metadata('%d = f32[2] dot(%a, %b), metadata={op_name="jit(f)/dot"}')
    '%d = f32[2] dot(%a, %b)'
    """
    return re.sub(r",\s*metadata=\{[^{}]*\}", "", line).strip()


def is_sharding_call(inst: Instruction) -> bool:
    """Whether ``inst`` is the ``Sharding`` custom call that sharding-in-types lowering emits."""
    return inst.opcode == "custom-call" and 'custom_call_target="Sharding"' in inst.attributes


def sharding_call_count(hlo_text: str) -> int:
    """How many ``Sharding`` custom calls the module has (zero once XLA has partitioned it)."""
    return sum(is_sharding_call(inst) for inst in instructions(hlo_text))


_PASS_THROUGH = {"bitcast", "copy", "reshape", "convert", "all-reduce", "get-tuple-element"}


@dataclasses.dataclass(frozen=True)
class TransposeSite:
    """A transpose whose operand chain leads back to a dot, and what stands between them.

    ``kind`` is ``"foldable"`` (the dot feeds the transpose directly), ``"barrier"``
    (a ``Sharding`` custom call in between), ``"all-reduce"`` (the partitioner put a
    collective in between) or ``"other"``.
    """

    transpose: str
    shape: str
    dot: str
    between: tuple[str, ...]
    kind: str
    dot_shape: str = ""
    op_name: str | None = None
    """The dot's ``metadata={op_name=...}``: JAX's name stack for the op that made it."""
    source: str | None = None
    """``file:line`` of the Python call that made the dot, when the text has stack frames."""
    output: int | None = None
    """Which element of the entry computation's result the transpose's value reaches, if any."""


def _walk_back(
    inst: Instruction, by_name: dict[str, Instruction]
) -> tuple[list[Instruction], Instruction | None]:
    """The pass-through ops behind ``inst``'s first operand, nearest first, and the op that produced the value.

    A ``get-tuple-element`` of a multi-operand op (a combined all-reduce) is followed
    into the operand it selects, with the tuple op itself kept in the chain.
    """
    chain: list[Instruction] = []
    current = by_name.get(inst.operands[0]) if inst.operands else None
    while current is not None and (current.opcode in _PASS_THROUGH or is_sharding_call(current)):
        chain.append(current)
        source = by_name.get(current.operands[0]) if current.operands else None
        if (
            current.opcode == "get-tuple-element"
            and source is not None
            and len(source.operands) > 1
        ):
            chain.append(source)
            source = by_name.get(
                source.operands[int(re.search(r"index=(\d+)", current.attributes)[1])]
            )
        current = source
    return chain, current


def value_source(
    inst: Instruction, by_name: dict[str, Instruction]
) -> tuple[list[Instruction], Instruction | None]:
    """The pass-through ops (``Sharding`` calls included) behind ``inst``'s operand, and what made the value.

    The chain is nearest first; the producer is ``None`` when the value comes from
    outside the instructions given.
    """
    return _walk_back(inst, by_name)


def _has_dims(inst: Instruction, dims: tuple[int, ...] | None) -> bool:
    """Whether ``inst``'s first array has exactly the sizes ``dims``, in any order (``None``: any)."""
    shapes = array_shapes(inst.shape)
    return bool(shapes) and (dims is None or sorted(shapes[0][1]) == sorted(dims))


def _label(inst: Instruction) -> str:
    return "Sharding" if is_sharding_call(inst) else inst.opcode


def transpose_of_dot_sites(
    hlo_text: str, dims: tuple[int, ...] | None = None
) -> list[TransposeSite]:
    """Every transpose fed, through pass-through ops only, by a dot; ``dims`` keeps those of that size set.

    XLA's algebraic simplifier rewrites ``transpose(dot(a, b))`` as ``dot(b, a)``
    only when the dot is the transpose's direct operand, so anything listed in
    ``between`` defeats the fold.
    """
    by_name = {inst.name: inst for inst in instructions(hlo_text)}
    frames = source_locations(hlo_text)
    sites = []
    for inst in by_name.values():
        if inst.opcode != "transpose" or not _has_dims(inst, dims):
            continue
        chain, origin = _walk_back(inst, by_name)
        if origin is None or origin.opcode != "dot":
            continue
        between = [_label(op) for op in chain]
        kind = (
            "barrier" if "Sharding" in between
            else "all-reduce" if "all-reduce" in between
            else "foldable" if not between
            else "other"
        )  # fmt: skip
        frame = re.search(r"stack_frame_id=(\d+)", origin.attributes)
        sites.append(
            TransposeSite(
                inst.name,
                inst.shape,
                origin.name,
                tuple(between),
                kind,
                dot_shape=origin.shape,
                op_name=op_name(origin),
                source=frames.get(int(frame[1])) if frame else None,
            )
        )
    reached = outputs_reached(hlo_text, [site.transpose for site in sites])
    return [dataclasses.replace(site, output=reached[site.transpose]) for site in sites]


def op_name(inst: Instruction) -> str | None:
    """The ``op_name`` of an instruction's metadata, if it has one.

    >>> op_name(parse_instruction('d = f32[2] dot(a, b), metadata={op_name="jit(f)/dot_general"}'))
    'jit(f)/dot_general'
    """
    match = re.search(r'op_name="([^"]*)"', inst.attributes)
    return match[1] if match else None


_TABLES = ("FileNames", "FunctionNames", "FileLocations", "StackFrames")


def source_locations(hlo_text: str) -> dict[int, str]:
    """``file:line`` of each stack frame, read from the tables XLA prints above a module with metadata.

    ``lowered.as_text(dialect="hlo", debug_info=True)`` writes them; an instruction's
    ``stack_frame_id`` names its innermost frame (the Python line that made it).
    Text without the tables gives ``{}``.
    """
    tables: dict[str, dict[int, str]] = {}
    current = None
    for line in hlo_text.splitlines():
        if line.strip() in _TABLES:
            current = tables.setdefault(line.strip(), {})
        elif current is not None and (entry := re.match(r"^(\d+) (.*)$", line)):
            current[int(entry[1])] = entry[2]
        else:
            current = None
    files = {key: value.strip('"') for key, value in tables.get("FileNames", {}).items()}
    places = {}
    for key, value in tables.get("FileLocations", {}).items():
        fields = dict(re.findall(r"(\w+)=(\d+)", value))
        places[key] = f"{files.get(int(fields['file_name_id']), '?')}:{fields['line']}"
    return {
        key: places.get(int(dict(re.findall(r"(\w+)=(\d+)", value))["file_location_id"]), "?")
        for key, value in tables.get("StackFrames", {}).items()
    }


_CARRIES = {
    "bitcast",
    "copy",
    "reshape",
    "convert",
    "transpose",
    "add",
    "custom-call",
    "all-reduce",
}
"""Ops that pass a value on whole (same element count) on its way to the module's result."""


def _tuple_index(inst: Instruction) -> int:
    return int(re.search(r"index=(\d+)", inst.attributes)[1])


def _elements(inst: Instruction) -> int:
    shapes = array_shapes(inst.shape)
    return math.prod(shapes[0][1]) if len(shapes) == 1 else -1


def outputs_reached(hlo_text: str, names: list[str]) -> dict[str, int | None]:
    """For each named instruction, the element of the entry's result its value reaches, else None.

    Follows the value forward through ops that pass it on whole (``_CARRIES``),
    into a ``dynamic-update-slice`` as its update (a scan stacking per-layer
    gradients), through the ``call`` computations and ``while`` bodies and the
    tuples that carry it, to the entry computation's root. A weight gradient
    reaches its parameter's output; an activation gradient reaches none.
    """
    comps, entry, _ = computations(hlo_text)
    by_name, owner, users, roots = {}, {}, {}, {}
    for comp, insts in comps.items():
        for inst in insts:
            by_name[inst.name], owner[inst.name] = inst, comp
            for index, operand in enumerate(inst.operands):
                users.setdefault(operand, []).append((inst, index))
    for line in hlo_text.splitlines():
        if line.lstrip().startswith("ROOT ") and (inst := parse_instruction(line)) is not None:
            roots[owner[inst.name]] = inst.name
    loops = {
        body[1]: inst
        for inst in by_name.values()
        if inst.opcode == "while" and (body := re.search(r"\bbody=%?([\w.\-]+)", inst.attributes))
    }

    def selected(tuple_value: str, index: int) -> list[str]:
        return [
            user.name
            for user, _ in users.get(tuple_value, [])
            if user.opcode == "get-tuple-element" and _tuple_index(user) == index
        ]

    def onward(name: str) -> list[str | int]:
        """Where the value of ``name`` goes next: instructions, or an entry output's index."""
        inst, found = by_name[name], []
        if roots.get(owner[name]) == name and owner[name] == entry:
            found.append(0)
        for user, index in users.get(name, []):
            comp = owner[user.name]
            if user.opcode == "tuple" and roots.get(comp) == user.name:
                if comp == entry:
                    found.append(index)
                elif comp in loops:
                    found += selected(loops[comp].name, index)
            elif user.opcode in ("tuple", "all-reduce") and len(user.operands) > 1:
                found += selected(user.name, index)
            elif (
                (user.opcode == "dynamic-update-slice" and index == 1)
                or (user.opcode == "call" and passes_through(user, index))
                or (user.opcode in _CARRIES and _elements(user) == _elements(inst))
            ):
                found.append(user.name)
        return found

    def passes_through(call: Instruction, index: int) -> bool:
        """Whether operand ``index`` of ``call`` reaches its computation's root."""
        callee = re.search(r"to_apply=%?([\w.\-]+)", call.attributes)[1]
        starts = [
            p.name
            for p in comps.get(callee, [])
            if p.opcode == "parameter" and p.operands == (str(index),)
        ]
        return roots.get(callee) in walk(starts, within=callee)

    def walk(starts: list[str], within: str | None = None) -> set[str | int]:
        pending, seen = list(starts), set()
        while pending:
            name = pending.pop()
            if name in seen:
                continue
            seen.add(name)
            if isinstance(name, str) and (within is None or owner[name] == within):
                pending += onward(name)
        return seen

    def reached(name: str) -> int | None:
        outputs = sorted(item for item in walk([name]) if isinstance(item, int))
        return outputs[0] if outputs else None

    return {name: reached(name) for name in names}


@dataclasses.dataclass(frozen=True)
class Relayout:
    """A transpose or layout-changing copy left in a compiled module."""

    opcode: str
    shape: str


def relayouts(hlo_text: str, dims: tuple[int, ...] | None = None) -> list[Relayout]:
    """The transposes and copies of a compiled module; ``dims`` keeps those of that size set."""
    return [
        Relayout(inst.opcode, inst.shape)
        for inst in instructions(hlo_text)
        if inst.opcode in ("transpose", "copy") and _has_dims(inst, dims)
    ]


_COMPUTATION = re.compile(r"^\s*(?:ENTRY\s+)?%?(?P<name>[\w.\-]+)\s*(?:\(.*)?\{\s*$")
"""A computation's header: ``%name (params) -> shape {``, or ``name {`` as metadata printing writes it."""
_CALLS = re.compile(r"(?:calls|to_apply)=%?([\w.\-]+)")
_ORIGINS = ("dot", "convolution", "parameter")


def computations(hlo_text: str) -> tuple[dict[str, list[Instruction]], str, str]:
    """Each computation's instructions by name, the entry computation's name and its root's name."""
    found: dict[str, list[Instruction]] = {}
    entry = root = current = ""
    for line in hlo_text.splitlines():
        header = _COMPUTATION.match(line) if " = " not in line.split("(")[0] else None
        if header is not None:
            current = header["name"]
            found[current] = []
            entry = current if line.lstrip().startswith("ENTRY") else entry
        elif (inst := parse_instruction(line)) is not None and current:
            found[current].append(inst)
            root = inst.name if current == entry and line.lstrip().startswith("ROOT") else root
    return found, entry, root


def _opcodes_inside(inst: Instruction, comps: dict[str, list[Instruction]]) -> set[str]:
    """The opcodes of the computations ``inst`` calls (a fusion's body), nested calls included."""
    seen, pending, opcodes = set(), _CALLS.findall(inst.attributes), set()
    while pending:
        name = pending.pop()
        if name in seen or name not in comps:
            continue
        seen.add(name)
        for inner in comps[name]:
            opcodes.add(inner.opcode)
            pending.extend(_CALLS.findall(inner.attributes))
    return opcodes


@dataclasses.dataclass(frozen=True)
class GradientRelayout:
    """A transpose or copy on the data path between the weight-gradient dot and an output."""

    name: str
    opcode: str
    shape: str
    relayouts: tuple[str, ...]


def kernel_relayouts(
    hlo_text: str, outputs: tuple[int, ...], kernel_elements: set[int]
) -> list[GradientRelayout]:
    """Transposes and copies between the kernel-sized values behind the entry's ``outputs``.

    Walks back from each listed element of the entry's root tuple through every
    operand of a size in ``kernel_elements`` (the kernel and its shards), stopping
    at a dot (or a fusion that computes one) and at parameters; a fusion counts
    once, with the transposes and copies inside it. Following the data, not the
    sizes, keeps other arrays of the same shape (an embedding table) out.
    """
    comps, entry, root = computations(hlo_text)
    by_name = {inst.name: inst for inst in comps.get(entry, [])}
    if root not in by_name:
        raise ValueError("No entry computation with a ROOT instruction in this HLO text.")
    pending = [by_name[root].operands[index] for index in outputs]
    seen: set[str] = set()
    found = []
    while pending:
        inst = by_name.get(pending.pop())
        if inst is None or inst.name in seen:
            continue
        seen.add(inst.name)
        inside = _opcodes_inside(inst, comps)
        if inst.opcode in _ORIGINS or "dot" in inside:
            continue
        moved = tuple(sorted({inst.opcode, *inside} & {"transpose", "copy"}))
        if moved:
            found.append(GradientRelayout(inst.name, inst.opcode, inst.shape, moved))
        if inst.opcode == "get-tuple-element":
            source = by_name.get(inst.operands[0])
            index = int(re.search(r"index=(\d+)", inst.attributes)[1])
            if source is not None and len(source.operands) > index:
                seen.add(source.name)
                pending.append(source.operands[index])
            continue
        for operand in inst.operands:
            shapes = array_shapes(by_name[operand].shape) if operand in by_name else []
            if len(shapes) == 1 and math.prod(shapes[0][1]) in kernel_elements:
                pending.append(operand)
    return found


_DUMP_NAME = re.compile(r"^module_\d+\.[^.]+\.(?P<index>\d{4})\.(?P<pipeline>[^.]+)\.after_(?P<after>[^.]+)\.before_(?P<before>[^.]+)\.txt$")  # fmt: skip


def parse_dump_name(name: str) -> tuple[int, str, str, str] | None:
    """``(index, pipeline, pass before, pass after)`` of a per-pass dump file name, else None.

    >>> parse_dump_name("module_0001.jit_f.0010.simplification.after_dce.before_algsimp.txt")
    (10, 'simplification', 'dce', 'algsimp')
    """
    match = _DUMP_NAME.match(name)
    return (
        (int(match["index"]), match["pipeline"], match["after"], match["before"]) if match else None
    )


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


@dataclasses.dataclass(frozen=True)
class PassOrder:
    """Where the first algebraic simplifier and the first partitioner stand in an XLA pass dump.

    Positions are dump indices; ``None`` when no dump names such a pass, and then
    ``partitioner_first`` is ``None`` ("unknown") and ``names_seen`` lists what the
    dumps did name, so a pipeline with other names is reported, not guessed.
    """

    first_algsimp: int | None
    first_spmd_partitioner: int | None
    partitioner_pass: str | None
    module_before_first_algsimp: str
    names_seen: tuple[str, ...]

    @property
    def partitioner_first(self) -> bool | None:
        """True when the partitioner runs before the simplifier (as on CPU); None when unknown."""
        if self.first_algsimp is None or self.first_spmd_partitioner is None:
            return None
        return self.first_spmd_partitioner < self.first_algsimp


def pass_order(dump_files: dict[str, str]) -> PassOrder:
    """Read the pass order from ``--xla_dump_hlo_pass_re=.*`` dump files (name -> text).

    A dump is written after each pass that changed the module and names its
    pipeline, the pass before and the pass after; a pass's position is the first
    dump that names it. Partitioners are recognised by :data:`PARTITIONER_PASSES`,
    the simplifier by :data:`SIMPLIFIER_PASSES`.
    """
    dumps = sorted(
        (parsed[0], parsed[1:], text)
        for name, text in dump_files.items()
        if (parsed := parse_dump_name(name))
    )
    if not dumps:
        raise ValueError("No per-pass HLO dumps found: compile with xla_dump_hlo_pass_re='.*'.")

    def first(names: dict[str, str]) -> tuple[int | None, str | None, str]:
        for index, named, text in dumps:
            found = next((name for name in named if name in names), None)
            if found is not None:
                return index, found, text
        return None, None, ""

    algsimp, _, module = first(SIMPLIFIER_PASSES)
    partitioner, partitioner_pass, _ = first(PARTITIONER_PASSES)
    seen = tuple(dict.fromkeys(name for _, named, _ in dumps for name in named))
    return PassOrder(algsimp, partitioner, partitioner_pass, module, seen)


def site_excerpt(hlo_text: str, site: TransposeSite) -> str:
    """The dot, whatever stands between, and the transpose of a site, one labelled line each.

    Layouts, metadata and long operand names are shortened so the chain reads at a glance.
    """
    by_name = {inst.name: inst for inst in instructions(hlo_text)}
    transpose = by_name[site.transpose]
    chain, origin = _walk_back(transpose, by_name)
    lines = []
    for inst in [origin, *reversed(chain), transpose]:
        label = _label(inst)
        shape = re.sub(r"\{[\d,]*\}", "", inst.shape)
        operands = ", ".join(
            name if len(name) <= 16 else name[:13] + "..." for name in inst.operands
        )
        kept = re.findall(
            r"(custom_call_target=\"\w+\"|dimensions=\{[\d,]*\}|\w+_contracting_dims=\{[\d,]*\})",
            inst.attributes,
        )
        lines.append(
            f"{label:>9} | {inst.name} = {shape} {inst.opcode}({operands}) {' '.join(kept)}".rstrip()
        )
    return "\n".join(lines)


if __name__ == "__main__":
    run_module()
