"""The causal control: a ``Sharding`` call left in the module stops XLA's transpose-of-dot fold.

On one device XLA:CPU's ``sharding-remover`` deletes the calls before the simplifier; the control
turns it off, so codegen fails on them (CPU only): :func:`control` for the guides' step,
:func:`site_fates` for every site of any step."""

from __future__ import annotations

import tempfile

import jax

from find_barriers import find_sites, read_hlo
from snippets.hlo.counts import kernel_order_dots, kernel_sites, relayouts, sharding_call_count
from snippets.hlo.passes import algsimp_fates, parse_dump_name, pass_order
from snippets.hlo.programs import hlo_text, read_pass_dumps
from snippets.lowering import StepConfig, build_step, every_mode_and_variant

EXPECTED_CODEGEN_ERROR = "No registered implementation for untyped custom call to Sharding"
"""What XLA:CPU says when a ``Sharding`` call reaches code generation (the expected end here)."""


class XlaChangedError(RuntimeError):
    """The control did not end the way the guide describes: XLA changed, and the page must too."""


def compile_with_dumps(
    lowered: jax.stages.Lowered, remover: bool = False
) -> tuple[dict[str, str], str | None]:
    """Compile with every pass dumped and sharding-remover on or (the control) off: dumps, error."""
    options = {"xla_dump_hlo_pass_re": ".*"}
    if not remover:
        options["xla_disable_hlo_passes"] = "sharding-remover"
    with tempfile.TemporaryDirectory() as directory:
        error = None
        try:
            lowered.compile(compiler_options={**options, "xla_dump_to": directory})
        except jax.errors.JaxRuntimeError as failure:
            error = str(failure)
        return read_pass_dumps(directory), error


def check_ending(what: str, calls: int, error: str | None, remover: bool = False) -> str:
    """``"codegen failed as expected"`` or ``"compiled"``; any other ending raises XlaChangedError."""
    kept = calls and not remover
    if kept and error is not None and EXPECTED_CODEGEN_ERROR in error:
        return "codegen failed as expected"
    if not kept and error is None:
        return "compiled"
    ended = f"failed with: {error.splitlines()[0]}" if error else "compiled"
    expected = f"codegen to fail with {EXPECTED_CODEGEN_ERROR!r}" if kept else "it to compile"
    raise XlaChangedError(
        f"{what}: with {calls} Sharding call(s) and sharding-remover "
        f"{'on' if remover else 'disabled'} the one-device step {ended}; expected {expected}. "
        "XLA changed: re-measure and rewrite the causal control in the shard-mode guide."
    )


def one_dump(dumps: dict[str, str], suffix: str) -> str:
    """The one dump whose name ends in ``suffix`` (``after_optimizations.txt``: the final module)."""
    found = [text for name, text in dumps.items() if name.endswith(suffix)]
    if len(found) != 1:
        raise XlaChangedError(f"expected one *{suffix} dump, found {len(found)}")
    return found[0]


def _last_site_chain(dumps: dict[str, str], dims: tuple[int, int]) -> dict | None:
    """The dot -> ... -> transpose chain in the last per-pass dump with one (before fusion wraps
    the transpose), with its pipeline and next pass; ``None`` when no dump has one."""
    per_pass = sorted((parsed, name) for name in dumps if (parsed := parse_dump_name(name)))
    for (_, pipeline, _, before), name in reversed(per_pass):
        if sites := kernel_sites(dumps[name], dims):
            return {"pipeline": pipeline, "next_pass": before, "chain": sites[0].chain}
    return None


def control(config: StepConfig, remover: bool = False) -> dict:
    """The control for one (mode, variant): is the weight gradient written in the kernel's order?
    ``remover=False`` (the control) disables sharding-remover, which XLA:CPU runs by default."""
    lowered = build_step(config.replace(devices=1, mesh="dp")).lower()
    calls = sharding_call_count(hlo_text(lowered))
    dumps, error = compile_with_dumps(lowered, remover)
    ending = check_ending(f"{config.mode}/{config.variant}", calls, error, remover)
    final = one_dump(dumps, "after_optimizations.txt")
    stored = config.kernel_dims[:: -1 if config.head.lm_head_kernel_transposed else 1]
    transposes = [r for r in relayouts(final, stored) if r.opcode == "transpose"]
    first_module = pass_order(dumps)["module_before_first_algsimp"]
    return {
        "mode": config.mode,
        "variant": config.variant,
        "sharding_remover": "on" if remover else "off",
        "gradient_in_kernel_order": bool(kernel_order_dots(final, stored)) and not transposes,
        "gradient_transposes": len(transposes),
        "sharding_calls_at_first_simplifier": sharding_call_count(first_module),
        "chain_at_site": _last_site_chain(dumps, config.kernel_dims),
        "ending": ending,
    }


def paired_control(config: StepConfig) -> list[dict]:
    """One explicit module on one device, compiled with sharding-remover on and then off."""
    explicit = config.replace(mode="explicit", variant="EV", optimizer="none")
    return [control(explicit, remover=True), control(explicit, remover=False)]


def causal_control(base: StepConfig) -> list[dict]:
    """The control for every (shard mode x head variant) one device can run (no vocab-parallel:
    one device has no fsdp axis to shard the head on)."""
    return [control(config) for config in every_mode_and_variant(base.replace(mesh="dp"))]


def site_fates(lowered: jax.stages.Lowered, what: str) -> list[dict]:
    """Each transpose-of-dot site of a one-device step, in order, with what the first ``algsimp``
    did to it while ``sharding-remover`` is disabled (:func:`~snippets.hlo.passes.algsimp_fates`):
    its shapes, op name, ``folded`` and ``after_algsimp``. ``what`` names the step in an error."""
    dumps, error = compile_with_dumps(lowered)
    check_ending(what, sharding_call_count(hlo_text(lowered)), error)
    order = pass_order(dumps)
    before, after = order["module_before_first_algsimp"], order["module_after_first_algsimp"]
    if not before or not after:
        raise XlaChangedError("no per-pass dump around the first algsimp: XLA's pipeline changed")
    fates = algsimp_fates(before, after)
    unknown = {"folded": None, "after_algsimp": "changed by a pass before the first algsimp"}
    found = []
    for site in find_sites(read_hlo(one_dump(dumps, "before_optimizations.txt"))):
        shapes = [site.dot_shape.split("{")[0], site.shape.split("{")[0]]
        fate = fates.get(site.transpose, unknown)
        found.append({"shapes": shapes, "op_name": site.op_name} | fate)
    return found
