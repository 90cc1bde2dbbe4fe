"""``python -m snippets.modes``: the command line of :mod:`snippets.measure.modes`."""

from snippets.measure.modes import main
from snippets.support.cli import run_module

if __name__ == "__main__":
    run_module(main)
