"""The lesson's exchange, ``C = A @ B`` split over the contraction: with ``shard_map`` and a
collective, and in explicit mode, where ``reshard`` or ``out_sharding`` finishes unreduced sums.
"""

from __future__ import annotations

from collections.abc import Callable

import jax
import jax.numpy as jnp
import numpy as np
from jax import shard_map
from jax.sharding import Mesh, NamedSharding
from jax.sharding import PartitionSpec as P

from snippets.devices import make_mesh

SEED_A = np.array([[1, 2], [3, 4]], dtype=np.float32)
SEED_B = np.array([[5, 6], [7, 8]], dtype=np.float32)
AXIS = "k"
"""The mesh axis the contraction is split over."""
BLOCKS = (P(None, AXIS), P(AXIS, None))
"""What rank r holds: column block r of A and row block r of B."""


def contraction_mesh(ranks: int) -> Mesh:
    """A one-axis mesh of ``ranks`` devices for the contracted dimension."""
    return make_mesh((ranks,), (AXIS,), "explicit")


def split_contraction(a: np.ndarray, b: np.ndarray, mesh: Mesh) -> tuple[jax.Array, jax.Array]:
    """Place column block r of ``a`` and row block r of ``b`` on rank r."""
    ranks = mesh.shape[AXIS]
    matrices = a.ndim == b.ndim == 2 and a.shape[1] == b.shape[0]
    if not matrices or a.shape[0] % ranks or a.shape[1] % ranks:
        raise ValueError(
            f"A {a.shape} @ B {b.shape} on {ranks} ranks: A and B must be matrices whose "
            f"contracted sizes match, with that size and A's rows divisible by {ranks}."
        )
    return jax.device_put((a, b), tuple(NamedSharding(mesh, spec) for spec in BLOCKS))


def per_rank(array: jax.Array, mesh: Mesh) -> list[np.ndarray]:
    """What each rank of ``mesh`` holds of ``array``, in rank order."""
    by_device = {shard.device: np.asarray(shard.data) for shard in array.addressable_shards}
    return [by_device[device] for device in mesh.devices.flat]


def _on_ranks(body: Callable, mesh: Mesh, out_specs: P) -> jax.stages.Wrapped:
    """``body(a_block, b_block)`` run on every rank by ``shard_map``, jitted."""
    return jax.jit(shard_map(body, mesh=mesh, in_specs=BLOCKS, out_specs=out_specs))


def local_products(mesh: Mesh) -> jax.stages.Wrapped:
    """Each rank's unfinished ``C_r = A[:, K_r] @ B[K_r, :]``, stacked along a leading rank axis."""
    return _on_ranks(lambda a, b: (a @ b)[None], mesh, P(AXIS))


def concatenate_partials(mesh: Mesh) -> jax.stages.Wrapped:
    """The wrong way: declare the unfinished products row-sharded, which concatenates them."""
    return _on_ranks(lambda a, b: a @ b, mesh, P(AXIS, None))


def _finished_rows(a: jax.Array, b: jax.Array) -> jax.Array:
    """On one rank: the local product, summed across ranks, keeping this rank's row block."""
    return jax.lax.psum_scatter(a @ b, AXIS, scatter_dimension=0, tiled=True)


def reduce_scatter(mesh: Mesh) -> jax.stages.Wrapped:
    """Finish the sums and leave rank r with row block r of C."""
    return _on_ranks(_finished_rows, mesh, P(AXIS, None))


def all_reduce(mesh: Mesh) -> jax.stages.Wrapped:
    """Finish the sums and leave every rank with the whole of C."""
    return _on_ranks(lambda a, b: jax.lax.psum(a @ b, AXIS), mesh, P())


def reduce_scatter_then_all_gather(mesh: Mesh) -> jax.stages.Wrapped:
    """Reduce-scatter, then all-gather the finished rows: every rank holds C. ``to="invarying"``
    types the gathered value as the same on every rank, as ``out_specs=P()`` requires and
    ``shard_map`` checks (``check_vma``, on by default)."""

    def gathered_rows(a: jax.Array, b: jax.Array) -> jax.Array:
        return jax.lax.all_gather(_finished_rows(a, b), AXIS, tiled=True, to="invarying")

    return _on_ranks(gathered_rows, mesh, P())


def partial_sums(a: jax.Array, b: jax.Array) -> jax.Array:
    """The local products as one *unreduced* array: JAX's type for the lesson's C_0 and C_1."""
    return jnp.dot(a, b, out_sharding=P(None, None, unreduced={AXIS}))


def finish_by_reshard(a: jax.Array, b: jax.Array) -> jax.Array:
    """Finish the unreduced partial sums into row ownership with ``reshard``."""
    return jax.sharding.reshard(partial_sums(a, b), P(AXIS, None))


def rows_in_one_dot(a: jax.Array, b: jax.Array) -> jax.Array:
    """Ask the dot itself for finished, row-owned output: both steps at once."""
    return jnp.dot(a, b, out_sharding=P(AXIS, None))


EXPLICIT_FORMS = {
    "dot_unreduced": partial_sums,
    "dot_unreduced_then_reshard": finish_by_reshard,
    "dot_out_sharding_rows": rows_in_one_dot,
}
"""The sharding-in-types forms of the exchange, each jitted under the explicit mesh."""
