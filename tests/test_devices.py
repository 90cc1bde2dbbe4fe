"""Device setup and the mesh helper, including each way to get them wrong."""

import subprocess
import sys

import jax
import pytest
from jax.sharding import AxisType

from conftest import TEST_DEVICES
from snippets.devices import TooFewDevicesError, make_mesh, pick_devices, setup_devices


def run_python(code: str) -> subprocess.CompletedProcess:
    """Run ``code`` in a new interpreter, where JAX's backend has not started yet."""
    return subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=False, timeout=120
    )


def test_simulates_the_requested_count_before_the_backend_starts():
    result = run_python(
        "from snippets.devices import setup_devices; import jax\n"
        "devices = setup_devices(3); print(len(devices), len(jax.devices()))"
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.split() == ["3", "3"]


def test_too_few_devices_after_the_backend_started_is_a_clear_error():
    result = run_python(
        "import jax; jax.devices()\nfrom snippets.devices import setup_devices; setup_devices(4)"
    )
    assert result.returncode != 0
    assert "TooFewDevicesError" in result.stderr
    assert "setup_devices(4) before any other JAX operation" in result.stderr


def test_asking_for_more_than_exist_in_this_process_raises():
    with pytest.raises(TooFewDevicesError, match=f"already started with {TEST_DEVICES}"):
        setup_devices(TEST_DEVICES + 1)


def test_setup_returns_exactly_n_devices():
    assert len(setup_devices(2)) == 2
    assert pick_devices(TEST_DEVICES) == jax.devices()[:TEST_DEVICES]


@pytest.mark.parametrize(
    ("mode", "axis_type"), [("explicit", AxisType.Explicit), ("auto", AxisType.Auto)]
)
def test_mesh_axis_types_follow_the_shard_mode(mode, axis_type):
    mesh = make_mesh((2, 2), ("data", "fsdp"), mode)
    assert mesh.axis_types == (axis_type, axis_type)
    assert mesh.shape == {"data": 2, "fsdp": 2}


def test_unknown_shard_mode_is_rejected():
    with pytest.raises(ValueError, match=r"Unknown shard_mode 'manual'.*\['auto', 'explicit'\]"):
        make_mesh((4,), ("data",), "manual")


def test_mesh_shape_must_match_the_given_devices():
    with pytest.raises(ValueError, match=r"needs 4 devices but 2 were given"):
        make_mesh((4,), ("data",), "auto", devices=jax.devices()[:2])


def test_mesh_larger_than_the_device_count_is_rejected():
    with pytest.raises(TooFewDevicesError, match=f"{2 * TEST_DEVICES} devices are needed"):
        make_mesh((2, TEST_DEVICES), ("data", "model"), "explicit")


def test_mesh_names_must_match_the_shape():
    with pytest.raises(ValueError, match="same length"):
        make_mesh((2, 2), ("data",), "auto")
