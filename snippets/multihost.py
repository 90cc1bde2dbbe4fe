"""``python -m snippets.multihost``: the command line of :mod:`snippets.measure.multihost`."""

from snippets.support.cli import run_command

run_command("snippets.measure.multihost", __name__)
