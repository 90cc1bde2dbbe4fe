"""The sites of a ``jax.jit(...).lower(...)``, outputs named, read from its StableHLO module
(:mod:`snippets.hlo.stablehlo`, no HLO text printed) by find-barriers' site finder
(:func:`find_barriers.sites.find_sites`), in the process that lowered the step."""

from __future__ import annotations

import dataclasses

import jax

from find_barriers.sites import TransposeSite, find_sites
from snippets.hlo.stablehlo import StableHLOProgram


def output_name(path: tuple) -> str:
    """An output's pytree path as a reader names the parameter: ``head.kernel`` for
    ``[1].head.kernel.value`` (the result tuple's index and a variable's ``.value`` go);
    ``result``, or ``result[0]``, for an output without names."""
    keys = list(path)
    if keys and isinstance(keys[-1], jax.tree_util.GetAttrKey) and keys[-1].name == "value":
        keys.pop()
    if all(isinstance(key, jax.tree_util.SequenceKey) for key in keys):
        return "result" + jax.tree_util.keystr(tuple(keys))
    if isinstance(keys[0], jax.tree_util.SequenceKey):
        keys.pop(0)
    return jax.tree_util.keystr(tuple(keys), simple=True, separator=".")


def output_names(lowered: jax.stages.Lowered) -> list[str]:
    """Every output of ``lowered``, in order, named by :func:`output_name`."""
    return [output_name(path) for path, _ in jax.tree.leaves_with_path(lowered.out_info)]


def lowered_sites(lowered: jax.stages.Lowered) -> list[TransposeSite]:
    """Every transpose-of-dot site of ``lowered``: a ``Sharding`` call between is a fold explicit
    mode blocks (``site.blocked``), ``output`` names the parameter the site's value reaches, and
    ``print(site)`` gives the line find-barriers prints for it."""
    names = output_names(lowered)
    return [
        dataclasses.replace(
            site, output=names[site.output] if isinstance(site.output, int) else site.output
        )
        for site in find_sites(StableHLOProgram(lowered.compiler_ir()))
    ]
