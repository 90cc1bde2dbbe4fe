"""The guides' readers of XLA's programs, beside find-barriers' (whose records they read), and the
measurements made with them. Readers: collectives and their bytes, counts, gradient paths and
relayouts, pass order and the first simplifier's folds, from HLO text (a lowered program's sites
come from :mod:`find_barriers.jax`). Measurements: a step's programs (:mod:`~snippets.hlo.programs`),
the barrier, the causal control, the LM head's collectives and finish, the exchange, and MaxText's
decoder, each lowered and read."""
