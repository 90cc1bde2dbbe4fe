"""Measurement: lower and compile, run controls and benchmarks, report; every command's ``main``
(``python -m snippets NAME``; the list: :doc:`/docs/reference`)."""
