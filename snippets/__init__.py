"""The Python the guides execute: teaching code that pages show (``snippets.NAME``),
:mod:`snippets.hlo` that reads XLA's programs, :mod:`snippets.measure` that runs and reports
(each command's ``main``; ``python -m snippets`` lists them), and :mod:`snippets.support` that
all share. Imports point measure -> hlo -> teaching -> support only.
"""
