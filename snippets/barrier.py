"""``python -m snippets.barrier``: the command line of :mod:`snippets.measure.barrier`."""

from snippets.measure.barrier import main
from snippets.support.cli import run_module

if __name__ == "__main__":
    run_module(main)
