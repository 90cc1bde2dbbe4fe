"""The mutation score of the last ``mutmut run``, per module: ``python tests/mutation_score.py``.

Reads mutmut's results in ``mutants/`` (run it from ``find-barriers/``, as ``nox -s mutation``
does) and prints, for each module, the mutants the tests killed out of those mutmut made, and the
survivors that ``tests/equivalent_mutants.txt`` does not list as equivalent (``--survivors``
names each). A timeout counts as a kill: the mutant made the tests hang. Exits 1 when a listed
equivalent mutant is no longer one mutmut made, or the tests kill it (an edit renumbered the
mutants, or a test now tells it apart), so the list cannot go stale.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

MUTANTS = Path("mutants")
EQUIVALENT = Path(__file__).with_name("equivalent_mutants.txt")
KILLED = {1, 3, 36, 24, -24, 152, 255, 37, -11, -9}
"""mutmut's exit codes for a mutant the tests caught: a failure, an internal error, a timeout, a
type-check failure, a crash (mutmut's own ``status_by_exit_code``)."""
SURVIVED = 0


def equivalent_mutants(path: Path = EQUIVALENT) -> set[str]:
    """The mutant names that open each line of ``path``, but comments and blank lines."""
    if not path.exists():
        return set()
    lines = (line.split("#", 1)[0].strip() for line in path.read_text().splitlines())
    return {line.split()[0].rstrip(":") for line in lines if line}


def results(mutants: Path = MUTANTS) -> dict[str, dict[str, int | None]]:
    """Each mutated module's mutants, name to exit code, from mutmut's ``.meta`` files."""
    modules = {}
    for meta in sorted(mutants.rglob("*.py.meta")):
        name = meta.relative_to(mutants).as_posix().removesuffix(".py.meta")
        name = name.removeprefix("src/").replace("/", ".")
        modules[name] = json.loads(meta.read_text())["exit_code_by_key"]
    return modules


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--survivors", action="store_true", help="name each survivor")
    options = parser.parse_args(argv)
    modules = results()
    if not modules:
        print(f"no mutmut results in {MUTANTS.resolve()}: run mutmut first", file=sys.stderr)
        return 2
    equivalent = equivalent_mutants()
    made = {name for codes in modules.values() for name in codes}
    rows, totals, survivors, pending = [], [0, 0, 0, 0], [], 0
    untested_by_module: dict[str, int] = {}
    for module, codes in modules.items():
        killed = sum(code in KILLED for code in codes.values())
        same = sum(name in equivalent and code not in KILLED for name, code in codes.items())
        untested_by_module[module] = sum(code is None for code in codes.values())
        pending += untested_by_module[module]
        survivors += [n for n, c in codes.items() if c is not None and c not in KILLED]
        counts = (killed, len(codes), same, len(codes) - same)
        totals = [t + c for t, c in zip(totals, counts, strict=False)]
        rows.append((module, *counts))
    rows.append(("total", *totals))
    untested_by_module["total"] = pending
    width = max(len(row[0]) for row in rows)
    print(f"{'module':<{width}}  killed/total      %  equivalent  score without them")
    for module, killed, total, same, rest in rows:
        raw = 100 * killed / total if total else 100.0
        score = 100 * killed / rest if rest else 100.0
        untested = untested_by_module.get(module, 0)
        print(
            f"{module:<{width}}  {killed:>5}/{total:<5}  {raw:5.1f}  {same:>10}  "
            f"{killed:>5}/{rest:<5} {score:5.1f}%"
            + (f"  ({untested} not yet tested)" if untested else "")
        )
    survivors = sorted(set(survivors) - equivalent)
    print(f"{len(survivors)} survivors not listed as equivalent, {pending} mutants not yet tested")
    if options.survivors:
        print("\n".join(survivors))
    killed = {name for codes in modules.values() for name, code in codes.items() if code in KILLED}
    stale = [
        f"listed as equivalent but {why}: {', '.join(names)}"
        for why, names in (
            ("not made by mutmut", sorted(equivalent - made)),
            ("killed by the tests", sorted(equivalent & killed)),
        )
        if names
    ]
    if stale:
        print("\n".join(stale), file=sys.stderr)
    return 1 if stale else 0


if __name__ == "__main__":
    sys.exit(main())
