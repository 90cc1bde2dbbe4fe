"""``python -m snippets.version_check``: the command line of :mod:`snippets.measure.version_check`."""

from snippets.measure.version_check import main
from snippets.support.cli import run_module

if __name__ == "__main__":
    run_module(main)
