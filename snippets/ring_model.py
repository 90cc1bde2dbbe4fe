"""The ring model of a collective: what one rank sends, and in how many steps, as the Scaling Book
prices them (`Sharded Matrices and How to Multiply Them
<https://jax-ml.github.io/scaling-book/sharding/>`_). No JAX here, so the HLO readers can use it."""

from __future__ import annotations

from fractions import Fraction


def ring_bytes_per_rank(kind: str, result_bytes: int, ranks: int) -> float:
    """Bytes one rank sends: ``(N-1)/N`` of the full tensor, twice that for an all-reduce, and a
    collective-permute its buffer once.

    >>> ring_bytes_per_rank("reduce-scatter", result_bytes=8, ranks=2)
    8
    >>> ring_bytes_per_rank("all-reduce", result_bytes=16, ranks=2)
    16
    """
    full = {"reduce-scatter": result_bytes * ranks}.get(kind, result_bytes)
    share = {"all-reduce": Fraction(2 * (ranks - 1), ranks), "collective-permute": Fraction(1)}
    sent = full * share.get(kind, Fraction(ranks - 1, ranks))
    return int(sent) if sent.denominator == 1 else float(sent)


def ring_hops(kind: str, ranks: int) -> int:
    """Steps of a ring collective: N-1 for reduce-scatter and all-gather, 2(N-1) for all-reduce.

    >>> ring_hops("reduce-scatter", 4), ring_hops("all-reduce", 4)
    (3, 6)
    """
    steps = {"reduce-scatter": 1, "all-gather": 1, "all-reduce": 2}
    if kind not in steps:
        raise ValueError(f"Unknown collective {kind!r}; expected one of {sorted(steps)}.")
    return steps[kind] * (ranks - 1)
