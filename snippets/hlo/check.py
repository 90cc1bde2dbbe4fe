"""Check a real run: the transpose-of-dot sites of XLA's modules, without JAX.

``find-barriers PATH [PATH ...]`` reads XLA's ``before_optimizations`` dumps, a dump directory
(``--module PATTERN`` narrows its modules) or ``lowered.as_text(dialect="hlo")`` saved to a file.
Each site is ``blocked`` (XLA's simplifier would fold the transpose into its dot,
:mod:`snippets.hlo.fold`, but a ``Sharding`` call stands between), ``foldable`` or ``kept`` (XLA
keeps the transpose either way), with the user's line, the parameter and the fix.

Exit status: 1 when a blocked site is new (not in ``--baseline FILE``; ``--write-baseline FILE``
accepts every site it records), 2 on bad input (one ``error:`` line), else 0. ``--format``
chooses text, json (``report.SCHEMA``), github (workflow-command annotations) or sarif.
"""

from __future__ import annotations

from collections.abc import Sequence

from snippets.hlo import baseline, report, sites
from snippets.hlo.dumps import HOW_TO_GET_HLO, read_file, read_modules
from snippets.support.cli import Parser, reported

__all__ = ["HOW_TO_GET_HLO", "main", "read_file", "run"]
FORMATS = ("text", "json", "github", "sarif")


def run(
    paths: Sequence[str],
    output: str = "text",
    debug: bool = False,
    *,
    module: str | None = None,
    show_empty: bool = False,
    accepted: str | None = None,
    write_baseline: str | None = None,
) -> None:
    """Read every module, then print its sites in ``output``'s format; exit 1 when a site not
    in the ``accepted`` baseline is blocked, 2 (one ``error:`` line, nothing else) on bad input."""
    with reported(debug):
        modules = read_modules(paths, module)
        known = baseline.load(accepted) if accepted else None
        found = {m: [] if m.same_as else sites.find_sites(m.program) for m in modules}
        new = baseline.new_sites(found, known)
        if write_baseline:  # what it records is accepted from now on, this run included
            baseline.write(write_baseline, found)
            new = dict.fromkeys(new, False)
    status = int(any(new.values()))
    if output == "json":
        print(report.as_json(found, new, status))
    elif output == "github":
        if text := report.github(found, new):
            print(text)
    elif output == "sarif":
        print(report.sarif(found, new))
    else:  # a module without sites is listed when named as a file, or when asked
        listed = {m for m, in_module in found.items() if in_module or show_empty or m.path in paths}
        print(report.text(found, new, listed))
    if status:
        raise SystemExit(1)


def main(argv: Sequence[str] | None = None) -> None:
    """The console script ``find-barriers``: check each HLO text file or dump directory named."""
    parser = Parser(__doc__, json_help="the same as --format json")
    parser.add_argument("paths", nargs="+", metavar="PATH", help="HLO text files or dump folders")
    parser.add_argument("--module", metavar="PATTERN", help="in a folder, modules matching this")
    parser.add_argument(
        "--all-modules", action="store_true", help="list a folder's modules without sites too"
    )
    parser.add_argument("--format", choices=FORMATS, default="text", help="output format")
    parser.add_argument("--baseline", metavar="FILE", help="accept the blocked sites in FILE")
    parser.add_argument("--write-baseline", metavar="FILE", help="record today's blocked sites")
    args = parser.parse_args(argv)
    if args.json and args.format not in ("text", "json"):
        parser.error(f"--json is --format json: drop --json or --format {args.format}")
    run(
        args.paths,
        "json" if args.json else args.format,
        args.debug,
        module=args.module,
        show_empty=args.all_modules,
        accepted=args.baseline,
        write_baseline=args.write_baseline,
    )
