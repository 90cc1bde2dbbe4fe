"""find_barriers.jax's tests run JAX on its CPU backend, with the devices their meshes need."""

import jax

from tests_jax.jax_steps import DEVICES

jax.config.update("jax_platforms", "cpu")
jax.config.update("jax_num_cpu_devices", DEVICES)
