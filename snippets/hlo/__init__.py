"""Readers of XLA's programs, and find-barriers, the check built on them: no JAX import
(:mod:`~snippets.hlo.stablehlo` alone reads a lowered module, through JAX's MLIR bindings).

HLO text becomes :class:`~snippets.hlo.program.Instruction` records in a
:class:`~snippets.hlo.program.Program`; one module per question asked of it.
"""
