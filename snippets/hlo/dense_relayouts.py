"""The dense layers' weight gradients on TPU: a decoder layer's attention projections and MLP, not
scanned, with an Adam-style update, compiled for a v5p slice in each shard mode. Which kernels
explicit mode copies in and out, over what auto copies, is read from the compiled programs and
set beside find-barriers' estimate from the module XLA:CPU is handed (§4.7, §4.8 of MaxText's
design doc)."""

from __future__ import annotations

import collections

import jax
import jax.numpy as jnp
from jax.sharding import NamedSharding
from jax.sharding import PartitionSpec as P

from find_barriers import array_shapes, find_sites, read_hlo
from snippets.devices import make_mesh
from snippets.hlo.compiled import parameter_copies
from snippets.lowering import JittedStep

KERNELS = {
    "query": ("emb heads head_dim", P("fsdp", None, None)),
    "out": ("heads head_dim emb", P(None, None, "fsdp")),
    "mlp_in": ("emb mlp", P("fsdp", None)),
    "mlp_out": ("mlp emb", P(None, "fsdp")),
}
"""Each kernel: its dimensions, and its FSDP sharding on ``emb`` (as MaxText's rules shard them)."""
SIZES = {"emb": 512, "heads": 8, "head_dim": 128, "mlp": 1024}
"""The design doc's shrink (§9): emb 512, 8 heads of 128, MLP 1024."""


def _gather(kernel: jax.Array, mode: str) -> jax.Array:
    """FSDP's all-gather before use, as MaxText writes it in each mode."""
    if mode == "explicit":
        return jax.sharding.reshard(kernel, P())
    return jax.lax.with_sharding_constraint(kernel, P())


def _loss(params: dict, x: jax.Array, mode: str) -> jax.Array:
    """One pre-norm-free decoder layer: a query projection, its output projection, an MLP."""
    w = {name: _gather(value.astype(jnp.bfloat16), mode) for name, value in params.items()}
    q = jnp.einsum("bse,ehd->bshd", x, w["query"])
    x = x + jnp.einsum("bshd,hde->bse", jnp.tanh(q), w["out"])
    x = x + jnp.tanh(x @ w["mlp_in"]) @ w["mlp_out"]
    return jnp.mean(jnp.square(x.astype(jnp.float32)))


def dense_step(mode: str, **sizes: int) -> JittedStep:
    """The layer's training step on four devices in ``mode``, its sizes :data:`SIZES` but for
    ``sizes``: gradients, then Adam's moments and update, the state donated."""
    mesh = make_mesh((4,), ("fsdp",), mode)

    def step(params, mu, nu, x):
        grads = jax.grad(_loss)(params, x, mode)
        mu = jax.tree.map(lambda m, g: 0.9 * m + 0.1 * g, mu, grads)
        nu = jax.tree.map(lambda n, g: 0.99 * n + 0.01 * g * g, nu, grads)
        update = jax.tree.map(lambda m, n: m / (jnp.sqrt(n) + 1e-8), mu, nu)
        return jax.tree.map(lambda p, u: p - 1e-3 * u, params, update), mu, nu

    def zeros(name):
        shape = kernel_shape(name, **sizes)
        return jax.device_put(jnp.zeros(shape, jnp.float32), NamedSharding(mesh, KERNELS[name][1]))

    state = [{name: zeros(name) for name in KERNELS} for _ in range(3)]
    emb = (SIZES | sizes)["emb"]
    x = jax.device_put(jnp.zeros((8, 256, emb), jnp.bfloat16), NamedSharding(mesh, P("fsdp")))
    return JittedStep(mesh, jax.jit(step, donate_argnums=(0, 1, 2)), (*state, x))


def kernel_shape(name: str, **sizes: int) -> tuple[int, ...]:
    """A kernel's shape at :data:`SIZES` but for ``sizes``."""
    sizes = SIZES | sizes
    return tuple(sizes[dim] for dim in KERNELS[name][0].split())


def copies_by_kernel(compiled: str, **sizes: int) -> dict[str, int]:
    """How many of the entry's copies are of each kernel's shard (or of its optimizer states,
    which have its shape): the kernels' shards must differ in shape, as at :data:`SIZES`."""
    shards = {}
    for name, (_, spec) in KERNELS.items():
        shape = kernel_shape(name, **sizes)
        shards[tuple(n // 4 if axis else n for n, axis in zip(shape, spec, strict=True))] = name
    found = collections.Counter(
        shards.get(array_shapes(shape)[0][1]) for shape in parameter_copies(compiled)
    )
    return {name: found[name] for name in KERNELS}


def estimated_copies(step: JittedStep) -> dict[str, int]:
    """find-barriers' estimate of each kernel's relayout copies, from the module ``step`` (in
    explicit mode) hands XLA:CPU."""
    module = read_hlo(step.lower().as_text(dialect="hlo", debug_info=True))
    found = dict.fromkeys(KERNELS, 0)
    for site in find_sites(module):
        if site.cost is not None and site.parameter and site.blocked:
            found[site.parameter.split("'")[1]] += site.cost.relayout_copies
    return found
