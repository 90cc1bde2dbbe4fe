"""``python -m snippets.modes``: the command line of :mod:`snippets.measure.modes`."""

from snippets.support.cli import run_command

run_command("snippets.measure.modes", __name__)
