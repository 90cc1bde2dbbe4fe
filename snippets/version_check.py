"""Does the story hold on this JAX? The guides' key facts, measured on the installed release.

``python -m snippets.version_check [--json]`` runs the barrier report, the causal
control, the 2x2 reduce-scatter walkthrough and the LM-head orientation report, and keeps only
the facts the guides' argument rests on. ``nox -s matrix`` runs it on several
JAX releases and records the results for the site's version-matrix page. A
check that fails on a release is recorded with its error instead of its facts.
"""

from __future__ import annotations

import datetime
import importlib.metadata
import json
import platform
import traceback
from collections.abc import Callable, Sequence

from snippets.cli import Parser, reported, run_module

DEVICES = 4
"""Simulated devices for the barrier report, as in the shard-mode guide."""


def pick(report: dict, *keys: str) -> dict:
    """The entries of ``report`` named ``keys``, in that order."""
    return {key: report[key] for key in keys}


def barrier_facts() -> dict:
    """Per (mode x variant): Sharding calls, barrier sites, compiled transposes; the pass order."""
    from snippets.barrier import barrier_report
    from snippets.lowering import StepConfig

    report = barrier_report(StepConfig(devices=DEVICES))
    runs = [
        pick(run, "mode", "variant", "sharding_calls", "barrier_sites")
        | {
            "compiled_transposes": len(run["compiled_transposes"]),
            "relayout_copies": len(run["relayout_copies"]),
            "collectives": sorted({op["kind"] for op in run["collectives"]}),
        }
        for run in report["runs"]
    ]
    return {
        "backend": report["backend"],
        "runs": runs,
        "partitioner_first": report["pass_order"]["partitioner_first"],
        "single_device_folded": report["single_device_folded"],
    }


def causal_control_facts() -> dict:
    """The one-device control with sharding-remover off: is each gradient written in kernel order?"""
    from snippets.causal_control import causal_control
    from snippets.lowering import StepConfig

    keys = ("mode", "variant", "gradient_in_kernel_order", "gradient_transposes")
    return {"runs": [pick(row, *keys) for row in causal_control(StepConfig())]}


def reduce_scatter_facts() -> dict:
    """The lesson's 2x2 exchange: each rank's finished rows and the bytes each rank sends."""
    from snippets.reduce_scatter import walkthrough

    report = walkthrough(ranks=2, explicit=False)
    return pick(report, "shards", "reference_equal", "bytes_per_rank", "hlo_bytes_per_rank")


def explicit_mode_facts() -> dict:
    """The 2x2 exchange in explicit mode (``unreduced`` partials, ``reshard``): what each compiles to.

    Recorded, not part of the story's checks.
    """
    from snippets.exchange import (
        SEED_A,
        SEED_B,
        contraction_mesh,
        explicit_mode,
        split_contraction,
    )

    mesh = contraction_mesh(2)
    report = explicit_mode(*split_contraction(SEED_A, SEED_B, mesh), mesh)
    return pick(report, "resharded", "compiled_collectives")


def lm_head_facts() -> dict:
    """Both kernel orientations: same seed, same matrix; outputs equal up to rounding."""
    from snippets.lm_head import orientation_report

    return {k: v for k, v in orientation_report().items() if k not in ("EV", "VE")}


def maxtext_facts() -> dict:
    """MaxText's decoder (``snippets.maxtext_decoder``'s defaults): calls, sites and folds per mode.

    MaxText 0.2.5 needs JAX 0.11.1 or newer; on an older release this says so.
    """
    import jax

    if tuple(int(p) for p in jax.__version__.split(".")[:3]) < (0, 11, 1):
        raise RuntimeError(f"MaxText 0.2.5 needs JAX 0.11.1 or newer, not {jax.__version__}")
    from snippets.maxtext_decoder import DecoderConfig, decoder_report, what_it_is

    report = decoder_report(DecoderConfig(), causal=True)
    facts: dict = {"maxtext": report["maxtext"]}
    for mode in ("explicit", "auto"):
        sites = report[mode]["sites"]
        facts[f"{mode} sharding_calls"] = report[mode]["sharding_calls"]
        facts[f"{mode} sites"] = len(sites)
        facts[f"{mode} sites with Sharding between"] = sum(
            "Sharding" in s["between"] for s in sites
        )
        facts[f"{mode} folded"] = sorted({what_it_is(s) for s in sites if s["folded"]})
    return facts


CHECKS: dict[str, Callable[[], dict]] = {
    "barrier": barrier_facts,
    "causal_control": causal_control_facts,
    "reduce_scatter": reduce_scatter_facts,
    "reduce_scatter_explicit_mode": explicit_mode_facts,
    "lm_head": lm_head_facts,
    "maxtext": maxtext_facts,
}


STORY_CHECKS = ("barrier", "causal_control", "reduce_scatter", "lm_head")
"""The checks the guides' argument rests on; the others record what a release can do."""
STORY_RUNS = {
    "barrier": ("barrier_sites", 1, 0),
    "causal_control": ("gradient_in_kernel_order", False, True),
}
"""Per check, the fact each run must show: its value on explicit/EV, and on every other run."""


def run_checks() -> dict:
    """Every check's facts, or the error that stopped it, with the versions and the date."""
    results: dict[str, dict] = {}
    for name, check in CHECKS.items():
        try:
            results[name] = check()
        except Exception as error:  # noqa: BLE001 (a release that cannot run a check gets a row saying why)
            last = traceback.format_exception_only(error)[-1].strip()
            results[name] = {"error": last}
    versions = {name: importlib.metadata.version(name) for name in ("jax", "jaxlib", "flax")}
    return {
        "versions": {"python": platform.python_version(), **versions},
        "date": datetime.date.today().isoformat(),
        "results": results,
    }


def story_breaks(record: dict) -> list[str]:
    """What in one release's record contradicts the guides' argument (empty: the story holds).

    The argument: explicit mode leaves one barrier between the weight-gradient dot
    and its transpose on the EV head, auto mode and every fix leave none; with the
    calls kept and the simplifier first (the causal control) only explicit/EV's
    gradient stays transposed; on CPU the partitioner runs before the first
    simplifier pass; the 2x2 exchange gives each rank its finished rows.

    >>> story_breaks({"error": "ImportError: no jax"})
    ['did not run: ImportError: no jax']
    """
    if "error" in record:
        return [f"did not run: {record['error']}"]
    results = record["results"]
    breaks = [
        f"{name} failed: {results[name]['error']}"
        for name in STORY_CHECKS
        if "error" in results.get(name, {})
    ]
    for check, (fact, explicit_ev, others) in STORY_RUNS.items():
        for run in results.get(check, {}).get("runs", []):
            expected = (
                explicit_ev if (run["mode"], run["variant"]) == ("explicit", "EV") else others
            )
            if run[fact] != expected:
                breaks.append(
                    f"{check}: {run['mode']}/{run['variant']} {fact} is {run[fact]}, "
                    f"the story says {expected}"
                )
    if results.get("barrier", {}).get("partitioner_first") is False:
        breaks.append("on CPU the simplifier now runs before the partitioner")
    shards = results.get("reduce_scatter", {}).get("shards")
    if shards is not None and shards != [[[19.0, 22.0]], [[43.0, 50.0]]]:
        breaks.append(f"the 2x2 reduce-scatter gives {shards}")
    return breaks


def flat_facts(record: dict) -> dict[str, object]:
    """One release's facts as ``{"check: fact": value}``, barrier runs spelled out per mode/variant."""
    if "error" in record:
        return {"run": f"failed: {record['error']}"}
    facts: dict[str, object] = {}
    for check, result in record["results"].items():
        for key, value in result.items():
            if key != "runs":
                facts[f"{check}: {key}"] = value
        for run in result.get("runs", []):
            for key, value in run.items():
                if key not in ("mode", "variant"):
                    facts[f"{check}: {run['mode']}/{run['variant']} {key}"] = value
    return facts


def release_label(record: dict) -> str:
    """A column title: the JAX release and the Python it ran on."""
    v = record["versions"]
    return f"jax {v['jax']} (Python {v['python']})"


def matrix_rows(matrix: dict) -> list[dict[str, object]]:
    """One row per fact, one column per release, and whether every release agrees.

    >>> record = {"versions": {"jax": "1", "python": "3"}, "results": {"c": {"x": 1}}}
    >>> other = {"versions": {"jax": "2", "python": "3"}, "results": {"c": {"x": 2}}}
    >>> matrix_rows({"releases": [record, other]})
    [{'fact': 'c: x', 'jax 1 (Python 3)': 1, 'jax 2 (Python 3)': 2, 'same everywhere': False}]
    """
    columns = {release_label(record): flat_facts(record) for record in matrix["releases"]}
    rows = []
    for name in dict.fromkeys(name for facts in columns.values() for name in facts):
        values = {label: facts.get(name, "(not measured)") for label, facts in columns.items()}
        first = next(iter(values.values()))
        same = all(value == first for value in values.values())
        rows.append({"fact": name, **values, "same everywhere": same})
    return rows


def main(argv: Sequence[str] | None = None) -> None:
    """Print the facts for the installed JAX."""
    parser = Parser(__doc__)
    parser.add_argument("--json", action="store_true", help="print JSON instead of text")
    args = parser.parse_args(argv)
    from snippets.devices import setup_devices  # after parsing: a usage error needs no JAX

    with reported(args.debug):
        setup_devices(DEVICES)
    record = run_checks()
    if args.json:
        print(json.dumps(record, indent=2))
        return
    print(", ".join(f"{name} {version}" for name, version in record["versions"].items()))
    for name, facts in record["results"].items():
        print(f"{name}: {json.dumps(facts)}")


if __name__ == "__main__":
    run_module(main)
