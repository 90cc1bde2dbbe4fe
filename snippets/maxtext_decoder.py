"""``python -m snippets.maxtext_decoder``: the command line of :mod:`snippets.measure.maxtext_decoder`."""

from snippets.support.cli import run_command

run_command("snippets.measure.maxtext_decoder", __name__)
