"""The one place that decides which devices the guides run on: real chips or simulated CPUs."""

from __future__ import annotations

import contextlib
import math
import os
import re
from collections.abc import Sequence
from typing import Literal

import jax
from jax.sharding import AxisType, Mesh
from pydantic import validate_call

from snippets.support.cli import SetupError, available_memory
from snippets.support.config import PositiveInt

ShardMode = Literal["explicit", "auto"]
SHARD_MODES: dict[ShardMode, AxisType] = {"explicit": AxisType.Explicit, "auto": AxisType.Auto}
"""The two shard modes, as a config writes them, and the mesh axis type each one means."""

MESH_DEVICES = 4
"""How many devices the guides' meshes span: TPU chips, or simulated CPU devices."""

SIMULATED_DEVICE_BYTES = 2**19
"""Memory to allow per simulated CPU device: about 0.3 MB measured (JAX 0.12), with a margin."""


class TooFewDevicesError(SetupError):
    """JAX started with fewer devices than a guide needs, and it is too late to add more."""


@validate_call
def setup_devices(n: PositiveInt = MESH_DEVICES) -> list[jax.Device]:
    """``n`` accelerator chips, or simulated CPUs if too few; call it before any other JAX code."""
    most = available_memory() // SIMULATED_DEVICE_BYTES
    if n > most:
        raise ValueError(
            f"{n} simulated CPU devices need more memory than is available; ask for at most {most}."
        )
    if cpu_device_setting() is None:
        # JAX refuses a new count once its backend has started; pick_devices then explains.
        with contextlib.suppress(RuntimeError):
            jax.config.update("jax_num_cpu_devices", n)
    return pick_devices(n)


def cpu_device_setting() -> str | None:
    """The environment setting that fixed this process's CPU device count, as ``NAME=VALUE``."""
    if count := os.environ.get("JAX_NUM_CPU_DEVICES", "").strip():
        return f"JAX_NUM_CPU_DEVICES={count}"
    flags = re.findall(r"--xla_force_host_platform_device_count=\d+", os.getenv("XLA_FLAGS", ""))
    return f"XLA_FLAGS={flags[-1]}" if flags else None


@validate_call
def pick_devices(n: PositiveInt) -> list[jax.Device]:
    """The first ``n`` devices of the default backend, or of the CPU backend if only it has them."""
    for devices in (jax.devices(), jax.devices("cpu")):
        if len(devices) >= n:
            return list(devices[:n])
    found, setting = jax.devices(), cpu_device_setting()
    if setting is None:
        fix = (
            "the count cannot change in a running process: restart Python (or the kernel) and "
            f"call snippets.devices.setup_devices({n}) before any other JAX operation, or start "
            f"it with JAX_NUM_CPU_DEVICES={n}"
        )
    else:
        name = setting.rsplit("=", 1)[0]
        fix = f"{setting} is set in the environment: start Python with {name}={n} or unset it"
    raise TooFewDevicesError(
        f"{n} devices are needed but JAX's backend started with {len(found)} "
        f"{found[0].platform} device(s); {fix}."
    )


def make_mesh(
    shape: Sequence[int],
    axis_names: Sequence[str],
    shard_mode: str,
    devices: Sequence[jax.Device] | None = None,
) -> Mesh:
    """A mesh whose axes are all ``Explicit`` or all ``Auto``, as ``shard_mode`` says.

    >>> make_mesh((2,), ("data",), "explicit").axis_types
    (Explicit,)
    """
    if shard_mode not in SHARD_MODES:
        raise ValueError(f"Unknown shard_mode {shard_mode!r}; expected {sorted(SHARD_MODES)}.")
    shape, needed = tuple(shape), math.prod(shape)
    devices = pick_devices(needed) if devices is None else list(devices)
    if len(devices) != needed:
        raise ValueError(
            f"Mesh shape {shape} needs {needed} devices but {len(devices)} were given; "
            "pass a shape whose product is the device count."
        )
    axis_types = (SHARD_MODES[shard_mode],) * len(shape)
    return jax.make_mesh(shape, tuple(axis_names), axis_types=axis_types, devices=devices)


def describe_devices() -> dict[str, object]:
    """The backend and devices JAX is using, as plain data."""
    devices = jax.devices()
    return {
        "backend": jax.default_backend(),
        "device_kind": devices[0].device_kind,
        "devices": len(devices),
        "simulated": devices[0].platform == "cpu",
    }
