"""Figures quoted from the sources, each with where it comes from; none is measured here.

MaxText's design doc is ``docs/guides/optimization/shard_mode_performance.md`` in the open pull
request 5091, at commit ``37ba11cc`` (revised to 2026-09-08), the newest in the search index.
"""

from __future__ import annotations

import dataclasses
from typing import TypedDict

SOURCE_TPU_RESULTS = [
    {"config": "dp4", "auto": 4430.2, "explicit [E,V]": 4844.0, "explicit [V,E]": 4420.1},
    {"config": "emb4096", "auto": 72200.8, "explicit [E,V]": 73330.0, "explicit [V,E]": 72601.8},
]
"""Step times in microseconds on a TPU v5p-8, 2 repetitions per configuration, quoted from the
MaxText pull request that added ``lm_head_kernel_transposed``: explicit before (``[E,V]``) and
after (``[V,E]``) its fix."""

TPU_PASS_WINDOW = {
    "algsimp": "passes 0008-0009",
    "xla-partitioner /\nshardy-xla": "passes 0012-0016",
}
"""The TPU compile's pass positions, quoted: the source PR gives the numbers, MaxText's design
doc (section 4.5) the partitioner's names. Not measured here; the TPU compiler is not open source."""

FUSION_THRESHOLD_BYTES = 512
"""Per the source PR, a TPU fuses all-reduce + dynamic-slice into a reduce-scatter only when the
per-shard minor-most extent is at least ~512 bytes (one 128-lane x 32-bit vreg row), any dtype."""

DESIGN_DOC_MEASURED = {"reduce-scatter": (91.7e9, 99.3e9), "all-reduce": (130.1e9, 138.8e9)}
"""Bytes per device per second MaxText's design doc measured on TPU v5p (4 devices), llama2's bf16
vocab gradient (section 4.2: "91.7-99.3 GB/s versus 130.1-138.8 GB/s for the all-reduce")."""


class DesignDocModel(TypedDict):
    vocab: int
    kernel_gradient: str


DESIGN_DOC_MODELS: dict[str, DesignDocModel] = {
    "llama2-7b": {"vocab": 32000, "kernel_gradient": "reduce-scatter"},
    "qwen3-8b": {"vocab": 151936, "kernel_gradient": "all-reduce"},
}
"""The doc's two examples at its benchmark geometry (section 4.10): emb 2048, bf16, 4-way FSDP,
4 sequences of 1024 tokens; qwen3's kernel gradient is a full all-reduce in both modes."""


@dataclasses.dataclass(frozen=True)
class Interconnect:
    """The numbers the model needs, each with the public source it is taken from."""

    name: str
    link_bytes_per_s: float
    link_source: str
    hop_latency_s: float
    latency_source: str
    memory_bytes_per_s: float
    memory_source: str


ICI_TABLE = (
    "The Scaling Book, 'How to Think About TPUs' (https://jax-ml.github.io/scaling-book/tpus/), "
    "interconnect table: TPU v5p ICI bandwidth per link"
)
SCALING_BOOK_SHARDING = "https://jax-ml.github.io/scaling-book/sharding/"

TPU_V5P = Interconnect(
    name="TPU v5p, one way",
    link_bytes_per_s=9e10,
    link_source=f"{ICI_TABLE}, one-way, 9e10 bytes/s",
    hop_latency_s=1e-6,
    latency_source="The Scaling Book, 'Sharded Matrices and How to Multiply Them' "
    f"({SCALING_BOOK_SHARDING}), 'A note on ICI latency': about 1 us per hop",
    memory_bytes_per_s=2765e9,
    memory_source="Google Cloud's TPU v5p page (https://cloud.google.com/tpu/docs/v5p-training): "
    "HBM bandwidth per chip 2765 GBps",
)
"""TPU v5p as the one-way ring sees it: each rank sends over one ICI link in one direction."""

TPU_V5P_BOTH_WAYS = dataclasses.replace(
    TPU_V5P,
    name="TPU v5p, both directions",
    link_bytes_per_s=1.8e11,
    link_source=f"{ICI_TABLE}, bidi, 1.8e11 bytes/s; its collective costs use it for a full ring "
    f"({SCALING_BOOK_SHARDING})",
)
"""The same ring run both ways at once: each direction carries half of what a rank sends."""

BANDWIDTH_CASES = {"one-way": TPU_V5P, "bidirectional": TPU_V5P_BOTH_WAYS}
"""The two link bandwidths the model is priced with, each with its source."""
