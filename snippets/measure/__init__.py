"""Measurement: read programs, run controls and benchmarks, report (commands: :doc:`/docs/reference`)."""
