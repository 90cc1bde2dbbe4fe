"""Check a real run: the transpose-of-dot sites of HLO text files, without JAX.

``find-barriers FILE [FILE ...] [--json]`` (or ``python -m snippets.measure.barrier_check``, or
``python -m snippets.barrier --hlo FILE ...``) reads XLA's ``before_optimizations`` dumps or
``lowered.as_text(dialect="hlo")`` saved to a file. Exit status, as linters do: 0 when no site
has a ``Sharding`` call between its dot and transpose, 1 when one has, 2 on bad input.
"""

from __future__ import annotations

import dataclasses
import json
import os
import re
from collections.abc import Sequence
from pathlib import Path

from snippets.measure import hlo
from snippets.support.cli import Parser, reported, run_module

HOW_TO_GET_HLO = (
    "pass HLO text: XLA's module_*.before_optimizations.txt from "
    "XLA_FLAGS='--xla_dump_to=DIR --xla_dump_hlo_as_text', or lowered.as_text(dialect=\"hlo\")"
)
_MLIR = re.compile(
    r"^\s*(module\b|func\.func\b|#loc\d* = |%\S+ = \"?(stablehlo|sdy|func)\.)", re.MULTILINE
)


def read_file(path: str) -> hlo.Program:
    """One HLO text file, read; a ValueError says what is wrong with it and what to pass."""
    file = Path(path)
    if not file.exists():
        raise ValueError(f"{path}: no such file")
    if file.is_dir():
        raise ValueError(f"{path}: a directory; pass the module_*.before_optimizations.txt in it")
    data = file.read_bytes()
    if not data.strip():
        raise ValueError(f"{path}: the file is empty; {HOW_TO_GET_HLO}")
    try:
        text = data.decode()
    except UnicodeDecodeError:
        text = "\0"  # not text at all
    if "\0" in text:
        raise ValueError(f"{path}: a binary file (an HloProto .pb dump?); {HOW_TO_GET_HLO}")
    if _MLIR.search(text, 0, 100_000):
        raise ValueError(f"{path}: StableHLO/MLIR text, not HLO; {HOW_TO_GET_HLO}")
    try:
        program = hlo.read_hlo(text)
    except ValueError as error:
        raise ValueError(f"{path}: {error}; is the file cut off?") from None
    if not program.computations:
        raise ValueError(f"{path}: no HLO instruction in it; {HOW_TO_GET_HLO}")
    if text.rstrip().rsplit("\n", 1)[-1].strip() != "}":
        raise ValueError(f"{path}: cut off, it ends inside a computation; dump it again")
    if not program.entry:
        raise ValueError(f"{path}: no ENTRY computation, so no whole module; {HOW_TO_GET_HLO}")
    return program


def readable(source: str | None) -> str | None:
    """A source path as a reader finds it: from the package in site-packages, or from here."""
    if source is None or "site-packages/" in source:
        return source and source.rpartition("site-packages/")[2]
    relative = os.path.relpath(source, os.getcwd())
    return source if relative.startswith("..") else relative


def site_line(site: hlo.TransposeSite) -> str:
    """One site on one line: kind, chain, the output it reaches, loop trips, source, op name."""
    output = "no output" if site.output is None else f"output {site.output}"
    trips = "" if site.trips == 1 else f"  x{site.trips or '?'} per run (in a loop)"
    where = "  ".join(filter(None, [readable(site.source), site.op_name]))
    return f"  {site.kind:<9} {site.chain}  {output}{trips}  {where}".rstrip()


def run(paths: Sequence[str], as_json: bool = False, debug: bool = False) -> None:
    """Read every file, then print each one's sites; exit 1 when one has a ``Sharding`` call
    between (a fold explicit mode blocks), 2 (one ``error:`` line, nothing else) on bad input."""
    with reported(debug):
        found = {path: hlo.find_sites(read_file(path)) for path in paths}
    barriers = {
        path: sum(site.kind == "barrier" for site in sites) for path, sites in found.items()
    }
    if as_json:
        records = [
            {"file": path, "barriers": barriers[path], "sites": [record(site) for site in sites]}
            for path, sites in found.items()
        ]
        print(json.dumps(records, indent=2))
    else:
        for path, sites in found.items():
            plural = "" if len(sites) == 1 else "s"
            between = f"{barriers[path]} with a Sharding call between"
            print(f"{path}: {len(sites)} transpose-of-dot site{plural}, {between}")
            for site in sites:
                print(site_line(site))
    if any(barriers.values()):
        raise SystemExit(1)


def record(site: hlo.TransposeSite) -> dict:
    """A site as JSON data: its fields, ``blocked`` (anything between), its source readable."""
    return dataclasses.asdict(site) | {"blocked": site.blocked, "source": readable(site.source)}


def main(argv: Sequence[str] | None = None) -> None:
    """The console script ``find-barriers``: check each HLO text file named."""
    parser = Parser(__doc__)
    parser.add_argument("files", nargs="+", metavar="FILE", help="HLO text files")
    parser.add_argument("--json", action="store_true", help="print JSON records instead of text")
    args = parser.parse_args(argv)
    run(args.files, args.json, args.debug)


if __name__ == "__main__":
    run_module(main)
