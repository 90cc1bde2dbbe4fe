"""The HLO barrier, measured: every (shard mode x head variant) of the guides' step lowered and
read; :func:`barrier_report` gathers what ``python -m snippets barrier`` prints."""

from __future__ import annotations

import dataclasses
import difflib
from collections.abc import Sequence

import jax

from find_barriers import Verdict
from snippets.devices import describe_devices
from snippets.hlo.collectives import collectives
from snippets.hlo.counts import kernel_order_dots, kernel_sites, relayouts, sharding_call_count
from snippets.hlo.gradients import kernel_relayouts
from snippets.hlo.head_traffic import head_traffic
from snippets.hlo.passes import pass_order
from snippets.hlo.programs import LoweredStep, hlo_text, lower_step
from snippets.lowering import StepConfig, build_step, every_mode_and_variant


def run_report(lowered: LoweredStep) -> dict:
    """What one lowered step shows: barrier, fold sites, leftovers and collectives."""
    config = lowered.config
    sites = [site.verdict for site in kernel_sites(lowered.hlo, config.kernel_dims)]
    left = relayouts(lowered.compiled, config.kernel_dims)
    return {
        "mode": config.mode,
        "variant": config.variant,
        "sharding_calls": sharding_call_count(lowered.hlo),
        "barrier_sites": sites.count(Verdict.BLOCKED),
        "foldable_sites": sites.count(Verdict.FOLDABLE),
        "compiled_transposes": [r.shape for r in left if r.opcode == "transpose"],
        "relayout_copies": [r.shape for r in left if r.opcode == "copy"],
        "collectives": [
            dataclasses.asdict(c) | {"bytes_per_step": c.bytes_per_step}
            for c in collectives(lowered.compiled)
        ],
        "optimizer": config.optimizer,
        **gradient_relayouts(lowered),
    }


def gradient_relayouts(lowered: LoweredStep) -> dict:
    """The compiled step's relayouts of the head kernel's gradient, from the weight-gradient dot to
    the kernel's outputs (gradient, or new value and moments); a fusion counts once."""
    found = kernel_relayouts(lowered.compiled, lowered.kernel_outputs, lowered.config.kernel_sizes)
    return {
        "gradient_relayouts": len(found),
        "gradient_relayout_ops": [
            f"{inst.opcode} {inst.shape} ({'+'.join(sorted({op.opcode for op in ops}))})"
            for inst, ops in found.items()
        ],
    }


def _line_diff(before: str, after: str) -> list[str]:
    """The ``-``/``+`` lines of a unified diff of two texts, without headers."""
    diff = difflib.unified_diff(before.splitlines(), after.splitlines(), lineterm="", n=0)
    return [line for line in diff if line[:1] in "+-" and line[:3] not in ("+++", "---")]


def logits_pin_diff(config: StepConfig) -> dict:
    """Lower with and without the logits out_sharding pin and diff the HLO before optimisation."""
    pinned, unpinned = (lower_step(config.replace(pin_logits=on)).hlo for on in (True, False))
    calls = sharding_call_count(pinned), sharding_call_count(unpinned)
    return {
        "lines": _line_diff(pinned, unpinned),
        "sharding_calls_pinned": calls[0],
        "sharding_calls_unpinned": calls[1],
        "sharding_calls_from_pin": calls[0] - calls[1],
    }


def lowered_for(config: StepConfig, platforms: Sequence[str] = ("tpu", "cuda")) -> dict:
    """The HLO before optimisation each platform's XLA receives for ``config``'s step, against the
    CPU's: ``trace(*args).lower(lowering_platforms=...)`` needs no such hardware."""
    step = build_step(config)
    with jax.set_mesh(step.mesh):
        traced = step.function.trace(*step.args)
        texts = {
            platform: hlo_text(traced.lower(lowering_platforms=(platform,)))
            for platform in ("cpu", *platforms)
        }
    return {
        platform: {
            "identical_to_cpu": texts[platform] == texts["cpu"],
            "sharding_calls": sharding_call_count(texts[platform]),
            "diff": _line_diff(texts["cpu"], texts[platform]),
        }
        for platform in platforms
    }


def single_device_control(config: StepConfig) -> dict:
    """The same step on one device: does the compiled weight-gradient dot write [emb, vocab] directly?"""
    lowered = lower_step(config.replace(devices=1, mesh="dp"))
    dots = kernel_order_dots(lowered.compiled, config.kernel_dims)
    left = relayouts(lowered.compiled, config.kernel_dims)
    sites = kernel_sites(lowered.hlo, config.kernel_dims)
    return {
        "mode": config.mode,
        "folded": bool(dots) and not left,
        "kernel_order_dots": [dot.shape for dot in dots],
        "relayouts": [r.shape for r in left],
        "sites_before_optimisation": [site.verdict for site in sites],
    }


def pass_window(config: StepConfig) -> dict:
    """This backend's pass order, and the weight-gradient sites in the module the first algsimp sees."""
    order = pass_order(lower_step(config, dump_passes=True).dumps)
    sites = kernel_sites(order["module_before_first_algsimp"], config.kernel_dims)
    return {
        **{key: value for key, value in order.items() if not key.startswith("module")},
        "sites_at_first_algsimp": [
            {"between": list(s.between), "verdict": s.verdict} for s in sites
        ],
    }


def barrier_report(base: StepConfig) -> dict:
    """Every (mode x variant) on ``base``'s mesh; the explicit EV step's pin check, one-device
    control, pass order and lowering for TPU and GPU; on an fsdp mesh, the head's collectives."""
    runs = [run_report(lower_step(config)) for config in every_mode_and_variant(base)]
    if base.optimizer != "none":
        plain = relayout_summary({"without": base.replace(optimizer="none")})[1]
        for run, row in zip(runs, plain, strict=True):
            run["gradient_relayouts_without_optimizer"] = row["without"]
            run["relayouts_added_by_optimizer"] = run["gradient_relayouts"] - row["without"]
    explicit_ev = base.replace(mode="explicit", variant="EV", optimizer="none")
    return {
        **{k: v for k, v in describe_devices().items() if k in ("backend", "device_kind")},
        "devices": base.devices,
        "mesh": base.mesh,
        "sizes": {"emb": base.emb, "vocab": base.vocab, "batch": base.batch, "seq": base.seq},
        "pass_order": pass_window(explicit_ev),
        "runs": runs,
        "logits_pin": logits_pin_diff(explicit_ev),
        "single_device": single_device_control(explicit_ev),
        "lowered_for": lowered_for(explicit_ev),
    } | ({"head_traffic": head_traffic(base)} if "fsdp" in base.axes else {})


def relayout_summary(settings: dict[str, StepConfig]) -> tuple[list[dict], list[dict]]:
    """The weight gradient's relayouts for every (mode x variant) under each named setting: a row
    per group of runs whose counts agree in every setting, and every run with its ops (``n/a``
    where a setting's mesh does not allow the variant)."""
    columns = [column for name in settings for column in (name, f"{name}: ops")]
    details: dict[str, dict] = {}
    for name, base in settings.items():
        for config in every_mode_and_variant(base):
            run = f"{config.mode}/{config.variant}"
            row = details.setdefault(run, dict.fromkeys(columns, "n/a"))
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
