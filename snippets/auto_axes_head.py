"""Logits through ``jax.sharding.auto_axes``: the fix MaxText's design doc proposes, in our code.

On an all-Explicit mesh, wrapping the head's forward dot in an ``auto_axes``
region turns the mesh's axes to Auto for the length of that one dot: inside it
JAX emits no sharding-in-types annotation, so the weight gradient's ``dot``
feeds its ``transpose`` directly and XLA's simplifier can fold the pair, as in
auto mode, where the simplifier runs before the partitioner. The kernel stays
``[embed, vocab]``; checkpoints and initialisation are untouched. MaxText's
design doc (``docs/guides/optimization/shard_mode_performance.md``, in open pull
request 5091; section 8 item 01, revised 2026-09-03) proposes this as the
implementation of its ``lm_head_weight_grad_in_kernel_order`` flag. On an
all-Auto mesh ``auto_axes`` changes nothing.
"""

from __future__ import annotations

import jax
from jax.sharding import PartitionSpec

from snippets.cli import run_module


def auto_axes_logits(
    x: jax.Array, kernel: jax.Array, out_sharding: PartitionSpec | None
) -> jax.Array:
    """``x @ kernel`` for a kernel stored ``[embed, vocab]``, computed with the mesh's axes Auto.

    ``out_sharding`` is the logits' sharding on leaving the region (explicit mode
    needs one); ``None`` leaves the dot as it is, which is what auto mode wants.
    """
    if out_sharding is None:
        return x @ kernel
    return jax.sharding.auto_axes(lambda x, kernel: x @ kernel, out_sharding=out_sharding)(
        x, kernel
    )


if __name__ == "__main__":
    run_module()
