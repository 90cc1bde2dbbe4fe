"""The Python the guides execute, by role.

- ``snippets.NAME``: teaching code that pages show and readers copy (the LM head, the kernel-order
  and vocab-parallel fixes, the step, devices, the exchange, checkpoints, the ring model), and
  the command lines' entry points.
- :mod:`snippets.measure`: what reads programs and reports (HLO readers, the barrier report,
  controls, traffic, benchmarks, the version check).
- :mod:`snippets.support`: what the rest shares (command lines, configs, tables, figures,
  timing, quoted source figures).

Imports point from measurement to teaching to support, never back.
"""
