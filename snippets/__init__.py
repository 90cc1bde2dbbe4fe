"""The Python the guides execute: teaching code that pages show (``snippets.NAME``), with the
quoted sources and the figures; :mod:`snippets.hlo` that reads XLA's programs and measures with
them; :mod:`snippets.measure`, the commands (each a ``main``; ``python -m snippets`` lists them);
:mod:`snippets.support`, their plumbing, and :mod:`snippets.cache`, results keyed on what produced
them. Imports point measure -> hlo -> teaching -> support and cache only.
"""
