"""MaxText's own decoder on a simulated CPU mesh: its ``Sharding`` calls and transpose-of-dot sites.

``--causal`` adds whether the first ``algsimp`` folds each site on one device, ``--compiled`` each
parameter gradient's relayouts in the compiled module
(:func:`snippets.hlo.maxtext_decoder.decoder_report`).
"""

from __future__ import annotations

import json
from collections.abc import Sequence

from snippets.devices import MESH_DEVICES, SHARD_MODES, setup_devices
from snippets.hlo.maxtext_decoder import DecoderConfig, decoder_report
from snippets.lowering import MESH_AXES
from snippets.support.cli import Parser, positive_int, reported


def main(argv: Sequence[str] | None = None) -> None:
    """Print the report for the configuration the flags describe."""
    parser = Parser(__doc__)
    defaults = DecoderConfig()
    for size in ("emb", "vocab", "layers"):
        parser.add_argument(f"--{size}", type=positive_int, default=getattr(defaults, size))
    parser.add_argument("--scan", action="store_true", help="scan the layers (MaxText's default)")
    parser.add_argument("--mesh", choices=tuple(MESH_AXES), default=defaults.mesh)
    parser.add_argument("--causal", action="store_true", help="add the one-device causal control")
    parser.add_argument("--compiled", action="store_true", help="add each gradient's relayouts")
    args = parser.parse_args(argv)
    with reported(args.debug):
        config = DecoderConfig(**{name: getattr(args, name) for name in DecoderConfig.model_fields})
        setup_devices(MESH_DEVICES)
        report = decoder_report(config, causal=args.causal, compiled=args.compiled)
    if args.json:
        print(json.dumps(report, indent=2))
        return
    for mode in SHARD_MODES:
        run = report[mode]
        print(f"{mode}: {run['sharding_calls']} Sharding calls, {len(run['sites'])} sites")
        for site in run["sites"]:
            folded = f"  folded={site['folded']}" if "folded" in site else ""
            between = " -> ".join(["dot", *site["between"], "transpose"])
            print(f"  {' -> '.join(site['shapes'])}  {between}  {site['parameter'] or '-'}{folded}")
