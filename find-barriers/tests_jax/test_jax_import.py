"""find_barriers.jax imports where JAX is installed; ``import find_barriers`` loads none of JAX."""

import subprocess
import sys

import find_barriers.jax


def test_the_package_imports_no_jax():
    code = "import sys, find_barriers; print(sorted(m for m in sys.modules if m.startswith('jax')))"
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert done.stdout == "[]\n"


def test_the_jax_entry_offers_lowered_sites_and_output_names():
    assert find_barriers.jax.__all__ == ["lowered_sites", "output_names"]
