"""A step compiled for a TPU on a machine without one: libtpu's compiler, given a topology by
name (``v5p:2x2x1``, four chips), turns the program JAX lowers into the one a TPU would run.
Nothing runs; the compiled program's text is what the readers count. libtpu installs from PyPI
with the ``tpu`` extra (Linux x86_64); JAX must use its CPU backend here (``JAX_PLATFORMS=cpu``),
or it looks for TPU chips that are not there.
"""

from __future__ import annotations

import contextlib
from importlib.metadata import PackageNotFoundError, version

import jax
from jax.sharding import NamedSharding

from snippets.devices import make_mesh
from snippets.lowering import JittedStep
from snippets.support.cli import SetupError

TOPOLOGY = "v5p:2x2x1"
"""Four v5p chips in a 2x2x1 block: the slice MaxText calls ``v5p-8``, the design doc's."""


def libtpu_version() -> str | None:
    """The installed libtpu's version; None where it is not installed."""
    with contextlib.suppress(PackageNotFoundError):
        return version("libtpu")
    return None


def tpu_devices(topology: str = TOPOLOGY) -> list:
    """The devices of a TPU ``topology``, to compile for (nothing can run on them)."""
    if libtpu_version() is None:
        raise SetupError(
            "compiling for a TPU needs libtpu: install the project's `tpu` extra "
            "(`uv sync --extra tpu`; Linux x86_64 only)"
        )
    from jax.experimental import topologies  # noqa: PLC0415 - it loads libtpu

    return list(topologies.get_topology_desc(topology_name=topology, platform="tpu").devices)


def compile_for_tpu(step: JittedStep, topology: str = TOPOLOGY) -> str:
    """``step`` compiled for ``topology``: its mesh remade of the topology's devices (its shape,
    names and axis types), its arguments as shapes with their shardings there; the compiled
    program's text."""
    devices = tpu_devices(topology)
    mesh = step.mesh
    explicit = mesh.are_all_axes_explicit
    tpu_mesh = make_mesh(
        tuple(mesh.axis_sizes), mesh.axis_names, "explicit" if explicit else "auto", devices
    )

    def abstract(value):
        if not isinstance(value, jax.Array):
            return value
        spec = value.sharding.spec  # type: ignore[attr-defined]  # build_step: NamedShardings
        sharding = NamedSharding(tpu_mesh, spec)
        return jax.ShapeDtypeStruct(value.shape, value.dtype, sharding=sharding)

    with jax.set_mesh(tpu_mesh):
        compiled = step.function.lower(*jax.tree.map(abstract, step.args)).compile()
    return compiled.as_text()
