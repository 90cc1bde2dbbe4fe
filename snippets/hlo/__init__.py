"""The guides' readers of XLA's programs, beside find-barriers' (:mod:`find_barriers`, whose
records they read): collectives and their bytes, counts, gradient paths and relayouts, pass order
and the first simplifier's folds from HLO text, and a lowered program's StableHLO
(:mod:`~snippets.hlo.stablehlo`, one operation at a time by :mod:`~snippets.hlo.mlir_operations`,
through JAX's MLIR bindings) as the site finder reads it (:mod:`~snippets.hlo.lowered`).
"""
