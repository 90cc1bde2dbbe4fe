"""Figures quoted from the sources, each with where it comes from; none is measured here.

MaxText's design doc is ``docs/guides/optimization/shard_mode_performance.md`` in the open pull
request 5091, at the revision :data:`DESIGN_DOC` links (revised to 2026-09-08). Its TPU step
times are quoted as step-time changes in percent.
"""

from __future__ import annotations

DESIGN_DOC = (
    "https://github.com/AI-Hypercomputer/maxtext/blob/37ba11cc7db4ae6b5d58f25a993caa5e9c4e125e/"
    "docs/guides/optimization/shard_mode_performance.md"
)
"""The design doc at the newest revision in the search index (commit ``37ba11cc``)."""

MODES_WITH_THE_FLAGS = [
    {"model": "llama2-7b", "mesh": "fsdp 4", "explicit_vs_auto_pct": -0.027},
    {"model": "qwen3-8b", "mesh": "fsdp 4", "explicit_vs_auto_pct": -0.056},
    {"model": "llama2-7b", "mesh": "dp 4", "explicit_vs_auto_pct": -0.117},
    {"model": "llama2-7b", "mesh": "tp 4", "explicit_vs_auto_pct": 0.204},
]
"""Explicit against auto, both on the shipped defaults (all three flags on): section 5.8, TPU v5p,
4 chips, 12 layers, 1,024 tokens per sequence; rep spread 0.00-0.14%, so under ~0.15% is a tie."""

LONG_SEQUENCES = {"models": 8, "explicit_faster": 7, "median_pct": -0.435, "tokens": 4096}
"""Section 5.9: at ``max_target_length=4096`` on 8 TPU7x chips, shipped defaults in both modes."""

VOCAB_PARALLEL_GAINS = [
    {"model": "qwen3-8b", "explicit_pct": -10.94, "auto_pct": -10.96},
    {"model": "llama2-7b", "explicit_pct": -1.72, "auto_pct": -1.80},
    {"model": "mistral-7b", "explicit_pct": -1.68, "auto_pct": -1.61},
    {"model": "deepseek2-16b", "explicit_pct": -1.31, "auto_pct": -1.28},
    {"model": "mixtral-8x7b", "explicit_pct": -1.12, "auto_pct": -1.11},
]
"""Step time with ``lm_head_vocab_parallel`` on against off, in each mode: section 5.7, Table B's
companion table (TPU v5p, 4 chips, fsdp 4, 1,024 tokens)."""

SOURCE_TPU_RESULTS = [
    {"config": "dp4", "auto": 4430.2, "explicit [E,V]": 4844.0, "explicit [V,E]": 4420.1},
    {"config": "emb4096", "auto": 72200.8, "explicit [E,V]": 73330.0, "explicit [V,E]": 72601.8},
]
"""Step times in microseconds on a TPU v5p-8, 2 repetitions per configuration, quoted from the
MaxText pull request that added ``lm_head_kernel_transposed``: explicit before (``[E,V]``) and
after (``[V,E]``) its fix."""
