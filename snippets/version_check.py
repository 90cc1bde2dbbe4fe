"""``python -m snippets.version_check``: the command line of :mod:`snippets.measure.version_check`."""

from snippets.support.cli import run_command

run_command("snippets.measure.version_check", __name__)
