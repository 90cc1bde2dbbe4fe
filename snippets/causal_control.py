"""``python -m snippets.causal_control``: the command line of :mod:`snippets.measure.causal_control`."""

from snippets.support.cli import run_command

run_command("snippets.measure.causal_control", __name__)
