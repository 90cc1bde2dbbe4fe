"""``python -m snippets.reduce_scatter``: the command line of :mod:`snippets.measure.reduce_scatter`."""

from snippets.support.cli import run_command

run_command("snippets.measure.reduce_scatter", __name__)
