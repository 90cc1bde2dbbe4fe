"""Readers of XLA's programs, and find-barriers, the check built on them: no JAX import, except
where a lowered module is read (:mod:`~snippets.hlo.stablehlo`, through JAX's MLIR bindings, and
:mod:`~snippets.hlo.lowered`, find-barriers' Python API).

HLO text becomes :class:`~snippets.hlo.program.Instruction` records in a
:class:`~snippets.hlo.program.Program`; one module per question asked of it.
"""
