"""``python -m snippets.multihost``: the command line of :mod:`snippets.measure.multihost`."""

from snippets.measure.multihost import main
from snippets.support.cli import run_module

if __name__ == "__main__":
    run_module(main)
