"""The modules that import JAX (the ``jax`` extra) are doctested only where JAX is installed: the
plain run (``tests/`` and ``src/``) needs no JAX; ``tests_jax/`` tests those modules
(``nox -s checker_jax``)."""

import importlib.util

JAX_MODULES = ["jax.py", "testing.py", "_stablehlo.py", "_mlir_operations.py"]

collect_ignore = (
    [] if importlib.util.find_spec("jax") else [f"src/find_barriers/{m}" for m in JAX_MODULES]
)
