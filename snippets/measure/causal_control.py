"""The causal control, every mode and variant: is each weight gradient written in kernel order?

One device, ``sharding-remover`` off, CPU only (:func:`snippets.hlo.causal_control.causal_control`).
"""

from __future__ import annotations

import json
from collections.abc import Sequence

from snippets.devices import setup_devices
from snippets.hlo.causal_control import causal_control
from snippets.lowering import StepConfig
from snippets.support.cli import Parser, reported
from snippets.support.tables import markdown_table


def main(argv: Sequence[str] | None = None) -> None:
    """Print the causal control for every mode and variant."""
    parser = Parser(__doc__)
    args = parser.parse_args(argv)
    with reported(args.debug):
        setup_devices(1)
        rows = causal_control(StepConfig())
    print(json.dumps(rows, indent=2) if args.json else markdown_table(rows))
