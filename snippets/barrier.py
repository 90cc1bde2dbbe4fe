"""The HLO barrier, measured: every (shard mode x head variant) lowered and read.

``python -m snippets.barrier [--json] [--devices N] [--emb E] [--vocab V] [--mesh dp|dp_fsdp]``
prints, for each run, the ``Sharding`` custom calls, the weight-gradient
transpose-of-dot sites and what stands in them, the transposes and relayout
copies left after compilation, and the collectives; then the out_sharding pin
check, the single-device control, this backend's pass order, the causal
control (``snippets.causal_control``) and ``lowered_for``: the HLO the explicit
EV step hands to XLA:TPU and XLA:GPU, lowered here without that hardware and
compared with the CPU lowering. Written for CPU and run only there: the causal
control expects XLA:CPU's error text and raises ``XlaChangedError`` elsewhere.
"""

from __future__ import annotations

import dataclasses
import difflib
import json
import os
import sys
from collections.abc import Sequence

import jax

from snippets.causal_control import causal_control
from snippets.cli import Parser, reported, run_module
from snippets.devices import describe_devices, setup_devices
from snippets.hlo import (
    TransposeSite,
    array_shapes,
    collectives,
    instructions,
    kernel_relayouts,
    pass_order,
    relayouts,
    sharding_call_count,
    transpose_of_dot_sites,
)
from snippets.lowering import (
    OPTIMIZERS,
    LoweredStep,
    StepConfig,
    add_step_arguments,
    build_step,
    every_mode_and_variant,
    lower_step,
    step_config,
)

OTHER_PLATFORMS = ("tpu", "cuda")
"""Backends whose lowering :func:`lowered_for` compares with the CPU's; no such hardware is needed."""


def run_report(lowered: LoweredStep) -> dict:
    """What one lowered step shows: barrier, fold sites, leftovers and collectives."""
    config = lowered.config
    sites = transpose_of_dot_sites(lowered.hlo, config.kernel_dims)
    left = relayouts(lowered.compiled, config.kernel_dims)
    return {
        "mode": config.mode,
        "variant": config.variant,
        "sharding_calls": sharding_call_count(lowered.hlo),
        "barrier_sites": sum(site.kind == "barrier" for site in sites),
        "foldable_sites": sum(site.kind == "foldable" for site in sites),
        "compiled_transposes": [r.shape for r in left if r.opcode == "transpose"],
        "relayout_copies": [r.shape for r in left if r.opcode == "copy"],
        "collectives": [dataclasses.asdict(c) for c in collectives(lowered.compiled)],
        "optimizer": config.optimizer,
        **gradient_relayouts(lowered),
    }


def gradient_relayouts(lowered: LoweredStep) -> dict:
    """The compiled step's relayouts of the head kernel's gradient, found by data flow.

    Counted from the weight-gradient dot to the step's outputs for the kernel (its
    gradient, or with an optimizer its new value and moments); a fusion that
    contains a transpose or copy counts once.
    """
    emb, vocab = lowered.config.kernel_dims
    sizes = {emb * vocab // n for n in range(1, lowered.config.devices + 1)}
    found = kernel_relayouts(lowered.compiled, lowered.kernel_outputs, sizes)
    return {
        "gradient_relayouts": len(found),
        "gradient_relayout_ops": [f"{r.opcode} {r.shape} ({'+'.join(r.relayouts)})" for r in found],
    }


def _line_diff(before: str, after: str) -> list[str]:
    """The ``-``/``+`` lines of a unified diff of two texts, without headers."""
    diff = difflib.unified_diff(before.splitlines(), after.splitlines(), lineterm="", n=0)
    return [line for line in diff if line[:1] in "+-" and line[:3] not in ("+++", "---")]


def pin_diff(config: StepConfig) -> dict:
    """Lower with and without the logits out_sharding pin and diff the HLO before optimisation."""
    pinned = lower_step(config.replace(pin_logits=True)).hlo
    unpinned = lower_step(config.replace(pin_logits=False)).hlo
    return {
        "lines": _line_diff(pinned, unpinned),
        "sharding_calls_pinned": sharding_call_count(pinned),
        "sharding_calls_unpinned": sharding_call_count(unpinned),
        "sharding_calls_from_pin": sharding_call_count(pinned) - sharding_call_count(unpinned),
    }


def lowered_for(config: StepConfig, platforms: Sequence[str] = OTHER_PLATFORMS) -> dict:
    """The HLO before optimisation that each platform's XLA receives for ``config``'s step.

    ``jitted.trace(*args).lower(lowering_platforms=(platform,))`` lowers for a backend
    this machine does not have. Each platform reports whether its text is identical to
    the lowering for ``"cpu"``, its ``Sharding`` call count and the differing lines.
    It shows what enters that backend's compiler, nothing about the passes it then runs.
    """
    step = build_step(config)
    with jax.set_mesh(step.mesh):
        traced = step.function.trace(*step.args)
        hlo = {
            platform: traced.lower(lowering_platforms=(platform,)).compiler_ir("hlo").as_hlo_text()
            for platform in ("cpu", *platforms)
        }
    return {
        platform: {
            "identical_to_cpu": hlo[platform] == hlo["cpu"],
            "sharding_calls": sharding_call_count(hlo[platform]),
            "diff": _line_diff(hlo["cpu"], hlo[platform]),
        }
        for platform in platforms
    }


def single_device_control(config: StepConfig) -> dict:
    """The same step on one device: does the compiled weight-gradient dot write [emb, vocab] directly?"""
    lowered = lower_step(config.replace(devices=1, mesh="dp"))
    dims = config.kernel_dims
    kernel_order_dots = [
        inst.shape
        for inst in instructions(lowered.compiled)
        if inst.opcode == "dot" and array_shapes(inst.shape)[0][1] == dims
    ]
    left = relayouts(lowered.compiled, dims)
    return {
        "mode": config.mode,
        "folded": bool(kernel_order_dots) and not left,
        "kernel_order_dots": kernel_order_dots,
        "relayouts": [r.shape for r in left],
        "sites_before_optimisation": [
            site.kind for site in transpose_of_dot_sites(lowered.hlo, dims)
        ],
    }


def pass_window(config: StepConfig) -> dict:
    """This backend's pass order, and the weight-gradient sites in the module the first algsimp sees."""
    order = pass_order(lower_step(config, dump_passes=True).dumps)
    return {
        "first_algsimp": order.first_algsimp,
        "first_spmd_partitioner": order.first_spmd_partitioner,
        "partitioner_pass": order.partitioner_pass,
        "partitioner_first": order.partitioner_first,
        "sites_at_first_algsimp": [
            {"between": list(site.between), "kind": site.kind}
            for site in transpose_of_dot_sites(
                order.module_before_first_algsimp, config.kernel_dims
            )
        ],
    }


def barrier_report(base: StepConfig) -> dict:
    """Every (mode x variant) on ``base``'s mesh, the pin check, the single-device control, the pass
    order and the explicit EV step lowered for TPU and GPU (:func:`lowered_for`)."""
    runs = [run_report(lower_step(config)) for config in every_mode_and_variant(base)]
    if base.optimizer != "none":
        for run, config in zip(runs, every_mode_and_variant(base), strict=True):
            plain = lower_step(config.replace(optimizer="none"))
            without = gradient_relayouts(plain)["gradient_relayouts"]
            run["gradient_relayouts_without_optimizer"] = without
            run["relayouts_added_by_optimizer"] = run["gradient_relayouts"] - without
    explicit_ev = base.replace(mode="explicit", variant="EV", optimizer="none")
    pin = pin_diff(explicit_ev)
    single = single_device_control(explicit_ev)
    window = pass_window(explicit_ev)
    return {
        **{k: v for k, v in describe_devices().items() if k in ("backend", "device_kind")},
        "devices": base.devices,
        "mesh": base.mesh,
        "sizes": {"emb": base.emb, "vocab": base.vocab, "batch": base.batch, "seq": base.seq},
        "pass_order": window,
        "runs": runs,
        "pin_diff_lines": len(pin["lines"]),
        "pin": pin,
        "single_device_folded": single["folded"],
        "single_device": single,
        "lowered_for": lowered_for(explicit_ev),
    }


STRUCTURE_COLUMNS = {
    "mode": "mode",
    "variant": "variant",
    "sharding_calls": "Sharding calls",
    "barrier_sites": "barrier sites",
    "foldable_sites": "foldable sites",
    "relayouts": "weight-gradient transposes and relayouts (compiled)",
}
"""Column titles for :func:`structure_rows`."""


def structure_rows(report: dict) -> list[dict]:
    """The runs of a :func:`barrier_report` as table rows, leftovers joined into one cell."""
    return [
        {
            **run,
            "relayouts": ", ".join(run["compiled_transposes"] + run["relayout_copies"]) or "none",
        }
        for run in report["runs"]
    ]


def relayout_summary(settings: dict[str, StepConfig]) -> tuple[list[dict], list[dict]]:
    """The weight gradient's relayouts for every (mode x variant) under each named setting.

    Returns one row per group of runs whose counts agree in every setting (the rows that
    differ, for a short table), and every run with its counts and relayout ops (the details).
    """
    details: dict[str, dict] = {}
    for name, base in settings.items():
        for config in every_mode_and_variant(base):
            row = details.setdefault(f"{config.mode}/{config.variant}", {})
            found = gradient_relayouts(lower_step(config))
            row[name] = found["gradient_relayouts"]
            row[f"{name}: ops"] = "; ".join(found["gradient_relayout_ops"]) or "none"
    groups: dict[tuple, list[str]] = {}
    for run, row in details.items():
        groups.setdefault(tuple(row[name] for name in settings), []).append(run)
    summary = [
        {"runs": ", ".join(runs), **dict(zip(settings, counts, strict=True))}
        for counts, runs in groups.items()
    ]
    return summary, [{"run": run, **row} for run, row in details.items()]


def format_table(report: dict) -> str:
    """The runs as a fixed-width text table."""
    header = (
        f"{'mode':<9} {'variant':<18} {'Sharding':>8} {'barrier':>7} {'foldable':>8} "
        f"{'transposes':>10} {'copies':>6} {'grad relayouts':>14}"
    )
    rows = [
        f"{r['mode']:<9} {r['variant']:<18} {r['sharding_calls']:>8} {r['barrier_sites']:>7} "
        f"{r['foldable_sites']:>8} {len(r['compiled_transposes']):>10} "
        f"{len(r['relayout_copies']):>6} {r['gradient_relayouts']:>14}"
        + (
            f" (optimizer adds {r['relayouts_added_by_optimizer']})"
            if "relayouts_added_by_optimizer" in r
            else ""
        )
        for r in report["runs"]
    ]
    return "\n".join([header, *rows])


@dataclasses.dataclass(frozen=True)
class FoundSite:
    """A transpose-of-dot site of a lowered program: shapes, what stands between, where it came from.

    ``output`` is the path, in the step's outputs, of the value the transpose
    feeds (a parameter's gradient; ``"result"`` for a single output), or ``None``;
    ``source`` is the Python line that made the dot, relative to its package.
    """

    dot: str
    transpose: str
    between: tuple[str, ...]
    output: str | None
    op_name: str | None
    source: str | None

    @property
    def blocked(self) -> bool:
        """Whether anything stands between the dot and the transpose (the fold cannot fire)."""
        return bool(self.between)

    def __str__(self) -> str:
        chain = " -> ".join(["dot " + self.dot, *self.between, "transpose " + self.transpose])
        return f"{chain}  {self.output or '(no output)'}  {self.source or ''}".rstrip()


def _shape(shape: str) -> str:
    """An HLO shape without its layout: ``f32[2,3]{1,0}`` -> ``f32[2,3]``."""
    return shape.split("{")[0]


def short_path(location: str) -> str:
    """``location`` (``file:line``) as its module's path (``pkg/mod.py:12``), else relative to
    the ``sys.path`` entry that holds it, else its file name."""
    path, _, line = location.rpartition(":")
    for name, module in list(sys.modules.items()):
        if name != "__main__" and getattr(module, "__file__", None) == path:
            tail = "/__init__.py" if path.endswith("__init__.py") else ".py"
            return f"{name.replace('.', '/')}{tail}:{line}"
    roots = [os.path.abspath(root) for root in sys.path if root and os.path.isdir(root)]
    holding = [root for root in roots if path.startswith(root + os.sep)]
    short = os.path.relpath(path, max(holding, key=len)) if holding else os.path.basename(path)
    return f"{short}:{line}"


def find_barriers(lowered: jax.stages.Lowered) -> list[FoundSite]:
    """Every transpose-of-dot site in ``lowered``'s HLO before optimisation, with what stands between.

    XLA's algebraic simplifier folds ``transpose(dot(a, b))`` into ``dot(b, a)`` only
    when nothing stands between; a site whose ``between`` lists a ``Sharding`` call is
    a fold that explicit mode blocks. Works on any ``jax.jit(...).lower(...)``.
    """
    hlo = lowered.as_text(dialect="hlo", debug_info=True)
    leaves = jax.tree_util.tree_flatten_with_path(lowered.out_info)[0]
    paths = [jax.tree_util.keystr(path) for path, _ in leaves]
    return [_found(site, paths) for site in transpose_of_dot_sites(hlo)]


def _found(site: TransposeSite, paths: list[str]) -> FoundSite:
    return FoundSite(
        dot=_shape(site.dot_shape),
        transpose=_shape(site.shape),
        between=site.between,
        output=(paths[site.output] or "result") if site.output is not None else None,
        op_name=site.op_name,
        source=short_path(site.source) if site.source else None,
    )


def main(argv: Sequence[str] | None = None) -> None:
    """Print the barrier report."""
    parser = Parser(__doc__)
    parser.add_argument("--json", action="store_true", help="print JSON instead of text")
    add_step_arguments(parser)
    parser.add_argument(
        "--optimizer",
        choices=OPTIMIZERS,
        default="none",
        help="also apply an AdamW update in the step, and count the relayouts it adds",
    )
    args = parser.parse_args(argv)
    with reported(args.debug):
        base = step_config(args, steps=2, optimizer=args.optimizer)
        setup_devices(base.devices)
        report = barrier_report(base)
        report["causal_control"] = causal_control(base.replace(optimizer="none"))
    if args.json:
        print(json.dumps(report, indent=2))
        return
    print(
        f"{report['backend']} backend, {report['devices']} devices, mesh {report['mesh']}, sizes {report['sizes']}"
    )
    print(format_table(report))
    print(
        f"out_sharding pin: {report['pin_diff_lines']} differing HLO lines, "
        f"{report['pin']['sharding_calls_from_pin']} Sharding calls from it"
    )
    print(f"single device (explicit): weight gradient folded = {report['single_device_folded']}")
    for platform, lowered in report["lowered_for"].items():
        print(
            f"lowered for {platform}: identical to the CPU lowering {lowered['identical_to_cpu']}, "
            f"{lowered['sharding_calls']} Sharding calls"
        )
    for row in report["causal_control"]:
        print(
            f"causal control {row['mode']}/{row['variant']}: gradient in kernel order "
            f"{row['gradient_in_kernel_order']}, {row['gradient_transposes']} transpose(s)"
        )
    order = report["pass_order"]
    print(
        f"pass order: first spmd-partitioning at dump {order['first_spmd_partitioner']}, "
        f"first algsimp at dump {order['first_algsimp']}; sites the first algsimp sees: "
        f"{order['sites_at_first_algsimp']}"
    )


if __name__ == "__main__":
    run_module(main)
