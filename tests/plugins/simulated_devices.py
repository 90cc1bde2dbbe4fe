"""Simulated devices for every test and doctest, set up before JAX's backend starts.

The tests ask for 8 CPU devices, unless the environment already chose a count
(``JAX_NUM_CPU_DEVICES``, or ``XLA_FLAGS=--xla_force_host_platform_device_count``):
that count is kept, and a test marked ``needs_devices(n)`` skips, saying why, when
this process has fewer than ``n``. The setting is then removed from the environment
of the processes the tests start.
"""

import os
import re

import jax
import pytest

from snippets.devices import cpu_device_setting, setup_devices

ENVIRONMENT_SETTING = cpu_device_setting()
if ENVIRONMENT_SETTING is None:
    setup_devices(8)
jax.devices()  # the count is now fixed for this process
# Subprocesses (guide kernels of the site build, ``python -m`` runs) choose their own
# counts, as on a fresh machine: a guide asks for the devices its story needs.
os.environ.pop("JAX_NUM_CPU_DEVICES", None)
os.environ["XLA_FLAGS"] = re.sub(
    r"--xla_force_host_platform_device_count=\d+", "", os.environ.get("XLA_FLAGS", "")
)


def pytest_configure(config: pytest.Config) -> None:
    """Register the ``needs_devices`` marker."""
    config.addinivalue_line("markers", "needs_devices(n): skip unless this process has n devices")


def pytest_runtest_setup(item: pytest.Item) -> None:
    """Skip a test marked ``needs_devices(n)`` when this process has fewer than ``n`` devices."""
    marker = item.get_closest_marker("needs_devices")
    if marker is not None and len(jax.devices()) < marker.args[0]:
        pytest.skip(
            f"needs {marker.args[0]} devices; this process has {len(jax.devices())} "
            f"({ENVIRONMENT_SETTING or 'the default of tests/plugins/simulated_devices.py'})"
        )


@pytest.fixture(scope="session")
def device_count() -> int:
    """How many devices this test process has: 8, or what the environment chose."""
    return len(jax.devices())
