"""``python -m snippets COMMAND [options]``: every command of the project; alone, their list.

Each command is the ``main`` of one module in :mod:`snippets.measure`, imported only when run.
The dump check is find-barriers' own command (``find-barriers``, ``python -m find_barriers``).
"""

from __future__ import annotations

import importlib
import sys
from collections.abc import Sequence

from snippets.support.cli import run_module

COMMANDS = {
    "devices": "snippets.measure.device_report",
    "lm_head": "snippets.measure.head_orientation",
    "lowering": "snippets.measure.step_lowering",
    "collective_cost": "snippets.measure.collective_timing",
    "barrier": "snippets.measure.barrier",
    "causal_control": "snippets.measure.causal_control",
    "bench": "snippets.measure.bench",
    "reduce_scatter": "snippets.measure.reduce_scatter",
    "modes": "snippets.measure.modes",
    "multihost": "snippets.measure.multihost",
    "maxtext_decoder": "snippets.measure.maxtext_decoder",
    "version_check": "snippets.measure.version_check",
    "barrier_bench": "snippets.measure.barrier_bench",
    "one_training_step": "snippets.measure.training_step_run",
}
"""Each command's name and the module whose ``main`` it runs."""


def main(argv: Sequence[str] | None = None) -> None:
    """Run ``argv[0]``'s command with the rest of ``argv``; list the commands without one."""
    argv = list(sys.argv[1:] if argv is None else argv)
    if not argv or argv[0] in ("-h", "--help"):
        print("usage: python -m snippets COMMAND [options]; COMMAND --help for its options\n")
        print("\n".join(f"  {name:18} {module}" for name, module in COMMANDS.items()))
        return
    if argv[0] not in COMMANDS:
        sys.stderr.write(f"error: no command {argv[0]!r}; choose one of {', '.join(COMMANDS)}\n")
        raise SystemExit(2)
    sys.argv[0] = f"python -m snippets {argv[0]}"  # what --help and usage errors name
    command = importlib.import_module(COMMANDS[argv[0]]).main
    run_module(lambda: command(argv[1:]))


if __name__ == "__main__":
    main()
