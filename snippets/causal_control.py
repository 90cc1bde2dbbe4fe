"""``python -m snippets.causal_control``: the command line of :mod:`snippets.measure.causal_control`."""

from snippets.measure.causal_control import main
from snippets.support.cli import run_module

if __name__ == "__main__":
    run_module(main)
