"""The command line: ``find-barriers PATH [PATH ...]`` reads XLA's ``before_optimizations`` dumps
(a dump directory, or files) and lists each transpose a dot feeds, at the user's line, failing
on the folds a ``Sharding`` call blocks."""

from __future__ import annotations

import argparse
import os
import sys
import traceback
from collections.abc import Sequence
from typing import NoReturn

from find_barriers import __version__
from find_barriers import _baseline as baseline
from find_barriers._check import check
from find_barriers._dumps import HOW_TO_GET_HLO
from find_barriers._formats import FORMATS, Options
from find_barriers._rules import RULES, parse_codes

PIPE_CLOSED = 141
"""The exit status when the output's reader went away (``| head``): 128 + SIGPIPE, as shells say."""
EPILOG = f"""exit status:
  0    no new blocked site (one estimated under --min-bytes, as FB005, is listed, not failed)
  1    new blocked sites: a Sharding call blocks a fold XLA's simplifier would make, or pins a
       weight gradient's layout on TPU (or, with --strict-baseline, a stale baseline entry)
  2    an error: bad input or options, an unsupported Python, or find-barriers itself failed
  {PIPE_CLOSED}  the output's reader went away (| head)

rules:
{chr(10).join(f"  {rule.code}  {rule.name}: {rule.summary}" for rule in RULES.values())}

A blocked weight gradient's cost is an estimate, in bytes a step and device, by the mechanisms
MaxText's design doc measured on TPU: relayout copies (its 4.3), a lost reduce-scatter (4.2).
One the estimate prices at nothing is FB005, which passes unless --min-bytes is 0.

example:
  XLA_FLAGS="--xla_dump_to=dump --xla_dump_hlo_as_text" python train.py
  find-barriers dump --module jit_train_step --baseline barriers.json
"""


class Parser(argparse.ArgumentParser):
    """An argument parser whose usage errors are one ``error:`` line and exit status 2."""

    def error(self, message: str) -> NoReturn:
        """Print one line naming the bad argument, then exit with status 2."""
        self.exit(2, f"error: {message} (see --help)\n")  # pragma: no mutate


def parser() -> Parser:
    """The command line's options."""
    found = Parser(
        prog="find-barriers",
        description=f"{__doc__.split(':', 1)[1].strip()} {HOW_TO_GET_HLO}.",  # pragma: no mutate
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    add = found.add_argument
    add(
        "paths",
        nargs="+",
        metavar="PATH",  # pragma: no mutate
        help="HLO text files or XLA dump directories",  # pragma: no mutate
    )
    add(
        "--module",
        metavar="REGEX",  # pragma: no mutate
        help="check only the modules whose XLA name matches",  # pragma: no mutate
    )
    add(
        "--format",
        choices=list(FORMATS),
        default="text",
        help="output format (default: text)",  # pragma: no mutate
    )
    add(
        "--baseline",
        metavar="FILE",  # pragma: no mutate
        help="accept the blocked sites recorded in FILE",  # pragma: no mutate
    )
    add(
        "--write-baseline",
        metavar="FILE",  # pragma: no mutate
        help="record today's blocked sites in FILE",  # pragma: no mutate
    )
    add(
        "--strict-baseline",
        action="store_true",
        help="fail on a stale baseline entry too",  # pragma: no mutate
    )
    add(
        "--min-bytes",
        type=nonnegative,
        default=1,
        metavar="N",  # pragma: no mutate
        help="fail on a blocked weight gradient only if its estimated cost is N bytes a step or "  # pragma: no mutate
        "more (default 1: any cost; 0: every one, FB005 too)",  # pragma: no mutate
    )
    add(
        "--ignore",
        action="append",
        default=[],
        metavar="RULE",  # pragma: no mutate
        help="ignore a rule (FB003)",  # pragma: no mutate
    )
    add(
        "--exit-zero",
        action="store_true",
        help="exit 0 even when new blocked sites are found",  # pragma: no mutate
    )
    add(
        "-v",
        "--verbose",
        action="store_true",
        help="list every site, blocked or not",  # pragma: no mutate
    )
    add(
        "-q",
        "--quiet",
        action="store_true",
        help="print the new blocked sites only, one a line",  # pragma: no mutate
    )
    add(
        "--all-modules",
        action="store_true",
        help="with --verbose, list modules without sites",  # pragma: no mutate
    )
    add(
        "--path-map",
        action="append",
        default=[],
        type=path_pair,
        metavar="RECORDED=LOCAL",  # pragma: no mutate
        help="read recorded paths under RECORDED as under LOCAL (a dump made elsewhere)",  # pragma: no mutate
    )
    add(
        "--debug",
        action="store_true",
        help="print the traceback of an error",  # pragma: no mutate
    )
    add(
        "--version",
        action="version",
        version=f"find-barriers {__version__}",  # pragma: no mutate
    )
    return found


def nonnegative(text: str) -> int:
    """``--min-bytes N`` as a whole number of bytes; an argparse error where it is not one."""
    if not (text.isascii() and text.isdigit()):
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number of bytes")
    return int(text)


def path_pair(text: str) -> tuple[str, str]:
    """``--path-map RECORDED=LOCAL`` as a pair; an argparse error where it is not one."""
    recorded, equals, local = text.partition("=")
    if not (recorded and equals and local):
        raise argparse.ArgumentTypeError(f"{text!r} is not RECORDED=LOCAL (two paths)")
    return recorded, local


def run(args: argparse.Namespace) -> int:
    """Check the modules ``args`` names, print the report and return the exit status."""
    ignored = frozenset(code for text in args.ignore for code in parse_codes(text))
    result = check(args.paths, args.module, args.baseline, ignored, args.path_map, args.min_bytes)
    if args.write_baseline:  # what it records is accepted from now on, this run included
        blocked = [(i.module, site) for i in result.modules for site in i.sites if site.blocked]
        baseline.write(args.write_baseline, blocked)
        result = result.accepting_all(args.write_baseline)
    failing = any(item.new for item in result.modules)
    failing |= bool(args.strict_baseline and result.stale)
    status = int(failing and not args.exit_zero)
    # --verbose lists a module without sites when named as a file, or when asked
    listed = (item.module.path for item in result.modules if item.findings or args.all_modules)
    shown = frozenset({*listed, *args.paths})
    options = Options(status, args.strict_baseline, args.quiet, args.verbose, shown)
    output = FORMATS[args.format](result, options)
    if output:
        print(output)
    return status


def main(argv: Sequence[str] | None = None) -> NoReturn:
    """``find-barriers``: exit 0, 1 or 2 as ``--help`` says; a traceback only with ``--debug``."""
    args = parser().parse_args(argv)
    try:
        status = run(args)
        sys.stdout.flush()
    except BrokenPipeError:
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())  # quiet at exit too
        raise SystemExit(PIPE_CLOSED) from None
    except KeyboardInterrupt:
        raise SystemExit(130) from None
    except Exception as error:  # noqa: BLE001 - every failure is exit status 2, never 1
        if args.debug:
            traceback.print_exc()
        elif isinstance(error, (ValueError, OSError)):  # bad input: the message names it
            sys.stderr.write(f"error: {' '.join(str(error).split())}\n")  # pragma: no mutate
        else:
            sys.stderr.write(
                f"error: find-barriers {__version__} failed ({type(error).__name__}: {error}); "
                "rerun with --debug for the traceback, and report it\n"  # pragma: no mutate
            )
        raise SystemExit(2) from None
    raise SystemExit(status)
