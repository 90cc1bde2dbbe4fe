"""A small real training step around the LM head, jitted, lowered and compiled on a mesh.

``python -m snippets.lowering [--json] [--show stablehlo|hlo|compiled]`` lowers one step and
prints its size, or the text of one of its programs (``--help`` lists its sizes and variants).
"""

from __future__ import annotations

import argparse
import dataclasses
import tempfile
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Literal, Self

import jax
import jax.numpy as jnp
import optax
from flax import nnx
from jax.sharding import Mesh, NamedSharding
from jax.sharding import PartitionSpec as P
from pydantic import model_validator

from snippets.cli import Parser, PositiveInt, check_memory, positive_int, reported, run_module
from snippets.devices import SHARD_MODES, make_mesh, setup_devices
from snippets.lm_head import Config, LMHeadConfig, build_output_head
from snippets.tables import print_report

VARIANTS = {
    "EV": {},
    "VE": {"lm_head_kernel_transposed": True},
    "kernel-order-grad": {"lm_head_weight_grad_in_kernel_order": "custom_vjp"},
    "auto-axes": {"lm_head_weight_grad_in_kernel_order": "auto_axes"},
}
"""The head variants, as LM-head options: ``EV`` stores the kernel ``[embed, vocab]``, ``VE``
``[vocab, embed]``; the other two keep ``EV``'s and write its gradient in that order."""
DTYPES = ("float32", "bfloat16", "float16")
OPTIMIZERS = ("none", "adam")
"""``none``: the step returns the loss and gradients; ``adam``: it also applies an AdamW update."""
MESH_LAYOUTS = {"dp": ("data",), "dp_fsdp": ("data", "fsdp")}
"""Mesh layouts: 4-way data parallel, or data x fsdp with weights sharded on ``embed``."""


class StepConfig(Config):
    """Everything that decides the lowered step; an invalid combination fails on construction."""

    mode: Literal[*SHARD_MODES] = "explicit"
    variant: Literal[*VARIANTS] = "EV"
    mesh: Literal[*MESH_LAYOUTS] = "dp"
    devices: PositiveInt = 4
    emb: PositiveInt = 64
    vocab: PositiveInt = 256
    batch: PositiveInt = 8
    seq: PositiveInt = 16
    dtype: Literal[*DTYPES] = "float32"
    pin_logits: bool = True
    optimizer: Literal[*OPTIMIZERS] = "none"

    @model_validator(mode="after")
    def _fits_the_mesh(self) -> Self:
        if self.mesh == "dp_fsdp" and self.devices % 2:
            raise ValueError(f"mesh 'dp_fsdp' needs an even device count, got {self.devices}.")
        if self.batch % self.devices:
            raise ValueError(f"batch {self.batch} does not divide over the {self.devices} devices.")
        fsdp = self.mesh_shape[-1]
        if self.mesh == "dp_fsdp" and self.emb % fsdp:
            raise ValueError(f"emb {self.emb} does not divide over the fsdp axis of size {fsdp}.")
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
    def mesh_shape(self) -> tuple[int, ...]:
        """The mesh's axis sizes for this layout and device count."""
        return (self.devices,) if self.mesh == "dp" else (2, self.devices // 2)


class TinyLM(nnx.Module):
    """Embedding, RMS norm and the LM head: the smallest model with a real head gradient."""

    def __init__(self, config: StepConfig, rngs: nnx.Rngs):
        self.config = config
        dtype = jnp.dtype(config.dtype)
        table = jax.random.normal(rngs.params(), (config.vocab, config.emb), dtype)
        self.embedding = nnx.Param(table, out_sharding=("vocab", "embed"), eager_sharding=False)
        self.norm = nnx.RMSNorm(config.emb, dtype=dtype, param_dtype=dtype, rngs=rngs)
        head = LMHeadConfig(emb_dim=config.emb, vocab_size=config.vocab, **VARIANTS[config.variant])
        self.head = build_output_head(head, rngs=rngs)

    def __call__(self, tokens: jax.Array) -> jax.Array:
        """Logits ``[batch, seq, vocab]`` for ``tokens`` ``[batch, seq]``."""
        explicit = jax.typeof(tokens).sharding.mesh.are_all_axes_explicit
        activations = P(MESH_LAYOUTS[self.config.mesh], None, None) if explicit else None
        x = self.norm(self.embedding[...].at[tokens].get(out_sharding=activations))
        return self.head(x, out_sharding=activations if self.config.pin_logits else None)


def every_mode_and_variant(base: StepConfig) -> list[StepConfig]:
    """``base`` in each shard mode with each head variant, explicit first."""
    return [base.replace(mode=m, variant=v) for m in SHARD_MODES for v in VARIANTS]


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


def build_step(config: StepConfig, seed: int = 0) -> Step:
    """Build the model and data for ``config``, place them on the mesh and jit the step."""
    axes = MESH_LAYOUTS[config.mesh]
    mesh = make_mesh(config.mesh_shape, axes, config.mode)
    graphdef, params = nnx.split(TinyLM(config, nnx.Rngs(seed)), nnx.Param)
    regather = jax.reshard if config.mode == "explicit" else jax.lax.with_sharding_constraint

    def loss_fn(params, tokens, targets):
        if config.mesh == "dp_fsdp":  # gather the weights before use; autodiff scatters the grads
            params = jax.tree.map(lambda p: regather(p, P()), params)
        # Cross-entropy by hand: optax's adds 24 Sharding calls to the program under study.
        log_probs = jax.nn.log_softmax(nnx.merge(graphdef, params)(tokens).astype(jnp.float32))
        return -jnp.mean(jnp.take_along_axis(log_probs, targets[..., None], axis=-1))

    key = jax.random.key(seed + 1)
    tokens, targets = jax.random.randint(key, (2, config.batch, config.seq), 0, config.vocab)
    tokens, targets = jax.device_put((tokens, targets), NamedSharding(mesh, P(axes)))
    fsdp = "fsdp" if config.mesh == "dp_fsdp" else None  # weights sharded on embed over fsdp
    with nnx.logical_axis_rules([("embed", fsdp), ("vocab", None)]):
        params = jax.device_put(params, nnx.get_named_sharding(params, mesh))
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


@dataclasses.dataclass(frozen=True)
class LoweredStep:
    """The three program texts of one step: StableHLO, HLO before optimisation, compiled HLO."""

    config: StepConfig
    stablehlo: str
    hlo: str
    compiled: str
    dumps: dict[str, str]
    kernel_outputs: tuple[int, ...] = ()
    """Where the head kernel's gradient (or new value and Adam moments) sit in the outputs."""


def read_pass_dumps(directory: str) -> dict[str, str]:
    """The ``.txt`` files XLA wrote to ``directory`` (``xla_dump_to``), by name."""
    return {path.name: path.read_text() for path in Path(directory).glob("*.txt")}


def lower_built(step: Step, dump_passes: bool = False) -> LoweredStep:
    """Lower and compile a built ``step``; with ``dump_passes`` also keep XLA's per-pass dumps."""
    lowered = step.lower()
    with tempfile.TemporaryDirectory() as directory:
        options = {"xla_dump_to": directory, "xla_dump_hlo_pass_re": ".*"} if dump_passes else None
        compiled = lowered.compile(compiler_options=options).as_text()
        dumps = read_pass_dumps(directory)  # none without dump_passes
    hlo = lowered.compiler_ir("hlo").as_hlo_text()
    leaves = jax.tree_util.tree_flatten_with_path(lowered.out_info)[0]
    paths = [jax.tree_util.keystr(path) for path, _ in leaves]
    kernel = tuple(i for i, path in enumerate(paths) if "['head']['kernel']" in path)
    return LoweredStep(step.config, lowered.as_text(), hlo, compiled, dumps, kernel)


def lower_step(config: StepConfig, dump_passes: bool = False) -> LoweredStep:
    """Build, lower and compile the step for ``config`` (see :func:`lower_built`)."""
    return lower_built(build_step(config), dump_passes)


SIZE_FIELDS = ("devices", "emb", "vocab", "batch", "seq")
PROGRAMS = ("stablehlo", "hlo", "compiled")


def add_step_arguments(parser: argparse.ArgumentParser) -> None:
    """Command-line options for a StepConfig's sizes and mesh, with its defaults."""
    defaults = StepConfig()
    for name in SIZE_FIELDS:
        parser.add_argument(f"--{name}", type=positive_int, default=getattr(defaults, name))
    parser.add_argument("--mesh", choices=tuple(MESH_LAYOUTS), default=defaults.mesh)


def step_config(args: argparse.Namespace, steps: int = 1, **fields: Any) -> StepConfig:
    """The StepConfig the options describe, once ``steps`` such steps are known to fit in memory."""
    sizes = {name: getattr(args, name) for name in SIZE_FIELDS}
    config = StepConfig(mesh=args.mesh, **sizes, **fields)
    flags = " ".join(f"--{name} {value}" for name, value in sizes.items())
    check_memory(steps * config.step_bytes, f"{steps} step(s) with {flags}")
    return config


def main(argv: Sequence[str] | None = None) -> None:
    """Lower one step; print its configuration and program sizes, or one program's text."""
    parser = Parser(__doc__)
    add_step_arguments(parser)
    parser.add_argument("--mode", choices=tuple(SHARD_MODES), default="explicit")
    parser.add_argument("--variant", choices=VARIANTS, default="EV")
    parser.add_argument("--dtype", choices=DTYPES, default="float32")
    parser.add_argument("--show", choices=PROGRAMS, help="print this program's text instead")
    parser.add_argument("--json", action="store_true", help="print JSON instead of text")
    args = parser.parse_args(argv)
    with reported(args.debug):
        config = step_config(args, mode=args.mode, variant=args.variant, dtype=args.dtype)
        setup_devices(config.devices)
        lowered = lower_step(config)
    if args.show:
        print(getattr(lowered, args.show))
        return
    report = {
        "config": config.model_dump(),
        "mesh_shape": list(config.mesh_shape),
        "program_lines": {name: len(getattr(lowered, name).splitlines()) for name in PROGRAMS},
    }
    print_report(report, args.json)


if __name__ == "__main__":
    run_module(main)
