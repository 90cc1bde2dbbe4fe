"""Logits through ``jax.sharding.auto_axes``: upstream's shipped fix, in our code.

On an all-Explicit mesh, wrapping the head's forward dot in an ``auto_axes``
region turns the mesh's axes to Auto for the length of that one dot: inside it
JAX emits no sharding-in-types annotation, so the weight gradient's ``dot``
feeds its ``transpose`` directly and XLA's simplifier folds the pair, as in
auto mode. The kernel stays ``[embed, vocab]``; checkpoints and initialisation
are untouched. MaxText ships this as ``lm_head_weight_grad_in_kernel_order``
(its ``docs/guides/optimization/shard_mode_performance.md``, section 8 item 01);
on an all-Auto mesh ``auto_axes`` changes nothing.
"""

from __future__ import annotations

import jax
from jax.sharding import PartitionSpec


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
