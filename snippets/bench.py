"""``python -m snippets.bench``: the command line of :mod:`snippets.measure.bench`."""

from snippets.measure.bench import main
from snippets.support.cli import run_module

if __name__ == "__main__":
    run_module(main)
