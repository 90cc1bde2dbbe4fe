"""``python -m snippets.bench``: the command line of :mod:`snippets.measure.bench`."""

from snippets.support.cli import run_command

run_command("snippets.measure.bench", __name__)
