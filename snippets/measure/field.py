"""``python -m snippets field``: the design doc's 25 configs compiled for a TPU v5p slice on this
machine (:mod:`snippets.hlo.field`), each config in both shard modes, and find-barriers on the
CPU dump of its explicit step; written as JSON with the versions and date it was made with.
``nox -s field`` runs it (libtpu installed; minutes a config) and writes ``snippets/hlo/field_record.json``.
"""

from __future__ import annotations

import datetime
import json
from collections.abc import Sequence
from importlib.metadata import version
from pathlib import Path

from find_barriers import measured_copy_bytes
from snippets.hlo.compiled import entry_copies, reduce_scatters, relayout_traffic
from snippets.hlo.field import (
    RECORD,
    TOPOLOGY,
    compile_config,
    field_configs,
    find_barriers_facts,
    kept_dump,
    overrides,
)
from snippets.support.cli import Parser


def config_facts(config: dict, keep: Path | None = None) -> dict:
    """One config compiled for ``v5p-8`` in each mode, and find-barriers on its CPU dump; with
    ``keep``, the dumps written there (``keep/NAME``)."""
    folder = keep / config["name"] if keep else None
    modes = {mode: compile_config(config, mode, keep=folder) for mode in ("explicit", "auto")}
    facts = {
        mode: mode_facts(found["after"], found["optimal_seconds"]) for mode, found in modes.items()
    }
    cpu = compile_config(config, "explicit", cpu=True, keep=folder)
    checked = find_barriers_facts(cpu["before"])
    return facts | {"find_barriers": checked, "cpu_compile_error": cpu["cpu_compile_error"]}


def mode_facts(compiled: str, optimal_seconds: float | None) -> dict:
    """What one mode's compiled step spends: its entry copies, all and those of parameters (their
    bytes read and written), its reduce-scatters and XLA's ``optimal_seconds``."""
    return {
        "copies": len(entry_copies(compiled)),
        "copy_traffic": measured_copy_bytes(compiled),
        "relayout_traffic": relayout_traffic(compiled),
        "reduce_scatters": reduce_scatters(compiled),
        "optimal_seconds": optimal_seconds,
    }


def main(argv: Sequence[str] | None = None) -> None:
    """Compile the configs asked for (all by default) and write the field's JSON."""
    parser = Parser(__doc__, json_help=None)
    parser.add_argument("--configs", nargs="*", metavar="NAME", help="only these configs")
    parser.add_argument("--out", type=Path, default=RECORD, help=f"where to write ({RECORD.name})")
    parser.add_argument("--keep", type=Path, help="a folder to keep each config's dumps in")
    parser.add_argument(
        "--resume", action="store_true", help="keep the configs --out already holds, made alike"
    )
    parser.add_argument(
        "--reread",
        action="store_true",
        help="with --resume and --keep, read each config's facts anew from its kept dumps",
    )
    args = parser.parse_args(argv)
    configs = field_configs()["config"]
    names = [config["name"] for config in configs]
    if unknown := sorted(set(args.configs or ()) - set(names)):
        parser.error(f"no config {', '.join(unknown)}; the configs are {', '.join(names)}")
    chosen = [config for config in configs if not args.configs or config["name"] in args.configs]
    record = {
        "topology": TOPOLOGY,
        "made": datetime.date.today().isoformat(),
        "versions": {name: version(name) for name in ("maxtext", "jax", "jaxlib", "libtpu")},
        "source": field_configs()["source"]["doc_url"],
        "shrink": field_configs()["source"]["shrink"],
        "configs": [],
    }
    compiled: dict[tuple, dict] = {}  # a config the doc ran twice is compiled once
    if args.resume and args.out.exists():
        done = json.loads(args.out.read_text())
        if done["versions"] == record["versions"] and done["shrink"] == record["shrink"]:
            by_name = {config["name"]: config for config in configs}
            for row in done["configs"]:
                key = tuple(overrides(by_name[row["name"]]))
                if key in compiled:  # compiled once, kept under the first name
                    continue
                kept = {name: value for name, value in row.items() if name != "name"}
                if args.reread and args.keep:
                    folder = args.keep / row["name"]
                    for mode in ("explicit", "auto"):
                        after = kept_dump(folder, f"tpu_{mode}_after")
                        kept[mode] = mode_facts(after, kept[mode]["optimal_seconds"])
                    kept["find_barriers"] = find_barriers_facts(
                        kept_dump(folder, "cpu_explicit_before")
                    )
                compiled[key] = kept
    for config in chosen:
        key = tuple(overrides(config))
        if key not in compiled:
            compiled[key] = config_facts(config, args.keep)
        record["configs"].append({"name": config["name"], **compiled[key]})
        args.out.write_text(json.dumps(record, indent=1) + "\n")  # each config kept as it comes
        print(f"{config['name']}: {json.dumps(compiled[key])}", flush=True)
