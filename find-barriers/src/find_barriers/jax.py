"""The sites of a ``jax.stages.Lowered``, read from its StableHLO module in the process that
lowered it (no HLO text printed), its outputs named by the step's output tree. It needs
``pip install "find-barriers[jax]"``; ``import find_barriers`` never imports it."""

from __future__ import annotations

import dataclasses

try:
    import jax
except ModuleNotFoundError as missing:
    raise ImportError(
        'find_barriers.jax needs JAX (Python 3.11 or newer): pip install "find-barriers[jax]"',
        name=missing.name,
    ) from missing

from find_barriers._sites import TransposeSite, find_sites
from find_barriers._stablehlo import StableHLOProgram

__all__ = ["lowered_sites", "output_names"]


def _output_name(path: tuple) -> str:
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
    """Every output of ``lowered``, in order, named by its path in the step's output tree:
    ``head.kernel``, or ``result[0]`` where the path holds no name."""
    return [_output_name(path) for path, _ in jax.tree.leaves_with_path(lowered.out_info)]


def lowered_sites(lowered: jax.stages.Lowered) -> list[TransposeSite]:
    """Every transpose-of-dot site of ``lowered``, as find-barriers finds them in the dump of the
    same step: a ``Sharding`` call between is a fold explicit mode blocks (``site.blocked``),
    ``output`` names the parameter the site's value reaches (:func:`output_names`), and
    ``print(site)`` gives the line find-barriers prints for it."""
    names = output_names(lowered)
    return [_named(site, names) for site in find_sites(StableHLOProgram(lowered.compiler_ir()))]


def _named(site: TransposeSite, names: list[str]) -> TransposeSite:
    """``site`` with the output it reaches named from ``names`` (:func:`output_names`)."""
    if not isinstance(site.output, int):
        return site
    return dataclasses.replace(site, output=names[site.output])
