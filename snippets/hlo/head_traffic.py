"""What the LM head puts on the wire: its collectives per device and step, in each orientation.

The head and its loss are compiled alone (:func:`snippets.lowering.build_head_step`), so every
collective in that module is the head's. MaxText's design doc (section 4.10) predicts the
vocab-parallel head moves ``vocab / (batch * length)`` times fewer bytes than the default.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TypedDict

from snippets.cache.results import shared
from snippets.hlo.collectives import COLLECTIVES, collectives
from snippets.hlo.gradients import gradient_path
from snippets.hlo.programs import LoweredStep, lower_built
from snippets.lowering import StepConfig, build_head_step, every_mode_and_variant
from snippets.ring_model import ring_bytes_per_rank
from snippets.sources import DESIGN_DOC_MODELS


class HeadTraffic(TypedDict):
    """:func:`head_collectives`' answer, per step and device."""

    collectives: list[dict[str, object]]
    bytes: int
    weight_gradient_collectives: list[str]


def head_collectives(lowered: LoweredStep) -> HeadTraffic:
    """A compiled head step's collectives (op, shape, bytes each device sends per step, a loop's
    times its trips), their total, and those on the weight gradient's path to its output."""
    ops = collectives(lowered.compiled)
    found = [{"op": c.kind, "shape": c.shape, "bytes": round(c.bytes_per_step)} for c in ops]
    path = gradient_path(lowered.compiled, lowered.kernel_outputs, lowered.config.kernel_sizes)
    gradient = [f"{op.opcode} {op.shape}" for op in path if op.opcode in COLLECTIVES]
    total = sum(round(c.bytes_per_step) for c in ops)
    return {"collectives": found, "bytes": total, "weight_gradient_collectives": gradient}


@shared
def head_traffic(
    base: StepConfig, variants: Sequence[str] = ()
) -> dict[str, dict[str, HeadTraffic]]:
    """:func:`head_collectives` in each mode for ``variants``, by default every one that
    ``base``'s mesh allows."""
    traffic: dict[str, dict[str, HeadTraffic]] = {}
    for config in every_mode_and_variant(base.replace(optimizer="none")):
        if variants and config.variant not in variants:
            continue
        lowered = lower_built(build_head_step(config))
        traffic.setdefault(config.mode, {})[config.variant] = head_collectives(lowered)
    return traffic


def design_doc_traffic(emb: int = 2048, batch: int = 4, length: int = 1024, fsdp: int = 4) -> list:
    """Each orientation's head collectives per device and step, from the doc's stated shapes and
    the ring model: the kernel gathered and its gradient finished, or the hidden state both ways."""
    rows = []
    hidden = 2 * batch * length * emb  # bf16[batch, length, emb]
    for model, facts in DESIGN_DOC_MODELS.items():
        kernel = 2 * emb * facts["vocab"]  # bf16[emb, vocab]
        finish = facts["kernel_gradient"]
        default = ring_bytes_per_rank("all-gather", kernel, fsdp)
        scattered = kernel // fsdp if finish == "reduce-scatter" else kernel
        default += ring_bytes_per_rank(finish, scattered, fsdp)
        parallel = ring_bytes_per_rank("all-gather", hidden, fsdp)
        parallel += ring_bytes_per_rank("reduce-scatter", hidden // fsdp, fsdp)
        rows.append(
            {
                "model": model,
                "default_MB": default / 1e6,
                "vocab_parallel_MB": parallel / 1e6,
                "ratio": default / parallel,
                "vocab_over_tokens": facts["vocab"] / (batch * length),
            }
        )
    return rows
