"""Device setup and the mesh helper, including each way to get them wrong."""

import os
import subprocess
import sys
from types import SimpleNamespace

import jax
import pytest
from jax.sharding import AxisType
from pydantic import ValidationError

from snippets.devices import (
    TooFewDevicesError,
    describe_devices,
    make_mesh,
    pick_devices,
    setup_devices,
)

COUNT_FLAG = "--xla_force_host_platform_device_count"


def run_python(code: str, **env: str) -> subprocess.CompletedProcess:
    """Run ``code`` in a new interpreter, where JAX's backend has not started yet.

    tests/plugins/simulated_devices.py has removed this process's device count from the environment, so
    ``env`` alone decides the new interpreter's.
    """
    return subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        check=False,
        timeout=120,
        env=os.environ | env,
    )


def test_simulates_the_requested_count_and_then_says_it_is_fixed():
    result = run_python(
        "from snippets.devices import setup_devices; import jax\n"
        "devices = setup_devices(3); print(len(devices), len(jax.devices()), flush=True)\n"
        "setup_devices(8)"
    )
    assert result.stdout.split() == ["3", "3"]
    assert "TooFewDevicesError: 8 devices are needed" in result.stderr
    assert "started with 3 cpu device(s)" in result.stderr
    assert "restart Python (or the kernel) and call snippets.devices.setup_devices(8)" in (
        result.stderr
    )


@pytest.mark.parametrize(
    ("name", "value", "setting"),
    [
        ("XLA_FLAGS", f"{COUNT_FLAG}=16", f"XLA_FLAGS={COUNT_FLAG}=16"),
        ("JAX_NUM_CPU_DEVICES", "16", "JAX_NUM_CPU_DEVICES=16"),
    ],
)
def test_a_count_set_in_the_environment_is_kept_and_named(name, value, setting):
    result = run_python(
        "from snippets.devices import setup_devices; import jax\n"
        "print(len(setup_devices(4)), len(setup_devices(8)), len(jax.devices()), flush=True)\n"
        "setup_devices(32)",
        **{name: value},
    )
    assert result.stdout.split() == ["4", "8", "16"]
    assert "32 devices are needed but JAX's backend started with 16 cpu device(s)" in (
        result.stderr
    )
    assert f"{setting} is set in the environment: start Python with {setting[:-2]}32" in (
        result.stderr
    )


def test_asking_for_more_than_exist_in_this_process_says_how_to_fix_it(device_count):
    n = device_count + 1
    with pytest.raises(TooFewDevicesError, match=f"backend started with {device_count} ") as error:
        setup_devices(n)
    assert (
        f"restart Python (or the kernel) and call snippets.devices.setup_devices({n}) before "
        "any other JAX operation" in str(error.value)
    )


def test_setup_returns_exactly_n_devices(device_count):
    assert len(setup_devices(2)) == 2
    assert pick_devices(device_count) == jax.devices()[:device_count]


@pytest.mark.parametrize(
    ("n", "message"),
    [
        (0, "greater than or equal to 1"),
        (-2, "greater than or equal to 1"),
        (2.0, "valid integer"),
        (True, "valid integer"),
        ("4", "valid integer"),
    ],
)
def test_a_device_count_must_be_a_positive_whole_number(n, message):
    for function in (setup_devices, pick_devices):
        with pytest.raises(ValidationError, match=f"{function.__name__}(?s:.*){message}"):
            function(n)


def test_a_count_beyond_memory_is_refused_before_anything_is_allocated():
    with pytest.raises(ValueError, match=r"more memory than is available; ask for at most \d+\."):
        setup_devices(10**9)


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


def test_mesh_larger_than_the_device_count_is_rejected(device_count):
    with pytest.raises(TooFewDevicesError, match=f"{2 * device_count} devices are needed"):
        make_mesh((2, device_count), ("data", "model"), "explicit")


def test_mesh_names_must_match_the_shape():
    with pytest.raises(ValueError, match="axis_names"):
        make_mesh((2, 2), ("data",), "auto")


def test_processes_the_tests_start_choose_their_own_count():
    assert "JAX_NUM_CPU_DEVICES" not in os.environ
    assert COUNT_FLAG not in os.environ.get("XLA_FLAGS", "")


def test_simulated_cpus_are_described_as_simulated():
    report = describe_devices()
    assert report == {
        "backend": "cpu",
        "device_kind": jax.devices()[0].device_kind,
        "devices": len(jax.devices()),
        "simulated": True,
    }


def test_chips_are_described_as_not_simulated(monkeypatch):
    chips = [SimpleNamespace(platform="tpu", device_kind="TPU v5p")] * 4
    monkeypatch.setattr(jax, "devices", lambda: chips)
    monkeypatch.setattr(jax, "default_backend", lambda: "tpu")
    assert describe_devices() == {
        "backend": "tpu",
        "device_kind": "TPU v5p",
        "devices": 4,
        "simulated": False,
    }
