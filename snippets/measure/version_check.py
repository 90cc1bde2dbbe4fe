"""Does the story hold on this JAX? The guides' key facts, measured on the installed release.

``python -m snippets.version_check [--json]``; ``nox -s matrix`` runs it on several releases
for the version-matrix page. A check that fails on a release records its error instead; the
command exits 1 when the facts contradict the guides' story.
"""

from __future__ import annotations

import datetime
import importlib.metadata
import platform
import sys
import traceback
from collections.abc import Callable, Sequence

from snippets.support.cli import Parser, reported
from snippets.support.tables import print_report


def barrier_facts() -> dict:
    """Per (mode x variant): Sharding calls, barrier sites, compiled transposes; the pass order."""
    from snippets.lowering import StepConfig
    from snippets.measure.barrier import barrier_report

    report = barrier_report(StepConfig())
    runs = [
        {key: run[key] for key in ("mode", "variant", "sharding_calls", "barrier_sites")}
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
    from snippets.lowering import StepConfig
    from snippets.measure.causal_control import causal_control

    keys = ("mode", "variant", "gradient_in_kernel_order", "gradient_transposes")
    return {"runs": [{key: row[key] for key in keys} for row in causal_control(StepConfig())]}


def reduce_scatter_facts() -> dict:
    """The lesson's 2x2 exchange: each rank's finished rows and the bytes each rank sends."""
    from snippets.measure.reduce_scatter import walkthrough

    report = walkthrough(ranks=2, explicit=False)
    keys = ("shards", "reference_equal", "bytes_per_rank", "hlo_bytes_per_rank")
    return {key: report[key] for key in keys}


def explicit_mode_facts() -> dict:
    """The 2x2 exchange in explicit mode (``unreduced`` partials, ``reshard``), not in the story."""
    from snippets.exchange import SEED_A, SEED_B, contraction_mesh, split_contraction
    from snippets.measure.reduce_scatter import explicit_mode

    mesh = contraction_mesh(2)
    report = explicit_mode(*split_contraction(SEED_A, SEED_B, mesh), mesh)
    return {key: report[key] for key in ("resharded", "compiled_collectives")}


def lm_head_facts() -> dict:
    """Both kernel orientations: same seed, same matrix; outputs equal up to rounding."""
    from snippets.lm_head import orientation_report

    return {k: v for k, v in orientation_report().items() if k not in ("EV", "VE")}


def vocab_parallel_facts() -> dict:
    """The head's collective bytes per device, default and vocab-parallel, on a 4-way fsdp mesh
    with a vocab 64 times the tokens; and whether the rotated kernel's gradient needs one."""
    from snippets.lowering import StepConfig
    from snippets.measure.head_traffic import head_traffic

    wide = StepConfig(mesh="fsdp", emb=64, vocab=8192, batch=8, seq=16)
    traffic = head_traffic(wide, ("EV", "vocab-parallel"))
    facts: dict = {}
    for mode, by_variant in traffic.items():
        facts |= {f"{mode} {v} bytes": found["bytes"] for v, found in by_variant.items()}
        gradient = by_variant["vocab-parallel"]["weight_gradient_collectives"]
        facts[f"{mode} vocab-parallel weight-gradient collectives"] = len(gradient)
    return facts


def capability_facts() -> dict:
    """What each mode allows (:mod:`snippets.measure.modes`): every check's outcome, per mode."""
    from snippets.measure.modes import report

    return report()


def maxtext_facts() -> dict:
    """MaxText's decoder (``snippets.measure.maxtext_decoder``'s defaults): calls, sites, folds per mode."""
    from snippets.measure.maxtext_decoder import DecoderConfig, decoder_report, what_it_is

    report = decoder_report(DecoderConfig(), causal=True)
    facts: dict = {"maxtext": report["maxtext"]}
    for mode in ("explicit", "auto"):
        sites = report[mode]["sites"]
        facts[f"{mode} sharding_calls"] = report[mode]["sharding_calls"]
        facts[f"{mode} sites"] = len(sites)
        blocked = sum("Sharding" in s["between"] for s in sites)
        facts[f"{mode} sites with Sharding between"] = blocked
        facts[f"{mode} folded"] = sorted({what_it_is(s) for s in sites if s["folded"]})
    return facts


CHECKS: dict[str, Callable[[], dict]] = {
    "barrier": barrier_facts,
    "causal_control": causal_control_facts,
    "reduce_scatter": reduce_scatter_facts,
    "reduce_scatter_explicit_mode": explicit_mode_facts,
    "lm_head": lm_head_facts,
    "vocab_parallel": vocab_parallel_facts,
    "capabilities": capability_facts,
    "maxtext": maxtext_facts,
}


STORY_CHECKS = ("barrier", "causal_control", "reduce_scatter", "lm_head", "vocab_parallel")
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
            results[name] = {"error": traceback.format_exception_only(error)[-1].strip()}
    versions = {name: importlib.metadata.version(name) for name in ("jax", "jaxlib", "flax")}
    return {
        "versions": {"python": platform.python_version(), **versions},
        "date": datetime.date.today().isoformat(),
        "results": results,
    }


def story_breaks(record: dict) -> list[str]:
    """What in one release's record contradicts the guides' argument (empty: the story holds)."""
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
            where = f"{run['mode']}/{run['variant']}"
            expected = explicit_ev if where == "explicit/EV" else others
            if run[fact] != expected:
                breaks.append(f"{check}: {where} {fact} is {run[fact]}, the story says {expected}")
    if results.get("barrier", {}).get("partitioner_first") is False:
        breaks.append("on CPU the simplifier now runs before the partitioner")
    rotated = results.get("vocab_parallel", {})
    for mode in ("explicit", "auto"):
        if rotated.get(f"{mode} vocab-parallel bytes", 0) >= rotated.get(f"{mode} EV bytes", 1):
            breaks.append(f"vocab_parallel: in {mode} mode the rotated head moves no fewer bytes")
    shards = results.get("reduce_scatter", {}).get("shards")
    if shards is not None and shards != [[[19.0, 22.0]], [[43.0, 50.0]]]:
        breaks.append(f"the 2x2 reduce-scatter gives {shards}")
    return breaks


def flat_facts(record: dict) -> dict[str, object]:
    """One release's facts as ``{"check: fact": value}``: barrier runs spelled out per
    mode/variant, a fact per mode (the capabilities) per mode."""
    if "error" in record:
        return {"run": f"failed: {record['error']}"}
    facts: dict[str, object] = {}
    for check, result in record["results"].items():
        for key, value in result.items():
            nested = value.items() if isinstance(value, dict) else [("", value)]
            facts |= {f"{check}: {key} {inner}".rstrip(): v for inner, v in nested if key != "runs"}
        for run in result.get("runs", []):
            where = f"{check}: {run['mode']}/{run['variant']}"
            facts |= {f"{where} {k}": v for k, v in run.items() if k not in ("mode", "variant")}
    return facts


def main(argv: Sequence[str] | None = None) -> None:
    """Print the facts for the installed JAX; exit 1 where they contradict the guides' story."""
    parser = Parser(__doc__)
    parser.add_argument("--json", action="store_true", help="print JSON instead of text")
    args = parser.parse_args(argv)
    from snippets.devices import MESH_DEVICES, setup_devices  # after parsing: no JAX in usage

    with reported(args.debug):
        setup_devices(MESH_DEVICES)
    record = run_checks()
    print_report(record if args.json else record["versions"] | flat_facts(record), args.json)
    if breaks := story_breaks(record):
        sys.stderr.write(f"the story does not hold on JAX {record['versions']['jax']}: {breaks}\n")
        raise SystemExit(1)
