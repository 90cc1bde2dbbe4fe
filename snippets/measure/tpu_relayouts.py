"""``python -m snippets tpu_relayouts``: the flagship's step compiled for a TPU v5p slice here
(libtpu, no TPU) in each shard mode, as stored and with fix 1 (:mod:`snippets.hlo.tpu_relayouts`):
the entry's copies, the head kernel's, the reduce-scatters, as JSON. ``--record`` writes
``snippets/hlo/tpu_relayouts_record.json`` too, which the flagship renders where libtpu is not installed.
"""

from __future__ import annotations

import json
from collections.abc import Sequence

from snippets.devices import setup_devices
from snippets.hlo.tpu_relayouts import RECORD, STEP, compile_runs, record
from snippets.support.cli import Parser, reported


def main(argv: Sequence[str] | None = None) -> None:
    """Compile and print the facts; with ``--record``, write them for the guide too."""
    parser = Parser(__doc__, json_help=None)
    parser.add_argument("--record", action="store_true", help=f"write {RECORD.name} too")
    args = parser.parse_args(argv)
    with reported(args.debug):
        setup_devices(STEP.devices)
        found = record(compile_runs())
    print(json.dumps(found, indent=1))
    if args.record:
        RECORD.write_text(json.dumps(found, indent=1) + "\n")
