"""The causal control: a ``Sharding`` call left in the module stops XLA's transpose-of-dot fold.

XLA:CPU never lets its algebraic simplifier meet explicit mode's ``Sharding``
custom calls: with several devices the partitioner runs first, and with one
device the ``sharding-remover`` pass deletes the calls before the simplifier
(``RunHloPassesThroughLayoutAssn`` in XLA's ``xla/service/cpu/cpu_compiler.cc``).
The control compiles the same one-device explicit module twice, with that one
pass on (the default) and off. No pass is reordered: with the remover off, the
simplifier meets the calls on an unpartitioned module, as the TPU and GPU
pipelines' simplifier does before their partitioner. Code generation then fails
on the leftover calls, but XLA has already written its optimised module, and
that module is what this reads. CPU only: it expects XLA:CPU's error text.

``python -m snippets.causal_control [--json]`` prints the control (remover off)
for every (shard mode x head variant).
"""

from __future__ import annotations

import json
import re
import tempfile
from collections.abc import Sequence

import jax

from snippets.cli import Parser, reported, run_module
from snippets.devices import setup_devices
from snippets.hlo import (
    array_shapes,
    instructions,
    parse_dump_name,
    pass_order,
    sharding_call_count,
    site_excerpt,
    transpose_of_dot_sites,
)
from snippets.lowering import StepConfig, build_step, every_mode_and_variant, read_pass_dumps

EXPECTED_CODEGEN_ERROR = "No registered implementation for untyped custom call to Sharding"
"""What XLA:CPU says when a ``Sharding`` call reaches code generation (the expected end here)."""

OPTIONS = {"xla_disable_hlo_passes": "sharding-remover", "xla_dump_hlo_pass_re": ".*"}
"""Compiler options of the control: keep the calls, dump the module after every pass."""

REMOVER_ON = {"xla_dump_hlo_pass_re": ".*"}
"""Compiler options of the paired run: the default pipeline, dumped after every pass."""


class XlaChangedError(RuntimeError):
    """The control did not end the way the guide describes: XLA changed, and the page must too."""


def _compile_with_dumps(
    config: StepConfig, remover: bool = False
) -> tuple[str, dict[str, str], str | None]:
    """Compile ``config``'s one-device step, sharding-remover on or off: HLO, dumps, error (if any)."""
    lowered = build_step(config).lower()
    hlo = lowered.compiler_ir("hlo").as_hlo_text()
    options = REMOVER_ON if remover else OPTIONS
    with tempfile.TemporaryDirectory() as directory:
        error = None
        try:
            lowered.compile(compiler_options={**options, "xla_dump_to": directory})
        except jax.errors.JaxRuntimeError as failure:
            error = str(failure)
        dumps = read_pass_dumps(directory)
    return hlo, dumps, error


def _check_the_ending(
    config: StepConfig, calls: int, error: str | None, remover: bool = False
) -> str:
    """``"codegen failed as expected"`` or ``"compiled"``; anything else means XLA changed."""
    kept = calls and not remover
    if kept and error is not None and EXPECTED_CODEGEN_ERROR in error:
        return "codegen failed as expected"
    if not kept and error is None:
        return "compiled"
    what = f"failed with: {error.splitlines()[0]}" if error else "compiled"
    raise XlaChangedError(
        f"{config.mode}/{config.variant}: with {calls} Sharding call(s) and sharding-remover "
        f"{'on' if remover else 'disabled'} the one-device step {what}; expected "
        + (f"codegen to fail with {EXPECTED_CODEGEN_ERROR!r}" if kept else "it to compile")
        + ". XLA changed: re-measure and rewrite the causal control in the shard-mode guide."
    )


def _optimised_module(dumps: dict[str, str]) -> str:
    """The module after XLA's last HLO pass (written before code generation)."""
    finals = [text for name, text in dumps.items() if name.endswith("after_optimizations.txt")]
    if len(finals) != 1:
        raise XlaChangedError(f"expected one *after_optimizations.txt dump, found {len(finals)}")
    return finals[0]


def _row_major(shape: str) -> bool:
    """Whether an HLO array shape has the default row-major layout (or none printed)."""
    layout = re.search(r"\]\{([\d,]*)", shape)
    if layout is None:
        return True
    order = [int(d) for d in layout[1].split(",") if d]
    return order == sorted(order, reverse=True)


def _last_site_chain(dumps: dict[str, str], dims: tuple[int, int]) -> dict | None:
    """The dot -> ... -> transpose chain in the last per-pass dump that still has one.

    Fusion later wraps the transpose in a fusion, so the chain is read from the
    last module before that, with the pass that module was handed to next;
    ``None`` when no dump has a transpose fed by the weight-gradient dot.
    """
    per_pass = sorted((parsed, name) for name in dumps if (parsed := parse_dump_name(name)))
    for (_, pipeline, _, before), name in reversed(per_pass):
        sites = transpose_of_dot_sites(dumps[name], dims)
        if sites:
            chain = site_excerpt(dumps[name], sites[0])
            return {"pipeline": pipeline, "next_pass": before, "chain": chain}
    return None


def control(config: StepConfig, remover: bool = False) -> dict:
    """The control for one (mode, variant): is the weight gradient written in the kernel's order?

    ``remover=False`` (the control) disables sharding-remover; ``True`` compiles as XLA:CPU
    does by default, the other half of the pair.
    """
    one_device = config.replace(devices=1, mesh="dp")
    hlo, dumps, error = _compile_with_dumps(one_device, remover)
    ending = _check_the_ending(one_device, sharding_call_count(hlo), error, remover)
    final = _optimised_module(dumps)
    emb, vocab = config.kernel_dims
    stored = (vocab, emb) if config.variant == "VE" else (emb, vocab)
    insts = instructions(final)
    gradient_transposes = [
        i.shape
        for i in insts
        if i.opcode == "transpose" and sorted(array_shapes(i.shape)[0][1]) == sorted(stored)
    ]
    kernel_order_dots = [
        i.shape
        for i in insts
        if i.opcode == "dot" and array_shapes(i.shape)[0][1] == stored and _row_major(i.shape)
    ]
    order = pass_order(dumps)
    return {
        "mode": config.mode,
        "variant": config.variant,
        "sharding_remover": "on" if remover else "off",
        "gradient_in_kernel_order": bool(kernel_order_dots) and not gradient_transposes,
        "gradient_transposes": len(gradient_transposes),
        "sharding_calls_at_first_simplifier": sharding_call_count(
            order.module_before_first_algsimp
        ),
        "chain_at_site": _last_site_chain(dumps, config.kernel_dims),
        "ending": ending,
    }


def paired_control(config: StepConfig) -> list[dict]:
    """One explicit module on one device, compiled with sharding-remover on and then off."""
    explicit = config.replace(mode="explicit", variant="EV", optimizer="none")
    return [control(explicit, remover=True), control(explicit, remover=False)]


def causal_control(base: StepConfig) -> list[dict]:
    """The control for every (shard mode x head variant) of ``base``."""
    return [control(config) for config in every_mode_and_variant(base)]


def main(argv: Sequence[str] | None = None) -> None:
    """Print the causal control for every mode and variant."""
    parser = Parser(__doc__)
    parser.add_argument("--json", action="store_true", help="print JSON instead of text")
    args = parser.parse_args(argv)
    with reported(args.debug):
        setup_devices(1)
        rows = causal_control(StepConfig())
    if args.json:
        print(json.dumps(rows, indent=2))
        return
    for row in rows:
        print(
            f"{row['mode']:>8} {row['variant']:<17} in kernel order: "
            f"{row['gradient_in_kernel_order']!s:<5} transposes: {row['gradient_transposes']} "
            f"Sharding calls at the first algsimp: {row['sharding_calls_at_first_simplifier']} "
            f"({row['ending']})"
        )


if __name__ == "__main__":
    run_module(main)
