"""``python -m snippets.reduce_scatter``: the command line of :mod:`snippets.measure.reduce_scatter`."""

from snippets.measure.reduce_scatter import main
from snippets.support.cli import run_module

if __name__ == "__main__":
    run_module(main)
