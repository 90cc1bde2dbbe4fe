"""The guides' readers of XLA's programs, beside find-barriers' (whose records they read):
collectives and their bytes, counts, gradient paths and relayouts, pass order and the first
simplifier's folds from HLO text, and a lowered program's StableHLO as the site finder reads it
(:mod:`~snippets.hlo.lowered`, through :mod:`~snippets.hlo.stablehlo`)."""
