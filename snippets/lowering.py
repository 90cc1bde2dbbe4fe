"""A small real training step around the LM head, lowered and compiled on a mesh.

token embedding -> RMS norm -> LM head -> softmax cross-entropy, with
``value_and_grad`` over the parameters, jitted. The mesh is simulated CPU
devices or real chips (``snippets.devices``); the shard mode, sizes, dtype and
the head variant are configurable:

* ``EV``: the kernel stored ``[embed, vocab]`` (the default);
* ``VE``: ``kernel_transposed=True``, stored ``[vocab, embed]``;
* ``kernel-order-grad``: ``[embed, vocab]`` with a custom VJP that writes the
  weight gradient in kernel order (``snippets.kernel_order_grad``);
* ``auto-axes``: ``[embed, vocab]`` with the head's dot in a ``jax.sharding.auto_axes``
  region, the fix MaxText's design doc proposes in its revision of 2026-09-03 (open pull
  request 5091; ``snippets.auto_axes_head``).

``python -m snippets.lowering [--mode M] [--variant V] [--mesh dp|dp_fsdp] [--devices N]
[--emb E] [--vocab V] [--batch B] [--seq S] [--dtype D] [--show stablehlo|hlo|compiled]
[--json]`` lowers one step and prints its size, or the text of one of its programs.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import tempfile
from collections.abc import Sequence
from typing import Any

import jax
import jax.numpy as jnp
import optax
from flax import nnx
from flax.linen import logical_to_mesh_axes
from jax.sharding import Mesh, NamedSharding
from jax.sharding import PartitionSpec as P

from snippets.auto_axes_head import auto_axes_logits
from snippets.cli import Parser, check_memory, positive_int, reported, run_module
from snippets.devices import SHARD_MODES, make_mesh, setup_devices
from snippets.kernel_order_grad import kernel_order_logits
from snippets.lm_head import LMHeadConfig, build_output_head

VARIANTS = ("EV", "VE", "kernel-order-grad", "auto-axes")
DTYPES = ("float32", "bfloat16", "float16")
OPTIMIZERS = ("none", "adam")
"""``none``: the step returns the loss and gradients; ``adam``: it also applies an AdamW update."""
MESH_LAYOUTS = {"dp": ("data",), "dp_fsdp": ("data", "fsdp")}
"""Mesh layouts: 4-way data parallel, or data x fsdp with weights sharded on ``embed``."""


@dataclasses.dataclass(frozen=True)
class StepConfig:
    """Everything that decides the lowered step; invalid combinations raise on construction."""

    mode: str = "explicit"
    variant: str = "EV"
    mesh: str = "dp"
    devices: int = 4
    emb: int = 64
    vocab: int = 256
    batch: int = 8
    seq: int = 16
    dtype: str = "float32"
    pin_logits: bool = True
    optimizer: str = "none"

    def __post_init__(self) -> None:
        for field in ("devices", "emb", "vocab", "batch", "seq"):
            value = getattr(self, field)
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ValueError(f"{field} must be a whole number of at least 1, got {value!r}.")
        if not isinstance(self.pin_logits, bool):
            raise TypeError(f"pin_logits must be True or False, got {self.pin_logits!r}.")
        choices = {
            "mode": tuple(SHARD_MODES),
            "variant": VARIANTS,
            "mesh": tuple(MESH_LAYOUTS),
            "dtype": DTYPES,
            "optimizer": OPTIMIZERS,
        }
        for field, allowed in choices.items():
            if getattr(self, field) not in allowed:
                raise ValueError(
                    f"Unknown {field} {getattr(self, field)!r}; expected one of {allowed}."
                )
        if self.mesh == "dp_fsdp" and self.devices % 2:
            raise ValueError(
                f"mesh 'dp_fsdp' is 2 x devices/2 and needs an even device count, got {self.devices}."
            )
        if self.batch % self.devices:
            raise ValueError(
                f"batch {self.batch} does not divide over the {self.devices} devices of the "
                f"{self.mesh!r} mesh; use a multiple of {self.devices}."
            )
        fsdp = self.mesh_shape[-1] if self.mesh == "dp_fsdp" else 1
        if self.emb % fsdp:
            raise ValueError(f"emb {self.emb} does not divide over the fsdp axis of size {fsdp}.")

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

    @property
    def batch_axes(self) -> tuple[str, ...]:
        """The mesh axes the batch is split over: all of them."""
        return MESH_LAYOUTS[self.mesh]

    @property
    def rules(self) -> list[tuple[str, str | None]]:
        """Logical axis rules: ``embed`` goes to ``fsdp`` on the data x fsdp mesh."""
        return [("embed", "fsdp" if self.mesh == "dp_fsdp" else None), ("vocab", None)]


class TinyLM(nnx.Module):
    """Embedding, RMS norm and the LM head: the smallest model with a real head gradient."""

    def __init__(self, config: StepConfig, rngs: nnx.Rngs):
        self.config = config
        dtype = jnp.dtype(config.dtype)
        table = jax.random.normal(rngs.params(), (config.vocab, config.emb), dtype)
        self.embedding = nnx.Param(table, out_sharding=("vocab", "embed"), eager_sharding=False)
        self.norm = nnx.RMSNorm(config.emb, dtype=dtype, param_dtype=dtype, rngs=rngs)
        head_config = LMHeadConfig(
            emb_dim=config.emb,
            vocab_size=config.vocab,
            lm_head_kernel_transposed=config.variant == "VE",
        )
        self.head = build_output_head(head_config, rngs=rngs)

    def __call__(self, tokens: jax.Array) -> jax.Array:
        """Logits ``[batch, seq, vocab]`` for ``tokens`` ``[batch, seq]``."""
        explicit = self.config.mode == "explicit"
        activations = P(self.config.batch_axes, None, None)
        x = self.embedding[...].at[tokens].get(out_sharding=activations if explicit else None)
        x = self.norm(x)
        logits_spec = activations if explicit and self.config.pin_logits else None
        if self.config.variant == "kernel-order-grad":
            return kernel_order_logits(x, self.head.kernel[...], logits_spec)
        if self.config.variant == "auto-axes":
            return auto_axes_logits(x, self.head.kernel[...], activations if explicit else None)
        return self.head(x, out_sharding=logits_spec)


def every_mode_and_variant(base: StepConfig) -> list[StepConfig]:
    """``base`` in each shard mode with each head variant, explicit first."""
    return [
        dataclasses.replace(base, mode=mode, variant=variant)
        for mode in SHARD_MODES
        for variant in VARIANTS
    ]


def cross_entropy(logits: jax.Array, targets: jax.Array) -> jax.Array:
    """Mean softmax cross-entropy of integer ``targets``."""
    log_probs = jax.nn.log_softmax(logits.astype(jnp.float32))
    return -jnp.mean(jnp.take_along_axis(log_probs, targets[..., None], axis=-1))


def param_shardings(params: nnx.State, config: StepConfig, mesh: Mesh) -> nnx.State:
    """A NamedSharding per parameter, from its logical axes and the config's rules."""

    def sharding(variable: nnx.Variable) -> NamedSharding:
        logical = variable.get_metadata().get("out_sharding")
        spec = logical_to_mesh_axes(tuple(logical), config.rules) if logical else P()
        return NamedSharding(mesh, spec)

    return jax.tree.map(sharding, params, is_leaf=lambda x: isinstance(x, nnx.Variable))


@dataclasses.dataclass
class Step:
    """A jitted training step with the arrays it runs on, ready to lower or call.

    Without an optimizer it is ``value_and_grad``: ``(params, tokens, targets) ->
    (loss, grads)``. With one it also updates: ``(params, opt_state, tokens,
    targets) -> (loss, params, opt_state)``.
    """

    config: StepConfig
    mesh: Mesh
    function: Any
    params: nnx.State
    tokens: jax.Array
    targets: jax.Array
    opt_state: Any = None

    @property
    def args(self) -> tuple:
        """The step's arguments, in order."""
        state = (self.params,) if self.opt_state is None else (self.params, self.opt_state)
        return (*state, self.tokens, self.targets)

    def lower(self) -> jax.stages.Lowered:
        """Lower the step under its mesh."""
        with jax.set_mesh(self.mesh):
            return self.function.lower(*self.args)

    def __call__(self) -> tuple:
        """Run the step once: ``(loss, grads)``, or ``(loss, params, opt_state)`` with an optimizer."""
        with jax.set_mesh(self.mesh):
            return self.function(*self.args)


def with_adamw(value_and_grad: Any, optimizer: optax.GradientTransformation) -> Any:
    """A step that also applies ``optimizer``'s update: ``(loss, new params, new state)``."""

    def step(params, opt_state, tokens, targets):
        loss, grads = value_and_grad(params, tokens, targets)
        updates, opt_state = optimizer.update(grads, opt_state, params)
        return loss, optax.apply_updates(params, updates), opt_state

    return step


def build_step(config: StepConfig, seed: int = 0) -> Step:
    """Build the model and data for ``config``, place them on the mesh and jit the step."""
    mesh = make_mesh(config.mesh_shape, MESH_LAYOUTS[config.mesh], config.mode)
    model = TinyLM(config, nnx.Rngs(seed))
    graphdef, params = nnx.split(model, nnx.Param)
    gather = P() if config.mesh == "dp_fsdp" else None

    def loss_fn(params, tokens, targets):
        if gather is not None:  # FSDP: gather the weights before use; autodiff scatters the grads
            regather = (
                jax.reshard if config.mode == "explicit" else jax.lax.with_sharding_constraint
            )
            params = jax.tree.map(lambda p: regather(p, gather), params)
        return cross_entropy(nnx.merge(graphdef, params)(tokens), targets)

    key = jax.random.key(seed + 1)
    tokens, targets = jax.random.randint(key, (2, config.batch, config.seq), 0, config.vocab)
    data = NamedSharding(mesh, P(config.batch_axes, None))
    params = jax.device_put(params, param_shardings(params, config, mesh))
    step = Step(
        config,
        mesh,
        jax.jit(jax.value_and_grad(loss_fn)),
        params,
        jax.device_put(tokens, data),
        jax.device_put(targets, data),
    )
    if config.optimizer == "adam":
        optimizer = optax.adamw(1e-3)
        with jax.set_mesh(mesh):
            step.opt_state = jax.jit(optimizer.init)(params)
        step.function = jax.jit(with_adamw(jax.value_and_grad(loss_fn), optimizer))
    return step


@dataclasses.dataclass(frozen=True)
class LoweredStep:
    """The three program texts of one step: StableHLO, HLO before optimisation, compiled HLO."""

    config: StepConfig
    stablehlo: str
    hlo: str
    compiled: str
    dumps: dict[str, str]
    kernel_outputs: tuple[int, ...] = ()
    """Positions, among the step's flattened outputs, of the head kernel's gradient or new
    value and its optimizer moments."""


def kernel_output_positions(lowered: jax.stages.Lowered) -> tuple[int, ...]:
    """Where the head kernel's gradient (or new value and Adam moments) sit in the step's outputs."""
    leaves = jax.tree_util.tree_flatten_with_path(lowered.out_info)[0]
    paths = [jax.tree_util.keystr(path) for path, _ in leaves]
    return tuple(i for i, path in enumerate(paths) if "['head']['kernel']" in path)


def read_pass_dumps(directory: str) -> dict[str, str]:
    """The ``.txt`` files XLA wrote to ``directory`` (``xla_dump_to``), by name."""
    dumps = {}
    for name in os.listdir(directory):
        if name.endswith(".txt"):
            with open(os.path.join(directory, name)) as file:
                dumps[name] = file.read()
    return dumps


def lower_built(step: Step, dump_passes: bool = False) -> LoweredStep:
    """Lower and compile a built ``step``; with ``dump_passes`` also keep XLA's per-pass dumps."""
    lowered = step.lower()
    dumps: dict[str, str] = {}
    with tempfile.TemporaryDirectory() as directory:
        options = {"xla_dump_to": directory, "xla_dump_hlo_pass_re": ".*"} if dump_passes else None
        compiled = lowered.compile(compiler_options=options).as_text()
        if dump_passes:
            dumps = read_pass_dumps(directory)
    hlo = lowered.compiler_ir("hlo").as_hlo_text()
    positions = kernel_output_positions(lowered)
    return LoweredStep(step.config, lowered.as_text(), hlo, compiled, dumps, positions)


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
    config = StepConfig(
        mesh=args.mesh, **{name: getattr(args, name) for name in SIZE_FIELDS}, **fields
    )
    sizes = " ".join(f"--{name} {getattr(config, name)}" for name in SIZE_FIELDS)
    check_memory(steps * config.step_bytes, f"{steps} step(s) with {sizes}")
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
        "config": dataclasses.asdict(config),
        "mesh_shape": list(config.mesh_shape),
        "program_lines": {name: len(getattr(lowered, name).splitlines()) for name in PROGRAMS},
    }
    if args.json:
        print(json.dumps(report, indent=2))
        return
    print(", ".join(f"{key} {value}" for key, value in report["config"].items()))
    print(f"mesh {report['mesh_shape']} ({', '.join(MESH_LAYOUTS[config.mesh])})")
    for name, lines in report["program_lines"].items():
        print(f"{name}: {lines} lines (--show {name} prints it)")


if __name__ == "__main__":
    run_module(main)
