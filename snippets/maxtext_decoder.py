"""``python -m snippets.maxtext_decoder``: the command line of :mod:`snippets.measure.maxtext_decoder`."""

from snippets.measure.maxtext_decoder import main
from snippets.support.cli import run_module

if __name__ == "__main__":
    run_module(main)
