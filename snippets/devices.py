"""The one place that decides which devices the guides run on.

On a TPU (or another accelerator) the real chips are used. On a laptop or CI
machine JAX is asked to simulate ``n`` CPU devices, which only works before its
backend starts; afterwards :func:`setup_devices` says so instead of silently
running on fewer devices.

Run ``python -m snippets.devices [--devices N] [--json]`` for a report.
"""

from __future__ import annotations

import argparse
import json
import math
from collections.abc import Sequence

import jax
from jax._src import xla_bridge
from jax.sharding import AxisType, Mesh

SHARD_MODES: dict[str, AxisType] = {"explicit": AxisType.Explicit, "auto": AxisType.Auto}
"""The two shard modes, as a config writes them, and the mesh axis type each one means."""


class TooFewDevicesError(RuntimeError):
    """JAX started with fewer devices than a guide needs, and it is too late to add more."""


def setup_devices(n: int = 4) -> list[jax.Device]:
    """Return ``n`` devices: accelerator chips when there are enough, else simulated CPUs.

    Call it before any other JAX operation: the CPU device count is fixed when
    the backend starts.
    """
    if n < 1:
        raise ValueError(f"setup_devices needs at least one device, got n={n}.")
    if not xla_bridge.backends_are_initialized():
        jax.config.update("jax_num_cpu_devices", max(n, jax.config.jax_num_cpu_devices))
    return pick_devices(n)


def pick_devices(n: int) -> list[jax.Device]:
    """The first ``n`` devices of the default backend, or of the CPU backend if it alone has ``n``."""
    for devices in (jax.devices(), jax.devices("cpu")):
        if len(devices) >= n:
            return list(devices[:n])
    found = jax.devices()
    raise TooFewDevicesError(
        f"{n} devices are needed but JAX's backend already started with {len(found)} "
        f"{found[0].platform} device(s); the simulated CPU device count cannot change now. "
        f"Call snippets.devices.setup_devices({n}) before any other JAX operation (or set "
        f"XLA_FLAGS=--xla_force_host_platform_device_count={n} before starting Python), "
        "then restart the kernel or interpreter."
    )


def make_mesh(
    shape: Sequence[int],
    axis_names: Sequence[str],
    shard_mode: str,
    devices: Sequence[jax.Device] | None = None,
) -> Mesh:
    """A mesh whose axes are all ``Explicit`` or all ``Auto``, as ``shard_mode`` says.

    >>> mesh = make_mesh((2,), ("data",), "explicit")
    >>> mesh.axis_types
    (Explicit,)
    """
    if shard_mode not in SHARD_MODES:
        raise ValueError(
            f"Unknown shard_mode {shard_mode!r}; expected one of {sorted(SHARD_MODES)}."
        )
    shape, axis_names = tuple(shape), tuple(axis_names)
    if len(shape) != len(axis_names) or any(size < 1 for size in shape):
        raise ValueError(
            f"Mesh shape {shape} and axis names {axis_names} must have the same length, "
            "with every size at least 1."
        )
    needed = math.prod(shape)
    devices = pick_devices(needed) if devices is None else list(devices)
    if len(devices) != needed:
        raise ValueError(
            f"Mesh shape {shape} needs {needed} devices but {len(devices)} were given; "
            "pass a shape whose product is the device count."
        )
    axis_types = (SHARD_MODES[shard_mode],) * len(shape)
    return jax.make_mesh(shape, axis_names, axis_types=axis_types, devices=devices)


def describe_devices() -> dict[str, object]:
    """The backend and devices JAX is using, as plain data."""
    devices = jax.devices()
    return {
        "backend": jax.default_backend(),
        "device_kind": devices[0].device_kind,
        "devices": len(devices),
        "simulated": devices[0].platform == "cpu",
    }


def main(argv: Sequence[str] | None = None) -> None:
    """Print which devices the guides would run on."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--devices", type=int, default=4, help="devices to set up")
    parser.add_argument("--json", action="store_true", help="print JSON instead of text")
    args = parser.parse_args(argv)
    setup_devices(args.devices)
    report = describe_devices()
    if args.json:
        print(json.dumps(report, indent=2))
    else:
        kind = "simulated CPU" if report["simulated"] else report["device_kind"]
        print(f"{report['devices']} {kind} device(s) on the {report['backend']} backend")


if __name__ == "__main__":
    main()
