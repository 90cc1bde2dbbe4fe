"""The Python the guides execute: teaching code that pages show (``snippets.NAME``, with the
command lines' entry points), :mod:`snippets.measure` that reads programs and reports, and
:mod:`snippets.support` that both share. Imports point measure -> teaching -> support only.
"""
