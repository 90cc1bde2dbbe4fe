"""Measurement: read lowered and compiled programs, run controls and benchmarks, and report.

Pages call these but do not show them; each report is also a command line (``python -m
snippets.NAME``, see :doc:`/docs/reference`).
"""
