"""A small real training step around the LM head, jitted on a mesh (``python -m snippets
step_lowering`` lowers and compiles it: :mod:`snippets.measure.step_lowering`)."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any, Literal, Self, get_args

import jax
import jax.numpy as jnp
import optax
from flax import nnx
from jax.sharding import Mesh, NamedSharding
from jax.sharding import PartitionSpec as P
from pydantic import model_validator

from snippets.devices import MESH_DEVICES, SHARD_MODES, ShardMode, make_mesh
from snippets.lm_head import LMHeadConfig, build_output_head, head_axis_rules
from snippets.support.config import Config, PositiveInt
from snippets.vocab_parallel import pin, vocab_parallel_cross_entropy, vocab_parallel_logits

Variant = Literal["EV", "VE", "custom-vjp", "auto-axes", "vocab-parallel"]
VARIANTS: dict[Variant, dict[str, Any]] = {  # LMHeadConfig options
    "EV": {},
    "VE": {"lm_head_kernel_transposed": True},
    "custom-vjp": {"lm_head_weight_grad_in_kernel_order": "custom_vjp"},
    "auto-axes": {"lm_head_weight_grad_in_kernel_order": "auto_axes"},
    "vocab-parallel": {"lm_head_vocab_parallel": True},
}
"""The head variants, as LM-head options: ``EV`` stores the kernel ``[embed, vocab]``, ``VE``
``[vocab, embed]``; the next two keep ``EV``'s and write its gradient in that order;
``vocab-parallel`` keeps it too, sharded on ``vocab`` instead of ``embed`` (needs an fsdp axis)."""
Dtype = Literal["float32", "bfloat16", "float16"]
DTYPES = get_args(Dtype)
Optimizer = Literal["none", "adam"]
OPTIMIZERS = get_args(Optimizer)
"""``none``: the step returns the loss and gradients; ``adam``: it also applies an AdamW update."""
MeshName = Literal["dp", "dp_fsdp", "fsdp"]
MESH_AXES: dict[MeshName, tuple[str, ...]] = {
    "dp": ("data",),
    "dp_fsdp": ("data", "fsdp"),
    "fsdp": ("fsdp",),
}
"""Each mesh's axis names: data parallel; data x fsdp (2 x n/2); all fsdp, MaxText's benchmark
mesh. The batch is sharded over every axis; on an fsdp axis the weights are too, on ``embed``."""


def mesh_shape(mesh: MeshName, devices: int) -> tuple[int, ...]:
    """The axis sizes of a :data:`MESH_AXES` mesh on ``devices`` devices (data x fsdp: 2 x n/2).

    >>> mesh_shape("dp_fsdp", 4)
    (2, 2)
    """
    return (2, devices // 2) if mesh == "dp_fsdp" else (devices,)


class StepConfig(Config):
    """Everything that decides the lowered step; an invalid combination fails on construction."""

    mode: ShardMode = "explicit"
    variant: Variant = "EV"
    mesh: MeshName = "dp"
    devices: PositiveInt = MESH_DEVICES
    emb: PositiveInt = 64
    vocab: PositiveInt = 256
    batch: PositiveInt = 8
    seq: PositiveInt = 16
    dtype: Dtype = "float32"
    pin_logits: bool = True
    optimizer: Optimizer = "none"

    @model_validator(mode="after")
    def _fits_the_mesh(self) -> Self:
        if self.mesh == "dp_fsdp" and self.devices % 2:
            raise ValueError(f"mesh 'dp_fsdp' needs an even device count, got {self.devices}.")
        if self.batch % self.devices:
            raise ValueError(f"batch {self.batch} does not divide over the {self.devices} devices.")
        if self.head.lm_head_vocab_parallel and "fsdp" not in self.axes:
            raise ValueError(
                f"variant {self.variant!r} shards the head on the fsdp axis, and mesh {self.mesh!r} "
                "has none; use mesh 'fsdp' or 'dp_fsdp'."
            )
        if "fsdp" in self.axes:
            fsdp = self.mesh_shape[-1]
            sharded = ("emb", "vocab") if self.head.lm_head_vocab_parallel else ("emb",)
            for name in sharded:
                if (size := getattr(self, name)) % fsdp:
                    raise ValueError(
                        f"{name} {size} does not divide over the fsdp axis of size {fsdp}."
                    )
        return self

    @property
    def head(self) -> LMHeadConfig:
        """The LM head's configuration: the sizes and the variant's options."""
        return LMHeadConfig(emb_dim=self.emb, vocab_size=self.vocab, **VARIANTS[self.variant])

    @property
    def step_bytes(self) -> int:
        """A generous bound on the memory one built step uses: parameters, gradients, logits."""
        tokens = self.batch * self.seq
        elements = 4 * self.emb * self.vocab + 4 * tokens * self.vocab + 2 * tokens * self.emb
        return jnp.dtype(self.dtype).itemsize * elements

    @property
    def kernel_dims(self) -> tuple[int, int]:
        """The head kernel's sizes, ``(emb, vocab)``: how the HLO readers spot its gradient."""
        return (self.emb, self.vocab)

    @property
    def kernel_sizes(self) -> set[int]:
        """Element counts of the head kernel and of each even share of it over the devices."""
        return {self.emb * self.vocab // n for n in range(1, self.devices + 1)}

    @property
    def mesh_shape(self) -> tuple[int, ...]:
        """The mesh's axis sizes for this mesh and device count."""
        return mesh_shape(self.mesh, self.devices)

    @property
    def axes(self) -> tuple[str, ...]:
        """The mesh's axis names: the batch is sharded over all of them."""
        return MESH_AXES[self.mesh]


class TinyLM(nnx.Module):
    """Embedding, RMS norm and the LM head: the smallest model with a real head gradient."""

    def __init__(self, config: StepConfig, rngs: nnx.Rngs):
        self.config = config
        dtype = jnp.dtype(config.dtype)
        table = jax.random.normal(rngs.params(), (config.vocab, config.emb), dtype)
        self.embedding = nnx.Param(table, out_sharding=("vocab", "embed"), eager_sharding=False)
        self.norm = nnx.RMSNorm(config.emb, dtype=dtype, param_dtype=dtype, rngs=rngs)
        self.head = build_output_head(config.head, rngs=rngs)

    def __call__(self, tokens: jax.Array, targets: jax.Array) -> jax.Array:
        """The mean cross-entropy of ``targets`` given ``tokens``, both ``[batch, seq]``."""
        return head_loss(self.config, self.head, self.hidden(tokens), targets)

    def hidden(self, tokens: jax.Array) -> jax.Array:
        """The normalised embeddings ``[batch, seq, emb]`` the head reads, batch-sharded."""
        explicit = jax.typeof(tokens).sharding.mesh.are_all_axes_explicit
        activations = P(self.config.axes, None, None) if explicit else None
        return self.norm(self.embedding[...].at[tokens].get(out_sharding=activations))


def head_loss(config: StepConfig, head: Callable, x: jax.Array, targets: jax.Array) -> jax.Array:
    """The ``head`` on ``x`` and the mean cross-entropy of its logits against ``targets``."""
    if config.head.lm_head_vocab_parallel:  # gather the hidden state, not the kernel
        data = tuple(axis for axis in config.axes if axis != "fsdp")  # the batch stays on these
        logits = vocab_parallel_logits(x, head, data)
        return vocab_parallel_cross_entropy(logits, targets, data)
    explicit = jax.typeof(x).sharding.mesh.are_all_axes_explicit
    logits_spec = P(config.axes, None, None) if explicit and config.pin_logits else None
    logits = head(x, out_sharding=logits_spec)
    # Cross-entropy by hand: optax's adds 24 Sharding calls to the program under study.
    log_probs = jax.nn.log_softmax(logits.astype(jnp.float32))
    return -jnp.mean(jnp.take_along_axis(log_probs, targets[..., None], axis=-1))


def every_mode_and_variant(base: StepConfig) -> list[StepConfig]:
    """``base`` in each shard mode with each head variant its mesh allows, explicit first."""
    variants = [
        v for v in VARIANTS if "fsdp" in base.axes or "lm_head_vocab_parallel" not in VARIANTS[v]
    ]
    return [base.replace(mode=m, variant=v) for m in SHARD_MODES for v in variants]


@dataclasses.dataclass(frozen=True)
class JittedStep:
    """A jitted step with its arguments on the mesh, ready to lower or call."""

    mesh: Mesh
    function: Any
    args: tuple

    def lower(self) -> jax.stages.Lowered:
        """Lower the step under its mesh."""
        with jax.set_mesh(self.mesh):
            return self.function.lower(*self.args)

    def __call__(self) -> tuple:
        """Run the step once: ``(loss, grads)``, or ``(loss, params, opt_state)`` with an optimizer."""
        with jax.set_mesh(self.mesh):
            return self.function(*self.args)


@dataclasses.dataclass(frozen=True)
class Step(JittedStep):
    """The flagship's training step, built from its :class:`StepConfig`."""

    config: StepConfig


def _placed(config: StepConfig, seed: int) -> tuple[Mesh, TinyLM]:
    """The mesh and the model on it, its weights sharded as the logical axis rules say."""
    mesh = make_mesh(config.mesh_shape, config.axes, config.mode)
    model = TinyLM(config, nnx.Rngs(seed))
    fsdp = "fsdp" if "fsdp" in config.axes else None
    with nnx.logical_axis_rules([("embed", fsdp), ("vocab", None)]):
        shardings = nnx.get_named_sharding(model, mesh)
    with nnx.logical_axis_rules(head_axis_rules(config.head, fsdp)):
        shardings.head = nnx.get_named_sharding(model.head, mesh)
    return mesh, jax.device_put(model, shardings)


def gathered(config: StepConfig, layer: nnx.Module) -> nnx.Module:
    """``layer`` (the model or its head) with its weights gathered whole over an fsdp axis before
    use, so autodiff scatters their gradients; a vocab-parallel head's kernel stays sharded."""
    if "fsdp" not in config.axes:
        return layer
    rotated = config.head.lm_head_vocab_parallel  # the head's kernel is the model's only one
    return jax.tree.map_with_path(
        lambda path, w: w if rotated and ".kernel" in jax.tree_util.keystr(path) else pin(w, P()),
        layer,
    )


def build_step(config: StepConfig, seed: int = 0) -> Step:
    """Build the model and data for ``config``, place them on the mesh and jit the step."""
    mesh, model = _placed(config, seed)

    def loss_fn(model, tokens, targets):
        return gathered(config, model)(tokens, targets)

    key = jax.random.key(seed + 1)
    tokens, targets = jax.random.randint(key, (2, config.batch, config.seq), 0, config.vocab)
    tokens, targets = jax.device_put((tokens, targets), NamedSharding(mesh, P(config.axes)))
    value_and_grad = jax.value_and_grad(loss_fn)
    if config.optimizer == "none":
        return Step(mesh, jax.jit(value_and_grad), (model, tokens, targets), config)
    optimizer = optax.adamw(1e-3)

    def step(model, opt_state, tokens, targets):
        loss, grads = value_and_grad(model, tokens, targets)
        updates, opt_state = optimizer.update(grads, opt_state, model)
        return loss, optax.apply_updates(model, updates), opt_state

    with jax.set_mesh(mesh):
        opt_state = jax.jit(optimizer.init)(model)
    return Step(mesh, jax.jit(step), (model, opt_state, tokens, targets), config)


def build_head_step(config: StepConfig, seed: int = 0) -> Step:
    """The head and its loss alone: the gradients of the head's parameters and of its input,
    which arrives batch-sharded as the step's :meth:`TinyLM.hidden` leaves it."""
    mesh, model = _placed(config, seed)

    def loss_fn(head, x, targets):
        return head_loss(config, gathered(config, head), x, targets)

    keys = jax.random.split(jax.random.key(seed + 1))
    x = jax.random.normal(keys[0], (config.batch, config.seq, config.emb), config.dtype)
    targets = jax.random.randint(keys[1], (config.batch, config.seq), 0, config.vocab)
    x, targets = jax.device_put((x, targets), NamedSharding(mesh, P(config.axes)))
    step = jax.jit(jax.value_and_grad(loss_fn, argnums=(0, 1)))
    return Step(mesh, step, (model.head, x, targets), config)
