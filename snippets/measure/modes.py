"""What each shard mode lets you write: every capability check, run on an Explicit and an Auto mesh.

Each check's outcome per mode is ``ok`` (``ok: ...`` where it reads a type or a compiled module)
or the error's type and whole message (:func:`message`): a release that changes one shows.
"""

from __future__ import annotations

import contextlib
import functools
import inspect
import json
import math
import re
import signal
import subprocess
import sys
from collections.abc import Callable, Sequence
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np
import optax
from flax import nnx
from jax.experimental.custom_partitioning import custom_partitioning
from jax.lax import with_sharding_constraint
from jax.sharding import AxisType, Mesh, NamedSharding, auto_axes, reshard
from jax.sharding import PartitionSpec as P

from find_barriers.program import attribute_dims, read_hlo
from find_barriers.shapes import array_shapes, elements
from snippets.devices import MESH_DEVICES, SHARD_MODES, make_mesh, setup_devices
from snippets.hlo.collectives import collectives
from snippets.measure.step_lowering import compiled_text
from snippets.support.cli import Parser, reported
from snippets.support.results import shared
from snippets.support.tables import print_report

Check = Callable[[AxisType], str | None]
"""A check runs plain JAX under one axis type; it returns what it read (or ``None``), or raises."""


def mesh_of(
    axis_type: AxisType, shape: Sequence[int] = (MESH_DEVICES,), names: Sequence[str] = ("x",)
) -> Mesh:
    """:func:`snippets.devices.make_mesh` with every axis of type ``axis_type``; one axis by default."""
    return make_mesh(shape, names, axis_type.name.lower())


SOURCE = re.compile(r"(?:/[^\s:()]+)+\.py:\d+(?::\d+)?")
"""A Python source location, ``/path/file.py:LINE[:COLUMN]``: JAX names the caller's line."""
ADDRESS = re.compile(r"\b0x[0-9a-fA-F]+\b")
"""A memory address, as a ``repr`` prints it."""


def message(error: BaseException) -> str:
    """The error's type and whole message, with source locations and addresses normalised.

    >>> message(ValueError("bad spec. This error occurs at source:  /a/b.py:3:7 (f)\\nmore"))
    'ValueError: bad spec. This error occurs at source:  <source> (f)\\nmore'
    """
    text = ADDRESS.sub("0x...", SOURCE.sub("<source>", str(error).strip()))
    return f"{type(error).__name__}: {text}" if text else type(error).__name__


def outcome(check: Check, axis_type: AxisType) -> str:
    """``ok`` (``ok: what it read``) if ``check`` runs under ``axis_type``, else its error."""
    try:
        seen = check(axis_type)
    except Exception as error:  # noqa: BLE001 (every error is an outcome to record)
        return message(error)
    return "ok" if seen is None else f"ok: {seen}"


_ROOT = Path(__file__).resolve().parents[2]  # holds the snippets package, for a fresh interpreter
GLOG_PREFIX = re.compile(r"^[FEWI]\d{4} [\d:.]+\s+\d+ ", re.MULTILINE)
"""A C++ log line's severity, date, time and thread id (XLA logs a failed check this way)."""


def isolated_outcome(name: str, axis_type: AxisType) -> str:
    """:func:`outcome` of check ``name`` in a fresh interpreter, so that a program aborting it
    (as jax-ml/jax#29162's did) ends only that one; then the outcome is :func:`aborted`'s."""
    code = (
        "import json, sys; from snippets.measure import modes; modes.setup_devices(); "
        "check, axis_type = modes.CAPABILITY_CHECKS[sys.argv[1]], modes.AxisType[sys.argv[2]]; "
        "print(json.dumps(modes.outcome(check, axis_type)))"
    )
    command = [sys.executable, "-c", code, name, axis_type.name]
    result = subprocess.run(command, capture_output=True, text=True, cwd=_ROOT, check=False)
    if result.returncode == 0:
        return json.loads(result.stdout.splitlines()[-1])
    return aborted(result.returncode, result.stderr)


def aborted(returncode: int, stderr: str) -> str:
    """The outcome of an interpreter that ended without one: how it ended and its last log line.

    >>> aborted(-6, "F1201 22:30:11.527553    6585 hlo_sharding.cc:1004] Check failed\\n")
    'Aborted: signal SIGABRT: hlo_sharding.cc:1004] Check failed'
    """
    ended = f"signal {signal.Signals(-returncode).name}" if returncode < 0 else f"exit {returncode}"
    last = GLOG_PREFIX.sub("", (stderr.strip().splitlines() or [""])[-1])
    return f"Aborted: {ended}: {SOURCE.sub('<source>', last)}"


def dot_flops(hlo_text: str) -> int:
    """Per-device FLOPs of a compiled module's dots: 2 x result elements x contracted size."""
    total = 0
    for body in read_hlo(hlo_text).computations.values():
        shapes = {inst.name: inst.shape for inst in body}
        for inst in body:
            if inst.opcode != "dot":
                continue
            lhs = array_shapes(shapes[inst.operands[0]])[0][1]
            dims = attribute_dims(inst.attributes, "lhs_contracting_dims")
            contracted = math.prod(lhs[d] for d in dims)
            total += 2 * elements(inst.shape) * contracted
    return total


# The checks: plain JAX, one capability each.


def make_mesh_default(axis_type: AxisType) -> str:
    """What ``jax.make_mesh`` gives without ``axis_types``."""
    default = jax.make_mesh((4,), ("x",)).axis_types
    return "the default" if default == (axis_type,) else f"needs axis_types=({axis_type},)"


def mesh_default(axis_type: AxisType) -> str:
    """What ``jax.sharding.Mesh(devices, names)`` gives without ``axis_types`` (MaxText's call)."""
    default = Mesh(np.array(jax.devices()[:MESH_DEVICES]), ("x",)).axis_types
    return "the default" if default == (axis_type,) else f"needs axis_types=({axis_type},)"


def typed_sharding(axis_type: AxisType) -> str:
    """The type of an array placed with ``P("x")``."""
    with jax.set_mesh(mesh_of(axis_type)):
        x = jax.device_put(jnp.ones((8, 8)), P("x"))
        return str(jax.typeof(x))


def constraint_mismatch(axis_type: AxisType) -> str:
    """A constraint to a layout the array does not have."""
    with jax.set_mesh(mesh_of(axis_type)):
        x = jax.device_put(jnp.ones((8, 8)), P("x", None))
        f = jax.jit(lambda a: with_sharding_constraint(a, P(None, "x")))
        return f"laid out as {f(x).sharding.spec}"


def constraint_match(axis_type: AxisType) -> str:
    """A constraint to the layout the array has: what it emits."""
    with jax.set_mesh(mesh_of(axis_type)):
        x = jax.device_put(jnp.ones((8, 8)), P("x", None))
        spec = P("x", None)
        hinted = jax.jit(lambda a: with_sharding_constraint(a * 2, spec))
        plain = jax.jit(lambda a: a * 2)
        texts = [f.lower(x).as_text() for f in (hinted, plain)]
        if texts[0] == texts[1]:
            return "StableHLO unchanged"
        added = [text.count("sharding_constraint") for text in texts]
        return f"adds {added[0] - added[1]} sharding_constraint"


def constraint_without_set_mesh(axis_type: AxisType) -> str:
    """The mismatched constraint as a ``NamedSharding``, no ``set_mesh``."""
    mesh = mesh_of(axis_type)
    x = jax.device_put(jnp.ones((8, 8)), NamedSharding(mesh, P("x")))
    hint = NamedSharding(mesh, P(None, "x"))
    f = jax.jit(lambda a: with_sharding_constraint(a, hint))
    return f"laid out as {f(x).sharding.spec}"


def unconstrained(axis_type: AxisType) -> str:
    """Leave a dimension to the partitioner: ``P.UNCONSTRAINED``."""
    with jax.set_mesh(mesh_of(axis_type)):
        x = jax.device_put(jnp.ones((8, 8)), P("x", None))
        spec = P(P.UNCONSTRAINED, None)
        f = jax.jit(lambda a: with_sharding_constraint(a, spec))
        return f"laid out as {f(x).sharding.spec}"


def unreduced(axis_type: AxisType) -> str:
    """A product's partial sums, left unreduced over ``x``."""
    with jax.set_mesh(mesh_of(axis_type)):
        a = jax.device_put(jnp.ones((2, 8)), P(None, "x"))
        b = jax.device_put(jnp.ones((8, 8)), P("x", None))
        spec = P(None, None, unreduced={"x"})
        f = jax.jit(functools.partial(jnp.dot, out_sharding=spec))
        return str(jax.typeof(f(a, b)))


def reduced(axis_type: AxisType) -> str:
    """A replicated array whose gradient comes back unreduced."""
    with jax.set_mesh(mesh_of(axis_type)):
        spec = P(None, None, reduced={"x"})
        return str(jax.typeof(jax.device_put(jnp.ones((1, 8)), spec)))


def doubly_sharded_einsum(axis_type: AxisType) -> str:
    """Scores from q and k split on their sequence axes (context)."""
    with jax.set_mesh(mesh_of(axis_type)):
        q = jax.device_put(jnp.ones((2, 8, 8)), P(None, "x", None))
        k = jax.device_put(jnp.ones((2, 8, 8)), P(None, "x", None))
        f = jax.jit(functools.partial(jnp.einsum, "bth,bsh->bts"))
        return str(jax.typeof(f(q, k)))


def sharded_contraction(axis_type: AxisType) -> str:
    """A product whose contracted dimension is split in both operands."""
    with jax.set_mesh(mesh_of(axis_type)):
        a = jax.device_put(jnp.ones((8, 8)), P(None, "x"))
        b = jax.device_put(jnp.ones((8, 8)), P("x", None))
        return str(jax.typeof(jax.jit(jnp.matmul)(a, b)))


def out_sharding(axis_type: AxisType) -> str:
    """The fix for both errors above: say how the result is laid out."""
    with jax.set_mesh(mesh_of(axis_type)):
        a = jax.device_put(jnp.ones((8, 8)), P(None, "x"))
        b = jax.device_put(jnp.ones((8, 8)), P("x", None))
        f = jax.jit(functools.partial(jnp.dot, out_sharding=P("x", None)))
        return str(jax.typeof(f(a, b)))


def mismatched_layout(axis_type: AxisType) -> str:
    """MaxText's section 6.4: add two arrays laid out differently."""
    with jax.set_mesh(mesh_of(axis_type)):
        p = jax.device_put(jnp.ones((8, 8)), P("x", None))
        u = jax.device_put(jnp.ones((8, 8)), P(None, "x"))
        text = compiled_text(jax.jit(jnp.add).lower(p, u).compile())
        kinds = sorted({op.kind for op in collectives(text)})
        return f"compiles with {', '.join(kinds) or 'no collective'}"


def pinned_module(axis_type: AxisType, shape: Sequence[int] = (2, 2)) -> str:
    """MaxText's section 7.2: a pinned einsum result, compiled."""
    explicit = axis_type == AxisType.Explicit
    constrain = reshard if explicit else with_sharding_constraint  # as MaxText
    with jax.set_mesh(mesh_of(axis_type, shape, ("fsdp", "tensor"))):
        x = jax.device_put(jnp.ones((8, 256, 512)), P("fsdp", None, None))
        w = jax.device_put(jnp.ones((512, 2048)), P())

        def f(x, w):
            y = jnp.einsum("bse,ef->bsf", x, w)
            return constrain(y, P("fsdp", "tensor", None))

        return compiled_text(jax.jit(f).lower(x, w).compile())


def pinned_intermediate(axis_type: AxisType) -> str:
    """The pinned einsum's per-device dot FLOPs, from its compiled module."""
    return f"{dot_flops(pinned_module(axis_type)):,} dot FLOPs per device"


def shard_map_check_vma(axis_type: AxisType) -> None:
    """``shard_map`` with ``check_vma=True`` and a ``psum``."""
    mesh = mesh_of(axis_type)
    with jax.set_mesh(mesh):
        x = jax.device_put(jnp.ones((8, 8)), P("x", None))
        total = jax.shard_map(
            lambda a: jax.lax.psum(a, "x"),
            mesh=mesh,
            in_specs=P("x"),
            out_specs=P(),
            check_vma=True,
        )
        jax.jit(total)(x).block_until_ready()


def _mixed(axis_type: AxisType) -> tuple[Mesh, str]:
    """A 2 x 2 mesh with an Explicit axis ``x`` and an Auto axis ``y``, and this mode's axis."""
    mesh = jax.make_mesh((2, 2), ("x", "y"), axis_types=(AxisType.Explicit, AxisType.Auto))
    return mesh, "x" if axis_type == AxisType.Explicit else "y"


def mixed_mesh(axis_type: AxisType) -> str:
    """An array split over this mode's axis of a mixed mesh."""
    mesh, axis = _mixed(axis_type)
    with jax.set_mesh(mesh):
        x = jax.device_put(jnp.ones((8, 8)), P(axis, None))
        return str(jax.typeof(x))


def mixed_mesh_unreduced(axis_type: AxisType) -> str:
    """Partial sums over this mode's axis of a mixed mesh, finished."""
    mesh, axis = _mixed(axis_type)
    with jax.set_mesh(mesh):
        a = jax.device_put(jnp.ones((2, 8)), P(None, axis))
        b = jax.device_put(jnp.ones((8, 8)), P(axis, None))
        spec = P(None, None, unreduced={axis})

        def f(a, b):
            return reshard(jnp.dot(a, b, out_sharding=spec), P())

        return f"sums to {float(jax.jit(f)(a, b)[0, 0]):g}"


def auto_axes_keyword(axis_type: AxisType) -> str:
    """jax-ml/jax#33226: an ``auto_axes`` function given a keyword."""
    with jax.set_mesh(mesh_of(axis_type)):
        x = jax.device_put(jnp.ones((8, 8)), P("x", None))
        matmul = auto_axes(jnp.matmul, out_sharding=P("x", None))
        f = jax.jit(lambda a, b: matmul(a, b=b))  # b= is not resharded
        return str(jax.typeof(f(x, x)))


# The cases new explicit-mode users report most (TRACKER links each), and their fixes.


def _rows_and_indices() -> tuple[jax.Array, jax.Array]:
    """An (8, 8) array and 8 row indices, both split over ``x``; under ``jax.set_mesh``."""
    x = jax.device_put(jnp.ones((8, 8)), P("x", None))
    return x, jax.device_put(jnp.arange(8) % 3, P("x"))


def index_column(axis_type: AxisType) -> str:
    """``x[:, 1]`` on an array split over its rows."""
    with jax.set_mesh(mesh_of(axis_type)):
        x = jax.device_put(jnp.ones((8, 8)), P("x", None))
        return str(jax.typeof(jax.jit(lambda a: a[:, 1])(x)))


def gather_rows(axis_type: AxisType) -> str:
    """``x[i]``: rows picked by indices split like them."""
    with jax.set_mesh(mesh_of(axis_type)):
        x, i = _rows_and_indices()
        return str(jax.typeof(jax.jit(lambda a, i: a[i])(x, i)))


def gather_rows_out_sharding(axis_type: AxisType) -> str:
    """The fix: ``x.at[i].get(out_sharding=)``."""
    with jax.set_mesh(mesh_of(axis_type)):
        x, i = _rows_and_indices()
        f = jax.jit(lambda a, i: a.at[i].get(out_sharding=P("x", None)))
        return str(jax.typeof(f(x, i)))


def scatter_set(axis_type: AxisType) -> str:
    """``x.at[:, 1].set(0)`` on an array split over its rows."""
    with jax.set_mesh(mesh_of(axis_type)):
        x = jax.device_put(jnp.ones((8, 8)), P("x", None))
        return str(jax.typeof(jax.jit(lambda a: a.at[:, 1].set(0.0))(x)))


def scatter_add(axis_type: AxisType) -> str:
    """``x.at[i].add(x)``: rows added at indices split like them."""
    with jax.set_mesh(mesh_of(axis_type)):
        x, i = _rows_and_indices()
        return str(jax.typeof(jax.jit(lambda a, i: a.at[i].add(a))(x, i)))


def scatter_add_out_sharding(axis_type: AxisType) -> str:
    """The fix: ``x.at[i].add(x, out_sharding=)``."""
    with jax.set_mesh(mesh_of(axis_type)):
        x, i = _rows_and_indices()
        f = jax.jit(lambda a, i: a.at[i].add(a, out_sharding=P("x", None)))
        return str(jax.typeof(f(x, i)))


def repeat(axis_type: AxisType) -> str:
    """``jnp.repeat`` along a split dimension."""
    with jax.set_mesh(mesh_of(axis_type)):
        x = jax.device_put(jnp.ones((8, 8)), P("x", None))
        return str(jax.typeof(jax.jit(lambda a: jnp.repeat(a, 2, axis=0))(x)))


def repeat_out_sharding(axis_type: AxisType) -> str:
    """The fix: ``jnp.repeat(..., out_sharding=)``."""
    with jax.set_mesh(mesh_of(axis_type)):
        x = jax.device_put(jnp.ones((8, 8)), P("x", None))
        f = jax.jit(lambda a: jnp.repeat(a, 2, axis=0, out_sharding=P("x", None)))
        return str(jax.typeof(f(x)))


def map_batch_size(axis_type: AxisType) -> str:
    """``lax.map(..., batch_size=2)`` over 5 items split on their second dimension."""
    with jax.set_mesh(mesh_of(axis_type)):
        x = jax.device_put(jnp.ones((5, 8, 4)), P(None, "x", None))
        w = jnp.arange(4.0)
        return str(jax.typeof(jax.lax.map(lambda a: jnp.sum(w * a, -1), x, batch_size=2)))


def shard_map_some_axes(axis_type: AxisType) -> str:
    """``shard_map`` over ``x`` of an (x, y) mesh, a ``lax.map`` inside (jax-ml/jax#31799)."""
    with jax.set_mesh(mesh_of(axis_type, (2, 2), ("x", "y"))):
        x = jax.device_put(jnp.ones((4, 5, 4)), P("x", None, None))
        w = jnp.arange(4.0)
        body = functools.partial(jax.lax.map, lambda a: a @ w)
        f = jax.shard_map(body, in_specs=P("x"), out_specs=P("x"), axis_names={"x"})
        return str(jax.typeof(jax.jit(f)(x)))


def shard_map_closure(axis_type: AxisType) -> str:
    """A ``shard_map`` body closing over an array placed on the mesh (run isolated)."""
    with jax.set_mesh(mesh_of(axis_type)):
        w = jax.device_put(jnp.arange(8.0), P())
        x = jax.device_put(jnp.ones((8, 8)), P("x", None))
        f = jax.shard_map(lambda a: a * w, in_specs=P("x"), out_specs=P("x"))
        return str(jax.typeof(jax.jit(f)(x)))


def shard_map_closure_as_argument(axis_type: AxisType) -> str:
    """The fix: pass that array as an argument, with its own ``in_specs``."""
    with jax.set_mesh(mesh_of(axis_type)):
        w = jax.device_put(jnp.arange(8.0), P())
        x = jax.device_put(jnp.ones((8, 8)), P("x", None))
        f = jax.shard_map(lambda a, w: a * w, in_specs=(P("x"), P()), out_specs=P("x"))
        return str(jax.typeof(jax.jit(f)(x, w)))


def _pick_first(a: jax.Array) -> jax.Array:
    """A gather: the op JAX would have ``auto_axes`` take over."""
    return a[jnp.array([0, 0]), jnp.array([1, 1])]


def auto_axes_in_shard_map(axis_type: AxisType) -> str:
    """``auto_axes`` without ``axes=`` inside a ``shard_map`` over ``x`` of an (x, y) mesh."""
    with jax.set_mesh(mesh_of(axis_type, (2, 2), ("x", "y"))):
        x = jax.device_put(jnp.ones((8, 8)), P("x", None))
        pick = auto_axes(_pick_first, out_sharding=P())
        f = jax.shard_map(pick, in_specs=P("x"), out_specs=P("x"), axis_names={"x"})
        return str(jax.typeof(jax.jit(f)(x)))


def auto_axes_named_axes(axis_type: AxisType) -> str:
    """The fix: name the axes ``auto_axes`` takes over, ``axes="y"``."""
    with jax.set_mesh(mesh_of(axis_type, (2, 2), ("x", "y"))):
        x = jax.device_put(jnp.ones((8, 8)), P("x", None))
        pick = auto_axes(_pick_first, axes="y", out_sharding=P())
        f = jax.shard_map(pick, in_specs=P("x"), out_specs=P("x"), axis_names={"x"})
        return str(jax.typeof(jax.jit(f)(x)))


def cond_branch_shardings(axis_type: AxisType) -> str:
    """``lax.cond`` whose branches return the array and its transpose."""
    with jax.set_mesh(mesh_of(axis_type)):
        x = jax.device_put(jnp.ones((8, 8)), P("x", None))
        f = jax.jit(lambda p, a: jax.lax.cond(p, lambda a: a, lambda a: a.T, a))
        return str(jax.typeof(f(True, x)))


def cond_branch_reshard(axis_type: AxisType) -> str:
    """The fix: ``reshard`` the odd branch's result to the other's layout."""
    with jax.set_mesh(mesh_of(axis_type)):
        x = jax.device_put(jnp.ones((8, 8)), P("x", None))
        transposed = lambda a: reshard(a.T, P("x", None))
        f = jax.jit(lambda p, a: jax.lax.cond(p, lambda a: a, transposed, a))
        return str(jax.typeof(f(True, x)))


def switch_mixed_operands(axis_type: AxisType) -> str:
    """``vmap`` of ``lax.switch`` over split indices, a replicated operand beside them."""
    with jax.set_mesh(mesh_of(axis_type)):
        index = jax.device_put(jnp.array([0, 1, 2, 1]), P("x"))
        branches = [lambda pair: pair[0] + pair[1]] * 3

        def one(value, i):
            return jax.lax.switch(i, branches, (value, i))

        f = jax.jit(jax.vmap(one, in_axes=(None, 0)))
        return str(jax.typeof(f(jnp.ones(()), index)))


def auto_axes_scan_grad(axis_type: AxisType) -> str:
    """jax-ml/jax#33029's program: ``auto_axes`` inside ``scan`` under ``grad``."""
    with jax.set_mesh(mesh_of(axis_type)):

        def f(params, x):
            model = auto_axes(lambda x: params * x, out_sharding=P())
            return jax.lax.scan(lambda c, _: (model(c), ()), x, length=3)[0]

        return str(jax.jit(jax.grad(f))(1.0, 2.0))


def auto_axes_closure_scan_grad(axis_type: AxisType) -> str:
    """The same with split parameters, closed over by the ``auto_axes`` function."""
    with jax.set_mesh(mesh_of(axis_type)):
        p = jax.device_put(jnp.ones((8,)), P("x"))

        def f(params, x):
            model = auto_axes(lambda x: params * x, out_sharding=P("x"))
            return jax.lax.scan(lambda c, _: (model(c), ()), x, length=3)[0].sum()

        return str(jax.typeof(jax.jit(jax.grad(f))(p, p)))


def auto_axes_positional_scan_grad(axis_type: AxisType) -> str:
    """The fix: pass the parameters to the ``auto_axes`` function as an argument."""
    with jax.set_mesh(mesh_of(axis_type)):
        p = jax.device_put(jnp.ones((8,)), P("x"))
        model = auto_axes(lambda params, x: params * x, out_sharding=P("x"))

        def f(params, x):
            return jax.lax.scan(lambda c, _: (model(params, c), ()), x, length=3)[0].sum()

        return str(jax.typeof(jax.jit(jax.grad(f))(p, p)))


def reshape_split_dim(axis_type: AxisType) -> str:
    """Reshape ``(8, 1)`` split over ``x`` of an (x, y) mesh to ``(2, 4, 1)`` (jax-ml/jax#29859)."""
    with jax.set_mesh(mesh_of(axis_type, (2, 2), ("x", "y"))):
        a = jax.device_put(jnp.ones((8, 1)), P("x"))
        return str(jax.typeof(jax.jit(lambda a: a.reshape(2, 4, 1))(a)))


def reshape_merge_split_dim(axis_type: AxisType) -> str:
    """Reshape ``(8, 8)`` split on its columns to ``(64,)``."""
    with jax.set_mesh(mesh_of(axis_type)):
        a = jax.device_put(jnp.ones((8, 8)), P(None, "x"))
        return str(jax.typeof(jax.jit(lambda a: a.reshape(64))(a)))


def reshape_out_sharding(axis_type: AxisType) -> str:
    """The fix: ``jnp.reshape(..., out_sharding=)``."""
    with jax.set_mesh(mesh_of(axis_type)):
        a = jax.device_put(jnp.ones((8, 8)), P(None, "x"))
        f = jax.jit(lambda a: jnp.reshape(a, (64,), out_sharding=P("x")))
        return str(jax.typeof(f(a)))


def size_one_axis_concat(axis_type: AxisType) -> str:
    """jax-ml/jax#39309 on a (data=1, tensor=4) mesh: reshape, then concatenate."""
    with jax.set_mesh(mesh_of(axis_type, (1, 4), ("data", "tensor"))):
        x = jax.device_put(jnp.ones((1, 512)), P("data", "tensor"))
        y = jax.jit(lambda x: x.reshape(-1, 4, 128))(x)
        heads = jax.device_put(y, P("data", "tensor", None))
        return str(jax.typeof(jnp.concatenate((heads, y[..., :0]), axis=-1)))


def size_one_axis_out_sharding(axis_type: AxisType) -> str:
    """The fix: give the reshape the layout, ``out_sharding=``."""
    with jax.set_mesh(mesh_of(axis_type, (1, 4), ("data", "tensor"))):
        x = jax.device_put(jnp.ones((1, 512)), P("data", "tensor"))
        spec = P("data", "tensor", None)
        y = jax.jit(lambda x: jnp.reshape(x, (-1, 4, 128), out_sharding=spec))(x)
        heads = jax.device_put(y, spec)
        return str(jax.typeof(jnp.concatenate((heads, y[..., :0]), axis=-1)))


def _double_per_shard() -> tuple[Callable, list]:
    """A ``custom_partitioning`` doubling, and the list its partition callback appends its
    mesh's axis types to."""
    seen = []

    @custom_partitioning
    def double(x):
        return x * 2

    def partition(mesh, arg_shapes, result_shape):
        seen.append(mesh.axis_types)
        return mesh, lambda x: x * 2, result_shape.sharding, (arg_shapes[0].sharding,)

    double.def_partition(partition=partition, sharding_rule="i j -> i j")
    return double, seen


def custom_partitioning_mesh(axis_type: AxisType) -> str:
    """The axis types a ``custom_partitioning`` callback is given (the next check compiles it)."""
    double, seen = _double_per_shard()
    with jax.set_mesh(mesh_of(axis_type)):
        x = jax.device_put(jnp.ones((8, 8)), P("x", None))
        with contextlib.suppress(Exception):
            jax.jit(double).lower(x).compile()
        return f"the callback sees {sorted(set(seen))}"


def custom_partitioning_runs(axis_type: AxisType) -> str:
    """A ``custom_partitioning`` function, compiled and run."""
    double, _ = _double_per_shard()
    with jax.set_mesh(mesh_of(axis_type)):
        x = jax.device_put(jnp.ones((8, 8)), P("x", None))
        return str(jax.typeof(jax.jit(double)(x)))


def random_out_sharding(axis_type: AxisType) -> str:
    """``jax.random.normal(..., out_sharding=)``."""
    with jax.set_mesh(mesh_of(axis_type)):
        key = jax.random.key(0)
        return str(jax.typeof(jax.random.normal(key, (8, 8), out_sharding=P("x", None))))


def random_out_shardings(axis_type: AxisType) -> str:
    """The fix on an auto mesh: the layout as ``jax.jit(..., out_shardings=)``."""
    mesh = mesh_of(axis_type)
    with jax.set_mesh(mesh):
        normal = functools.partial(jax.random.normal, shape=(8, 8))
        f = jax.jit(normal, out_shardings=NamedSharding(mesh, P("x", None)))
        return f"laid out as {f(jax.random.key(0)).sharding.spec}"


def _ragged_inputs() -> tuple[jax.Array, jax.Array, jax.Array]:
    """``lax.ragged_dot``'s operands: rows split over ``x``, 2 groups of 4 rows."""
    x = jax.device_put(jnp.ones((8, 4)), P("x", None))
    return x, jnp.ones((2, 4, 3)), jnp.array([4, 4], jnp.int32)


def no_sharding_rule(axis_type: AxisType) -> str:
    """``lax.ragged_dot`` without ``out_sharding``: its sharding rule cannot infer the result's."""
    with jax.set_mesh(mesh_of(axis_type)):
        return str(jax.typeof(jax.jit(jax.lax.ragged_dot)(*_ragged_inputs())))


def auto_axes_escape_hatch(axis_type: AxisType) -> str:
    """The fix: run it in ``auto_axes``, saying only the result's layout."""
    with jax.set_mesh(mesh_of(axis_type)):
        ragged_dot = auto_axes(jax.lax.ragged_dot, out_sharding=P("x", None))
        return str(jax.typeof(jax.jit(ragged_dot)(*_ragged_inputs())))


# Switching a small Flax model from auto to explicit: its errors, in order.

FIXES = ("embed", "down", "loss")
"""The changes that let the model run on an Explicit mesh, in order."""


class FlaxLM(nnx.Module):
    """Embedding, MLP block, untied head; over ("data", "model")."""

    def __init__(self, rngs: nnx.Rngs, fixes: Sequence[str] = ()):
        vocab, emb = 64, 16
        split = nnx.with_partitioning
        kernel = nnx.initializers.lecun_normal()
        table = split(nnx.initializers.normal(), ("model", None))
        self.fixes = tuple(fixes)
        self.embed = nnx.Embed(vocab, emb, embedding_init=table, rngs=rngs)
        col = split(kernel, (None, "model"))  # columns over "model"
        row = split(kernel, ("model", None))  # rows over "model"
        self.up = nnx.Linear(emb, 2 * emb, kernel_init=col, rngs=rngs)
        self.down = nnx.Linear(2 * emb, emb, kernel_init=row, rngs=rngs)
        self.head = nnx.Linear(emb, vocab, kernel_init=col, rngs=rngs)

    def __call__(self, tokens: jax.Array) -> jax.Array:
        """Logits; with ``fixes``, the layouts explicit mode needs."""
        rows = P("data", None, None)  # activations: batch over "data"
        fixed = {fix: rows if fix in self.fixes else None for fix in FIXES}
        h = self.embed(tokens, out_sharding=fixed["embed"])
        hidden = jax.nn.relu(self.up(h))
        h = h + self.down(hidden, out_sharding=fixed["down"])
        return self.head(h)


def tiny_lm_loss(model: FlaxLM, tokens: jax.Array, labels: jax.Array) -> jax.Array:
    """Mean cross entropy; the ``loss`` fix uses one-hot targets."""
    logits = model(tokens)
    if "loss" not in model.fixes:
        loss = optax.softmax_cross_entropy_with_integer_labels
        return loss(logits, labels).mean()
    spec = jax.typeof(logits).sharding.spec  # the logits' sharding
    targets = jax.nn.one_hot(labels, logits.shape[-1], out_sharding=spec)
    return optax.softmax_cross_entropy(logits, targets).mean()


@shared
def train_step_loss(axis_type: AxisType, fixes: Sequence[str] = ()) -> float:
    """One AdamW step of :class:`FlaxLM`; the loss before it."""
    with jax.set_mesh(mesh_of(axis_type, (2, 2), ("data", "model"))):
        model = FlaxLM(nnx.Rngs(0), fixes)
        adamw = nnx.Optimizer(model, optax.adamw(1e-3), wrt=nnx.Param)
        tokens = jnp.arange(32).reshape(8, 4) % 64
        tokens = jax.device_put(tokens, P("data"))

        @jax.jit
        def step(model, adamw, tokens, labels):
            loss, grads = jax.value_and_grad(tiny_lm_loss)(model, tokens, labels)
            adamw.update(model, grads)
            return loss

        return float(step(model, adamw, tokens, (tokens + 1) % 64))


def model_check(name: str, fixes: Sequence[str]) -> Check:
    """A check, called ``name``, that takes :class:`FlaxLM` one training step with ``fixes``."""

    def check(axis_type: AxisType) -> None:
        train_step_loss(axis_type, fixes)

    check.__name__, check.__doc__ = name, f"FlaxLM's training step with fixes {list(fixes)}."
    return check


MODEL_CHECKS = {
    name: model_check(name, FIXES[:n])
    for n, name in enumerate(["model_as_written", *(f"model_plus_{fix}_fix" for fix in FIXES)])
}
"""FlaxLM as written for auto, then with each fix added to the ones before it."""


CAPABILITY_CHECKS: dict[str, Check] = {
    name: value
    for name, value in list(globals().items())
    if inspect.isfunction(value)
    and value.__module__ == __name__
    and not name.startswith("_")
    and list(inspect.signature(value).parameters) == ["axis_type"]
} | MODEL_CHECKS
"""Every check by the name the report, the tests and the version matrix use: each public function
here that takes only ``axis_type``, in the order defined, then :data:`MODEL_CHECKS`."""


ISOLATED = frozenset({"shard_map_closure"})
"""Checks :func:`report` runs in a fresh interpreter: jax-ml/jax#29162's form aborted it."""

TRACKER: dict[str, tuple[str, str, str]] = {
    check: (f"https://github.com/jax-ml/jax/{kind}/{number}", state, "2026-12-01")
    for kind, number, state, checks in [
        ("issues", 28542, "closed", ["index_column"]),
        ("issues", 28538, "closed", ["repeat"]),
        ("issues", 29195, "closed", ["map_batch_size"]),
        ("issues", 31799, "closed", ["shard_map_some_axes"]),
        ("issues", 29162, "open", ["shard_map_closure"]),
        ("pull", 30001, "closed", ["auto_axes_in_shard_map"]),
        ("issues", 29637, "closed", ["switch_mixed_operands"]),
        ("issues", 33029, "closed", ["auto_axes_scan_grad", "auto_axes_closure_scan_grad"]),
        ("issues", 29859, "closed", ["reshape_split_dim"]),
        ("issues", 39309, "closed", ["size_one_axis_concat"]),
        ("issues", 34811, "open", ["custom_partitioning_mesh", "custom_partitioning_runs"]),
        ("issues", 30095, "closed", ["random_out_sharding"]),
        ("issues", 28111, "open", ["scatter_add"]),
        ("issues", 33226, "open", ["auto_axes_keyword"]),
    ]
    for check in checks
}
"""Per check, the jax-ml/jax issue or pull request it is about: (address, state, date looked),
the state as the search index showed it that day. jax-ml/jax#33787 (scatter-add) was not in it."""


@shared
def report(names: Sequence[str] | None = None) -> dict[str, dict[str, str]]:
    """``{name: {"explicit": outcome, "auto": outcome}}`` for the named checks (default: all)."""
    return {
        name: {
            mode: isolated_outcome(name, axis_type)
            if name in ISOLATED
            else outcome(CAPABILITY_CHECKS[name], axis_type)
            for mode, axis_type in SHARD_MODES.items()
        }
        for name in names or CAPABILITY_CHECKS
    }


def short(result: str) -> str:
    """An outcome for a table cell: ``ok`` and what was read, or just the error's type.

    >>> short("ShardingTypeError: dot_general operation ..."), short("ok: float32[8@x,8]")
    ('ShardingTypeError', 'ok: float32[8@x,8]')
    """
    return result if result.startswith("ok") else result.partition(":")[0]


def main(argv: Sequence[str] | None = None) -> None:
    """Print every check's outcome in both modes."""
    parser = Parser(__doc__)
    parser.add_argument(
        "--check",
        action="append",
        choices=sorted(CAPABILITY_CHECKS),
        metavar="NAME",
        help="run only NAME",
    )
    args = parser.parse_args(argv)
    with reported(args.debug):
        setup_devices(MESH_DEVICES)
    print_report(report(args.check), args.json)
