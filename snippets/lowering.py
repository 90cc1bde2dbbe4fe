"""A small real training step around the LM head, jitted, lowered and compiled on a mesh.

``python -m snippets lowering [--json] [--show stablehlo|hlo|compiled]`` lowers one step and
prints its size, or the text of one of its programs (``--help`` lists its sizes and variants).
"""

from __future__ import annotations

import dataclasses
from typing import Any, Literal, Self

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

VARIANTS: dict[str, dict[str, Any]] = {  # LMHeadConfig options
    "EV": {},
    "VE": {"lm_head_kernel_transposed": True},
    "kernel-order-grad": {"lm_head_weight_grad_in_kernel_order": "custom_vjp"},
    "auto-axes": {"lm_head_weight_grad_in_kernel_order": "auto_axes"},
    "vocab-parallel": {"lm_head_vocab_parallel": True},
}
"""The head variants, as LM-head options: ``EV`` stores the kernel ``[embed, vocab]``, ``VE``
``[vocab, embed]``; the next two keep ``EV``'s and write its gradient in that order;
``vocab-parallel`` keeps it too, sharded on ``vocab`` instead of ``embed`` (needs an fsdp axis)."""
DTYPES = ("float32", "bfloat16", "float16")
OPTIMIZERS = ("none", "adam")
"""``none``: the step returns the loss and gradients; ``adam``: it also applies an AdamW update."""
MeshLayout = Literal["dp", "dp_fsdp", "fsdp"]
MESH_LAYOUTS = {"dp": ("data",), "dp_fsdp": ("data", "fsdp"), "fsdp": ("fsdp",)}
"""Mesh layouts: data parallel; data x fsdp (2 x n/2); all fsdp, MaxText's benchmark mesh. The
batch is sharded over every axis; on an fsdp axis the weights are too, on ``embed``."""


def mesh_shape(layout: str, devices: int) -> tuple[int, ...]:
    """The axis sizes of a :data:`MESH_LAYOUTS` layout on ``devices`` devices (data x fsdp: 2 x n/2).

    >>> mesh_shape("dp_fsdp", 4)
    (2, 2)
    """
    return (2, devices // 2) if layout == "dp_fsdp" else (devices,)


class StepConfig(Config):
    """Everything that decides the lowered step; an invalid combination fails on construction."""

    mode: ShardMode = "explicit"
    variant: Literal["EV", "VE", "kernel-order-grad", "auto-axes", "vocab-parallel"] = "EV"
    mesh: MeshLayout = "dp"
    devices: PositiveInt = MESH_DEVICES
    emb: PositiveInt = 64
    vocab: PositiveInt = 256
    batch: PositiveInt = 8
    seq: PositiveInt = 16
    dtype: Literal["float32", "bfloat16", "float16"] = "float32"
    pin_logits: bool = True
    optimizer: Literal["none", "adam"] = "none"

    @model_validator(mode="after")
    def _fits_the_mesh(self) -> Self:
        if self.mesh == "dp_fsdp" and self.devices % 2:
            raise ValueError(f"mesh 'dp_fsdp' needs an even device count, got {self.devices}.")
        if self.batch % self.devices:
            raise ValueError(f"batch {self.batch} does not divide over the {self.devices} devices.")
        if self.variant == "vocab-parallel" and "fsdp" not in self.axes:
            raise ValueError(
                f"variant 'vocab-parallel' shards the head on the fsdp axis, and mesh {self.mesh!r} "
                "has none; use mesh 'fsdp' or 'dp_fsdp'."
            )
        if "fsdp" in self.axes:
            fsdp = self.mesh_shape[-1]
            sharded = ("emb", "vocab") if self.variant == "vocab-parallel" else ("emb",)
            for name in sharded:
                if (size := getattr(self, name)) % fsdp:
                    raise ValueError(
                        f"{name} {size} does not divide over the fsdp axis of size {fsdp}."
                    )
        return self

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
        """The mesh's axis sizes for this layout and device count."""
        return mesh_shape(self.mesh, self.devices)

    @property
    def axes(self) -> tuple[str, ...]:
        """The mesh's axis names: the batch is sharded over all of them."""
        return MESH_LAYOUTS[self.mesh]

    @property
    def data_axes(self) -> tuple[str, ...]:
        """The axes a vocab-parallel head keeps the batch sharded on: all but fsdp."""
        return tuple(axis for axis in self.axes if axis != "fsdp")


class TinyLM(nnx.Module):
    """Embedding, RMS norm and the LM head: the smallest model with a real head gradient."""

    def __init__(self, config: StepConfig, rngs: nnx.Rngs):
        self.config = config
        dtype = jnp.dtype(config.dtype)
        table = jax.random.normal(rngs.params(), (config.vocab, config.emb), dtype)
        self.embedding = nnx.Param(table, out_sharding=("vocab", "embed"), eager_sharding=False)
        self.norm = nnx.RMSNorm(config.emb, dtype=dtype, param_dtype=dtype, rngs=rngs)
        self.head_config = LMHeadConfig(
            emb_dim=config.emb, vocab_size=config.vocab, **VARIANTS[config.variant]
        )
        self.head = build_output_head(self.head_config, rngs=rngs)

    def __call__(self, tokens: jax.Array, targets: jax.Array) -> jax.Array:
        """The mean cross-entropy of ``targets`` given ``tokens``, both ``[batch, seq]``."""
        return self.head_loss(self.hidden(tokens), targets)

    def hidden(self, tokens: jax.Array) -> jax.Array:
        """The normalised embeddings ``[batch, seq, emb]`` the head reads, batch-sharded."""
        explicit = jax.typeof(tokens).sharding.mesh.are_all_axes_explicit
        activations = P(self.config.axes, None, None) if explicit else None
        return self.norm(self.embedding[...].at[tokens].get(out_sharding=activations))

    def head_loss(self, x: jax.Array, targets: jax.Array) -> jax.Array:
        """The head on ``x`` and the mean cross-entropy of its logits against ``targets``."""
        config = self.config
        if config.variant == "vocab-parallel":  # gather the hidden state, not the kernel
            logits = vocab_parallel_logits(x, self.head, config.data_axes)
            return vocab_parallel_cross_entropy(logits, targets, config.data_axes)
        explicit = jax.typeof(x).sharding.mesh.are_all_axes_explicit
        pin = P(config.axes, None, None) if explicit and config.pin_logits else None
        logits = self.head(x, out_sharding=pin)
        # Cross-entropy by hand: optax's adds 24 Sharding calls to the program under study.
        log_probs = jax.nn.log_softmax(logits.astype(jnp.float32))
        return -jnp.mean(jnp.take_along_axis(log_probs, targets[..., None], axis=-1))


def every_mode_and_variant(base: StepConfig) -> list[StepConfig]:
    """``base`` in each shard mode with each head variant its mesh allows, explicit first."""
    variants = [v for v in VARIANTS if v != "vocab-parallel" or "fsdp" in base.axes]
    return [base.replace(mode=m, variant=v) for m in SHARD_MODES for v in variants]


@dataclasses.dataclass(frozen=True)
class Step:
    """A jitted training step with its arguments on the mesh, ready to lower or call."""

    config: StepConfig
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


def _placed(config: StepConfig, seed: int) -> tuple:
    """The mesh, the model split into graph and parameters, those parameters on the mesh, and
    a function that gathers them whole before use (autodiff then scatters their gradients)."""
    mesh = make_mesh(config.mesh_shape, config.axes, config.mode)
    model = TinyLM(config, nnx.Rngs(seed))
    graphdef, params = nnx.split(model, nnx.Param)
    fsdp = "fsdp" if "fsdp" in config.axes else None  # weights sharded on embed over fsdp
    with nnx.logical_axis_rules([("embed", fsdp), ("vocab", None)]):
        shardings = nnx.get_named_sharding(params, mesh)
    with nnx.logical_axis_rules(head_axis_rules(model.head_config, fsdp)):
        shardings["head"] = nnx.get_named_sharding(params["head"], mesh)

    def gathered(params: nnx.State) -> nnx.State:
        if fsdp is None:
            return params
        whole = jax.tree.map(lambda p: pin(p, P()), params)
        if config.variant == "vocab-parallel":  # its kernel stays sharded
            whole["head"] = params["head"]
        return whole

    return mesh, graphdef, jax.device_put(params, shardings), gathered


def build_step(config: StepConfig, seed: int = 0) -> Step:
    """Build the model and data for ``config``, place them on the mesh and jit the step."""
    mesh, graphdef, params, gathered = _placed(config, seed)

    def loss_fn(params, tokens, targets):
        return nnx.merge(graphdef, gathered(params))(tokens, targets)

    key = jax.random.key(seed + 1)
    tokens, targets = jax.random.randint(key, (2, config.batch, config.seq), 0, config.vocab)
    tokens, targets = jax.device_put((tokens, targets), NamedSharding(mesh, P(config.axes)))
    value_and_grad = jax.value_and_grad(loss_fn)
    if config.optimizer == "none":
        return Step(config, mesh, jax.jit(value_and_grad), (params, tokens, targets))
    optimizer = optax.adamw(1e-3)

    def step(params, opt_state, tokens, targets):
        loss, grads = value_and_grad(params, tokens, targets)
        updates, opt_state = optimizer.update(grads, opt_state, params)
        return loss, optax.apply_updates(params, updates), opt_state

    with jax.set_mesh(mesh):
        opt_state = jax.jit(optimizer.init)(params)
    return Step(config, mesh, jax.jit(step), (params, opt_state, tokens, targets))


def build_head_step(config: StepConfig, seed: int = 0) -> Step:
    """The head and its loss alone: the gradients of the head's parameters and of its input,
    which arrives batch-sharded as the step's :meth:`TinyLM.hidden` leaves it."""
    mesh, graphdef, params, gathered = _placed(config, seed)
    head = nnx.State({"head": params["head"]})
    rest = nnx.State({name: value for name, value in params.items() if name != "head"})

    def loss_fn(head, x, rest, targets):  # rest: the trunk's parameters, unused
        return nnx.merge(graphdef, gathered(head), rest).head_loss(x, targets)

    keys = jax.random.split(jax.random.key(seed + 1))
    x = jax.random.normal(keys[0], (config.batch, config.seq, config.emb), config.dtype)
    targets = jax.random.randint(keys[1], (config.batch, config.seq), 0, config.vocab)
    x, targets = jax.device_put((x, targets), NamedSharding(mesh, P(config.axes)))
    step = jax.jit(jax.value_and_grad(loss_fn, argnums=(0, 1)))
    return Step(config, mesh, step, (head, x, rest, targets))
