"""The register of capability checks: :func:`check` adds one, by its name, to :data:`CHECKS`."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path

from jax.sharding import AxisType, Mesh

from snippets.devices import MESH_DEVICES, make_mesh

Check = Callable[[AxisType], str | None]
"""A check runs plain JAX under one axis type; it returns what it read (or ``None``), or raises."""

CHECKS: dict[str, Check] = {}
"""Every check by the name the report, the tests and the version matrix use, in the order the
topic modules define them (:mod:`snippets.measure.mode_checks` imports them in turn)."""
ISOLATED: set[str] = set()
"""The checks the report runs in a fresh interpreter: jax-ml/jax#29162's form aborted Python."""
TRACKER = Path(__file__).with_name("tracker.toml")
"""Data the guide and the tests read: the jax-ml/jax issue each check is about, and its state.

:meta hide-value:
"""


def check[C: Check](function: C) -> C:
    """Register ``function`` as the capability check named as it is."""
    if function.__name__ in CHECKS:
        raise ValueError(f"two capability checks are named {function.__name__!r}")
    CHECKS[function.__name__] = function
    return function


def isolated_check[C: Check](function: C) -> C:
    """Register ``function`` as a check, to run in a fresh interpreter: its program may abort."""
    ISOLATED.add(function.__name__)
    return check(function)


def mesh_of(
    axis_type: AxisType, shape: Sequence[int] = (MESH_DEVICES,), names: Sequence[str] = ("x",)
) -> Mesh:
    """:func:`snippets.devices.make_mesh` with every axis of type ``axis_type``; one axis by default."""
    return make_mesh(shape, names, axis_type.name.lower())
