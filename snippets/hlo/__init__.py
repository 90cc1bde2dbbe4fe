"""Readers of XLA's programs, one module per question asked of a
:class:`~find_barriers.program.Program` of :class:`~find_barriers.program.Instruction` records,
and find-barriers, the check built on them: no JAX import, except where a lowered module is read
(:mod:`~snippets.hlo.stablehlo`, through JAX's MLIR bindings, and :mod:`~snippets.hlo.lowered`).
"""
