"""find_barriers.jax's tests, on each JAX release the extra supports (``nox -s checker_jax``)."""
