"""Without JAX, ``import find_barriers.jax`` says which extra to install."""

import sys

import pytest


def test_importing_the_jax_entry_without_jax_names_the_extra(monkeypatch):
    monkeypatch.setitem(sys.modules, "jax", None)  # as if JAX were not installed
    monkeypatch.delitem(sys.modules, "find_barriers.jax", raising=False)
    with pytest.raises(ImportError, match=r'pip install "find-barriers\[jax\]"'):
        import find_barriers.jax  # noqa: F401, PLC0415 - once JAX is hidden
