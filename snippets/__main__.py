"""``python -m snippets COMMAND [options]``: every command of the project; alone, their list.

A command is named as its module: ``python -m snippets NAME`` runs ``main`` of
``snippets/measure/NAME.py``, imported only when run. The dump check is find-barriers' own
command (``find-barriers``, ``python -m find_barriers``).
"""

from __future__ import annotations

import importlib
import sys
from collections.abc import Sequence

from snippets.support.cli import run_module

COMMANDS = (
    "device_report",
    "head_orientation",
    "step_lowering",
    "collective_timing",
    "barrier",
    "causal_control",
    "bench",
    "reduce_scatter",
    "modes",
    "multihost",
    "maxtext_decoder",
    "version_check",
    "barrier_bench",
    "training_step_run",
    "tpu_relayouts",
    "maxtext_compile",
    "field",
)
"""The modules of :mod:`snippets.measure` with a ``main``, in the guides' order."""


def main(argv: Sequence[str] | None = None) -> None:
    """Run ``argv[0]``'s command with the rest of ``argv``; list the commands without one."""
    argv = list(sys.argv[1:] if argv is None else argv)
    if not argv or argv[0] in ("-h", "--help"):
        print("usage: python -m snippets COMMAND [options]; COMMAND --help for its options\n")
        print("\n".join(f"  {name:18} snippets/measure/{name}.py" for name in COMMANDS))
        return
    if argv[0] not in COMMANDS:
        sys.stderr.write(f"error: no command {argv[0]!r}; choose one of {', '.join(COMMANDS)}\n")
        raise SystemExit(2)
    sys.argv[0] = f"python -m snippets {argv[0]}"  # what --help and usage errors name
    command = importlib.import_module(f"snippets.measure.{argv[0]}").main
    run_module(lambda: command(argv[1:]))


if __name__ == "__main__":
    main()
