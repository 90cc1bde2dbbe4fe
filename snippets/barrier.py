"""``python -m snippets.barrier``: the command line of :mod:`snippets.measure.barrier`."""

from snippets.support.cli import run_command

run_command("snippets.measure.barrier", __name__)
