"""Does the story hold on this JAX? The guides' key facts, measured on the installed release.

A check that fails records its error instead; the command exits 1 where the facts contradict the
guides' story. ``nox -s matrix`` runs it on several releases for the version-matrix page."""

from __future__ import annotations

import datetime
import importlib.metadata
import platform
import sys
import traceback
from collections.abc import Callable, Mapping, Sequence
from typing import Any, Final, TypedDict, TypeVar, cast, final

from snippets.support.cli import Parser, reported
from snippets.support.tables import print_report

# Each check's facts are a typed record: the keys below are the keys of docs/version_matrix.json.


class BarrierRun(TypedDict):
    """One (mode, variant) of the barrier report, counted."""

    mode: str
    variant: str
    sharding_calls: int
    barrier_sites: int
    compiled_transposes: int
    relayout_copies: int
    collectives: list[str]


class BarrierFacts(TypedDict):
    """:func:`barrier_facts`: the runs, and the CPU's pass order."""

    backend: str
    runs: list[BarrierRun]
    partitioner_first: bool
    single_device_folded: bool


class ControlRun(TypedDict):
    """One (mode, variant) of the causal control."""

    mode: str
    variant: str
    gradient_in_kernel_order: bool
    gradient_transposes: int


class CausalControlFacts(TypedDict):
    """:func:`causal_control_facts`."""

    runs: list[ControlRun]


class ReduceScatterFacts(TypedDict):
    """:func:`reduce_scatter_facts`: each rank's rows, and the bytes each rank sends."""

    shards: list[list[list[float]]]
    reference_equal: bool
    bytes_per_rank: dict[str, int]
    hlo_bytes_per_rank: dict[str, int]


class ExplicitModeFacts(TypedDict):
    """:func:`explicit_mode_facts`: the finished rows, and each program's collectives."""

    resharded: list[list[float]]
    compiled_collectives: dict[str, dict[str, int]]


class LMHeadFacts(TypedDict):
    """:func:`lm_head_facts`: :func:`snippets.head_orientation.orientation_report` less its shapes."""

    same_seed_identical: bool
    exact_inputs_identical: bool
    forward_within_rounding_bound: bool
    grad_within_rounding_bound: bool
    forward_bit_identical_here: bool
    grad_bit_identical_here: bool
    forward_max_abs_diff: float
    grad_max_abs_diff: float


VocabParallelFacts = TypedDict(
    "VocabParallelFacts",
    {
        "explicit EV bytes": int,
        "explicit vocab-parallel bytes": int,
        "explicit vocab-parallel weight-gradient collectives": int,
        "auto EV bytes": int,
        "auto vocab-parallel bytes": int,
        "auto vocab-parallel weight-gradient collectives": int,
    },
)
VocabParallelFacts.__doc__ = ":func:`vocab_parallel_facts`: the head's bytes per device, per mode."

MaxTextFacts = TypedDict(
    "MaxTextFacts",
    {
        "maxtext": str,
        "explicit sharding_calls": int,
        "explicit sites": int,
        "explicit sites with Sharding between": int,
        "explicit folded": list[str],
        "auto sharding_calls": int,
        "auto sites": int,
        "auto sites with Sharding between": int,
        "auto folded": list[str],
    },
)
MaxTextFacts.__doc__ = ":func:`maxtext_facts`: calls, sites and folds, per mode."

Capabilities = dict[str, dict[str, str]]
""":func:`capability_facts`: each check of :mod:`snippets.measure.mode_checks`, its outcome per mode."""


class CheckError(TypedDict):
    """A check that raised: its error's last line, in place of its facts."""

    error: str


class Results(TypedDict):
    """Every check's facts, or its error."""

    barrier: BarrierFacts | CheckError
    causal_control: CausalControlFacts | CheckError
    reduce_scatter: ReduceScatterFacts | CheckError
    reduce_scatter_explicit_mode: ExplicitModeFacts | CheckError
    lm_head: LMHeadFacts | CheckError
    vocab_parallel: VocabParallelFacts | CheckError
    capabilities: Capabilities | CheckError
    maxtext: MaxTextFacts | CheckError


@final  # no other keys: a record with an error is a FailedRelease
class Record(TypedDict):
    """One release's record, as :func:`run_checks` writes it."""

    versions: dict[str, str]
    date: str
    results: Results


class FailedRelease(TypedDict):
    """A release that could not run the checks (``nox -s matrix`` writes it)."""

    versions: dict[str, str]
    error: str


R = TypeVar("R")  # not def _picked[R]: the matrix runs JAX 0.10.2 on Python 3.11


def _picked(kind: type[R], source: Mapping) -> R:  # noqa: UP047
    """The record ``kind`` made of ``source``'s entries of the same names, in its order."""
    return kind(**{key: source[key] for key in kind.__annotations__})


def barrier_facts() -> BarrierFacts:
    """Per (mode x variant): Sharding calls, barrier sites, compiled transposes; the pass order."""
    from snippets.hlo.barrier import barrier_report
    from snippets.lowering import StepConfig

    report = barrier_report(StepConfig())
    runs = []
    for run in report["runs"]:
        counted = {key: len(run[key]) for key in ("compiled_transposes", "relayout_copies")}
        kinds = sorted({op["kind"] for op in run["collectives"]})
        runs.append(_picked(BarrierRun, run | counted | {"collectives": kinds}))
    return BarrierFacts(
        backend=report["backend"],
        runs=runs,
        partitioner_first=report["pass_order"]["partitioner_first"],
        single_device_folded=report["single_device"]["folded"],
    )


def causal_control_facts() -> CausalControlFacts:
    """The one-device control with sharding-remover off: is each gradient written in kernel order?"""
    from snippets.hlo.causal_control import causal_control
    from snippets.lowering import StepConfig

    runs = [_picked(ControlRun, row) for row in causal_control(StepConfig())]
    return CausalControlFacts(runs=runs)


def reduce_scatter_facts() -> ReduceScatterFacts:
    """The lesson's 2x2 exchange: each rank's finished rows and the bytes each rank sends."""
    from snippets.hlo.reduce_scatter import walkthrough

    return _picked(ReduceScatterFacts, walkthrough(ranks=2, explicit=False))


def explicit_mode_facts() -> ExplicitModeFacts:
    """The 2x2 exchange in explicit mode (``unreduced`` partials, ``reshard``), not in the story."""
    from snippets.exchange import SEED_A, SEED_B, contraction_mesh, split_contraction
    from snippets.hlo.reduce_scatter import explicit_mode

    mesh = contraction_mesh(2)
    return _picked(ExplicitModeFacts, explicit_mode(*split_contraction(SEED_A, SEED_B, mesh), mesh))


def lm_head_facts() -> LMHeadFacts:
    """Both kernel orientations: same seed, same matrix; outputs equal up to rounding."""
    from snippets.head_orientation import orientation_report

    return _picked(LMHeadFacts, orientation_report())


def vocab_parallel_facts() -> VocabParallelFacts:
    """The head's collective bytes per device, default and vocab-parallel, on a 4-way fsdp mesh
    with a vocab 64 times the tokens; and whether the rotated kernel's gradient needs one."""
    from snippets.hlo.head_traffic import head_traffic
    from snippets.lowering import StepConfig

    wide = StepConfig(mesh="fsdp", emb=64, vocab=8192, batch=8, seq=16)
    traffic = head_traffic(wide, ("EV", "vocab-parallel"))
    facts: dict[str, int] = {}
    for mode in ("explicit", "auto"):
        default, rotated = traffic[mode]["EV"], traffic[mode]["vocab-parallel"]
        facts[f"{mode} EV bytes"] = default["bytes"]
        facts[f"{mode} vocab-parallel bytes"] = rotated["bytes"]
        gradient = rotated["weight_gradient_collectives"]
        facts[f"{mode} vocab-parallel weight-gradient collectives"] = len(gradient)
    return cast(VocabParallelFacts, facts)  # keys per mode: tests/test_version_check.py checks them


def capability_facts() -> Capabilities:
    """What each mode allows (:func:`~snippets.measure.mode_checks.outcomes.report`): every check's
    outcome, per mode."""
    from snippets.measure.mode_checks.outcomes import report

    return report()


def maxtext_facts() -> MaxTextFacts:
    """MaxText's decoder (``snippets.hlo.maxtext_decoder``'s defaults): calls, sites, folds per mode."""
    from snippets.hlo.maxtext_decoder import DecoderConfig, decoder_report, what_it_is

    report = decoder_report(DecoderConfig(), causal=True)
    facts: dict[str, object] = {"maxtext": report["maxtext"]}
    for mode in ("explicit", "auto"):
        sites = report[mode]["sites"]
        facts[f"{mode} sharding_calls"] = report[mode]["sharding_calls"]
        facts[f"{mode} sites"] = len(sites)
        blocked = sum("Sharding" in s["between"] for s in sites)
        facts[f"{mode} sites with Sharding between"] = blocked
        facts[f"{mode} folded"] = sorted({what_it_is(s) for s in sites if s["folded"]})
    return cast(MaxTextFacts, facts)  # keys per mode: tests/test_version_check.py checks them


CHECKS: dict[str, Callable[[], Mapping[str, object]]] = {
    "barrier": barrier_facts,
    "causal_control": causal_control_facts,
    "reduce_scatter": reduce_scatter_facts,
    "reduce_scatter_explicit_mode": explicit_mode_facts,
    "lm_head": lm_head_facts,
    "vocab_parallel": vocab_parallel_facts,
    "capabilities": capability_facts,
    "maxtext": maxtext_facts,
}


STORY_CHECKS: Final = ("barrier", "causal_control", "reduce_scatter", "lm_head", "vocab_parallel")
"""The checks the guides' argument rests on; the others record what a release can do."""
STORY_RUNS = {
    "barrier": ("barrier_sites", 1, 0),
    "causal_control": ("gradient_in_kernel_order", False, True),
}
"""Per check, the fact each run must show: its value on explicit/EV, and on every other run."""


def run_checks() -> Record:
    """Every check's facts, or the error that stopped it, with the versions and the date."""
    results: dict[str, Mapping[str, object]] = {}
    for name, check in CHECKS.items():
        try:
            results[name] = check()
        except Exception as error:  # noqa: BLE001 (a release that cannot run a check gets a row saying why)
            results[name] = CheckError(error=traceback.format_exception_only(error)[-1].strip())
    versions = {name: importlib.metadata.version(name) for name in ("jax", "jaxlib", "flax")}
    return Record(
        versions={"python": platform.python_version(), **versions},
        date=datetime.date.today().isoformat(),
        results=cast(Results, results),  # Results' keys are CHECKS': the tests check that
    )


def _run_breaks(results: Mapping, failed: Mapping) -> list[str]:
    """Each run of :data:`STORY_RUNS`' checks whose fact is not the one the story expects."""
    breaks = []
    for check, (fact, explicit_ev, others) in STORY_RUNS.items():
        for run in [] if check in failed else results[check]["runs"]:
            where = f"{run['mode']}/{run['variant']}"
            expected = explicit_ev if where == "explicit/EV" else others
            if run[fact] != expected:
                breaks.append(f"{check}: {where} {fact} is {run[fact]}, the story says {expected}")
    return breaks


def story_breaks(record: Record | FailedRelease) -> list[str]:
    """What in one release's record contradicts the guides' argument (empty: the story holds);
    facts are read by name, so a record without one is an error here, not a story that holds."""
    if "error" in record:
        return [f"did not run: {record['error']}"]
    results = record["results"]
    failed = {name: error for name in STORY_CHECKS if (error := results[name].get("error"))}
    breaks = [f"{name} failed: {error}" for name, error in failed.items()]
    breaks += _run_breaks(results, failed)
    if "error" not in (barrier := results["barrier"]) and not barrier["partitioner_first"]:
        breaks.append("on CPU the simplifier now runs before the partitioner")
    rotated: Mapping[str, Any] = results["vocab_parallel"]  # bytes keyed per mode
    for mode in [] if "error" in rotated else ("explicit", "auto"):
        if rotated[f"{mode} vocab-parallel bytes"] >= rotated[f"{mode} EV bytes"]:
            breaks.append(f"vocab_parallel: in {mode} mode the rotated head moves no fewer bytes")
    if "error" not in (scatter := results["reduce_scatter"]):
        shards = scatter["shards"]
        if shards != [[[19.0, 22.0]], [[43.0, 50.0]]]:
            breaks.append(f"the 2x2 reduce-scatter gives {shards}")
    return breaks


def flat_facts(record: Record | FailedRelease) -> dict[str, object]:
    """One release's facts as ``{"check: fact": value}``: barrier runs spelled out per
    mode/variant, a fact per mode (the capabilities) per mode."""
    if "error" in record:
        return {"run": f"failed: {record['error']}"}
    facts: dict[str, object] = {}
    results: Mapping[str, Any] = record["results"]  # any check's facts, read as JSON
    for check, result in results.items():
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
    args = parser.parse_args(argv)
    from snippets.devices import MESH_DEVICES, setup_devices  # after parsing: no JAX in usage

    with reported(args.debug):
        setup_devices(MESH_DEVICES)
    record = run_checks()
    print_report(record if args.json else record["versions"] | flat_facts(record), args.json)
    if breaks := story_breaks(record):
        sys.stderr.write(f"the story does not hold on JAX {record['versions']['jax']}: {breaks}\n")
        raise SystemExit(1)
