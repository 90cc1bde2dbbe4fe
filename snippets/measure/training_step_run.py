"""One step of :class:`snippets.one_training_step.SmallLM`, run as a CI job runs it."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import optax
from flax import nnx
from jax.sharding import PartitionSpec as P

from snippets.devices import setup_devices
from snippets.one_training_step import BATCH, SEQ, SmallLM, train_step
from snippets.support.cli import Parser, positive_int, reported


def main(argv: list[str] | None = None) -> None:
    """Build the model with ``--layers`` hidden layers and run one step; print its loss."""
    parser = Parser(__doc__, json_help=None)
    parser.add_argument("--layers", type=positive_int, default=2, help="hidden layers (2)")
    args = parser.parse_args(argv)
    with reported(args.debug):
        devices = setup_devices(4)
    with jax.set_mesh(jax.make_mesh((2, 2), ("data", "model"), devices=devices)):
        model = SmallLM(args.layers, nnx.Rngs(0))
        optimizer = nnx.Optimizer(model, optax.adamw(1e-3), wrt=nnx.Param)
        tokens = jax.device_put(jnp.zeros((BATCH, SEQ + 1), jnp.int32), P("data"))
        print(f"loss after one step: {float(train_step(model, optimizer, tokens)[0]):.3f}")
