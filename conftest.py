"""Simulated devices for every test and doctest, set up before JAX's backend starts.

The tests ask for 8 CPU devices, unless the environment already chose a count
(``JAX_NUM_CPU_DEVICES``, or ``XLA_FLAGS=--xla_force_host_platform_device_count``):
that count is kept, and a test marked ``needs_devices(n)`` skips, saying why, when
this process has fewer than ``n``. The setting is then removed from the environment
of the processes the tests start.
"""

import os
import re
import subprocess
from pathlib import Path

import jax
import pytest

from snippets.cache.inputs import Inputs
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


ROOT = Path(__file__).resolve().parent
CHANGED = pytest.StashKey[set[Path]]()


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption(
        "--changed-since",
        metavar="REF",
        help="collect only the test and doctest modules that read a file changed since git REF "
        "(committed, staged or not, or new): what they import, transitively, the files they name",
    )


def pytest_configure(config: pytest.Config) -> None:
    """Register the ``needs_devices`` marker; with ``--changed-since``, find what changed."""
    config.addinivalue_line("markers", "needs_devices(n): skip unless this process has n devices")
    if (ref := config.getoption("changed_since")) is not None:
        config.stash[CHANGED] = changed_since(ref)


def changed_since(ref: str) -> set[Path]:
    """The files changed since ``ref``'s common ancestor with ``HEAD``, committed or not, and the
    files git does not know yet."""

    def git(*args: str) -> list[str]:
        result = subprocess.run(
            ["git", *args], cwd=ROOT, capture_output=True, text=True, check=True
        )
        return result.stdout.split()

    (base,) = git("merge-base", ref, "HEAD")
    names = git("diff", "--name-only", base) + git("ls-files", "--others", "--exclude-standard")
    return {(ROOT / name).resolve() for name in names}


def pytest_ignore_collect(collection_path: Path, config: pytest.Config) -> bool | None:
    """With ``--changed-since``, leave out a module none of whose inputs changed (the conftest
    files above it count)."""
    if CHANGED not in config.stash or collection_path.suffix != ".py":
        return None
    relative = collection_path.resolve().relative_to(ROOT)
    name = ".".join(relative.with_suffix("").parts).removesuffix(".__init__")
    conftests = {folder / "conftest.py" for folder in collection_path.resolve().parents}
    reads = Inputs(ROOT).add_module(name).files | {collection_path.resolve()} | conftests
    return None if reads & config.stash[CHANGED] else True


def pytest_runtest_setup(item: pytest.Item) -> None:
    """Skip a test marked ``needs_devices(n)`` when this process has fewer than ``n`` devices."""
    marker = item.get_closest_marker("needs_devices")
    if marker is not None and len(jax.devices()) < marker.args[0]:
        pytest.skip(
            f"needs {marker.args[0]} devices; this process has {len(jax.devices())} "
            f"({ENVIRONMENT_SETTING or 'the default of conftest.py'})"
        )


@pytest.fixture(scope="session")
def device_count() -> int:
    """How many devices this test process has: 8, or what the environment chose."""
    return len(jax.devices())
