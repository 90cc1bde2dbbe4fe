"""MaxText's own decoder on a simulated CPU mesh: its ``Sharding`` calls and transpose-of-dot sites.

The model is MaxText's llama2-style decoder, built from its ``base.yml`` with overrides that make
it small; the step is the gradient of a loss on its logits, read with :mod:`snippets.hlo`.
:func:`decoder_report` adds, with ``causal``, whether the first ``algsimp`` folds each site on one
device (:func:`~snippets.hlo.causal_control.site_fates`), with ``compiled``, each parameter
gradient's relayouts in the compiled module (:func:`~snippets.hlo.gradients.parameter_relayouts`).
"""

from __future__ import annotations

import dataclasses
import importlib
import os
import re
import warnings
from pathlib import Path
from typing import Any

from pydantic import model_validator

from find_barriers import TransposeSite, instructions, readable, shape_bytes
from find_barriers.jax import lowered_sites, output_names
from snippets.devices import MESH_DEVICES, SHARD_MODES, pick_devices
from snippets.hlo.causal_control import site_fates
from snippets.hlo.counts import sharding_call_count
from snippets.hlo.gradients import parameter_relayouts
from snippets.hlo.programs import compiled_text
from snippets.lowering import MESH_AXES, MeshName, mesh_shape
from snippets.support.cli import SetupError
from snippets.support.config import Config, PositiveInt

MAXTEXT_RELEASE = "0.2.5"
"""The MaxText release this module and its guide were made with (``uv.lock`` pins it)."""


def ici_parallelism(mesh: MeshName, devices: int) -> dict[str, int]:
    """MaxText's ``ici_data_parallelism`` and ``ici_fsdp_parallelism`` for a step mesh
    (one device: both 1).

    >>> ici_parallelism("dp_fsdp", 4), ici_parallelism("fsdp", 4), ici_parallelism("dp_fsdp", 1)
    ({'data': 2, 'fsdp': 2}, {'data': 1, 'fsdp': 4}, {'data': 1, 'fsdp': 1})
    """
    sizes = dict(zip(MESH_AXES[mesh], mesh_shape(mesh, devices), strict=True))
    return {"data": 1, "fsdp": 1} | (sizes if devices > 1 else {})


class DecoderConfig(Config):
    """The decoder's sizes and mesh; the MLP is twice as wide as the embedding."""

    emb: PositiveInt = 128
    vocab: PositiveInt = 512
    layers: PositiveInt = 1
    scan: bool = False
    mesh: MeshName = "dp"

    @model_validator(mode="after")
    def _emb_divides_over_fsdp(self) -> DecoderConfig:
        fsdp = ici_parallelism(self.mesh, MESH_DEVICES)["fsdp"]
        if self.emb % fsdp:
            raise ValueError(f"emb {self.emb} does not divide over the mesh's fsdp axis of {fsdp}.")
        return self

    def overrides(self, mode: str, devices: int = MESH_DEVICES) -> list[str]:
        """MaxText's command-line overrides of ``base.yml`` for this config, in ``mode``."""
        mesh = ici_parallelism(self.mesh, devices)
        return [
            f"hardware=cpu shard_mode={mode}",
            f"base_emb_dim={self.emb} base_num_decoder_layers={self.layers} base_mlp_dim={2 * self.emb}",
            f"base_num_query_heads=2 base_num_kv_heads=2 head_dim=64 vocab_size={self.vocab}",
            "per_device_batch_size=1 max_target_length=32",
            f"ici_data_parallelism={mesh['data']} ici_fsdp_parallelism={mesh['fsdp']}",
            "enable_checkpointing=false dataset_type=synthetic attention=dot_product",
            f"scan_layers={str(self.scan).lower()} dtype=float32 weight_dtype=float32",
            "skip_jax_distributed_system=true enable_goodput_recording=false monitor_goodput=false",
            "run_name=maxtext_decoder",
        ]


def import_maxtext() -> Any:
    """The ``maxtext`` package, or a SetupError naming the package it lacks; imported quietly
    (``transformers``' PyTorch warning, ``tqdm``'s ``IProgress`` one), with Flax's
    ``flax_always_shard_variable``, which it turns off, put back."""
    from flax import config as flax_config

    os.environ.setdefault("TRANSFORMERS_VERBOSITY", "error")
    shard_variables = flax_config.flax_always_shard_variable
    try:
        with warnings.catch_warnings():
            warnings.filterwarnings("ignore", message="IProgress not found")
            for module in ("configs.pyconfig", "utils.maxtext_utils", "utils.model_creation_utils"):
                importlib.import_module(f"maxtext.{module}")
    except ImportError as error:
        raise SetupError(
            f"MaxText {MAXTEXT_RELEASE} cannot be imported: {error} (the package {error.name!r} "
            "is missing; `uv sync --extra guides` installs what uv.lock pins)"
        ) from error
    finally:
        flax_config.update("flax_always_shard_variable", shard_variables)
    return importlib.import_module("maxtext")


def maxtext_config(config: DecoderConfig, mode: str, devices: int = MESH_DEVICES) -> Any:
    """MaxText's config object: ``base.yml`` with :meth:`DecoderConfig.overrides`, an output
    directory (nothing is written there), no persistent compilation cache (it would skip the
    compiles read here), and the process's ``XLA_FLAGS`` left as they were."""
    maxtext = import_maxtext()
    base = Path(maxtext.__file__).parent / "configs" / "base.yml"
    argv = ["maxtext_decoder", str(base), *" ".join(config.overrides(mode, devices)).split()]
    flags = os.environ.get("XLA_FLAGS")
    try:
        return maxtext.configs.pyconfig.initialize(
            argv, base_output_directory="maxtext_output", jax_cache_dir=""
        )
    finally:  # MaxText sets XLA_FLAGS to dump every module where it was unset; put it back
        os.environ.pop("XLA_FLAGS", None)
        os.environ.update({} if flags is None else {"XLA_FLAGS": flags})


@dataclasses.dataclass
class Decoder:
    """One shard mode's lowered step, the names of its outputs (the parameters), and its devices."""

    lowered: Any
    parameters: list[str]
    devices: int


def lower_decoder(config: DecoderConfig, mode: str, devices: int = MESH_DEVICES) -> Decoder:
    """MaxText's model on ``devices`` devices and ``jax.jit`` of its gradient step, lowered: the
    model made abstract under the mesh and logical axis rules, the tokens sharded, as MaxText's
    trainer and its ahead-of-time compile do."""
    if mode not in SHARD_MODES:
        raise ValueError(f"Unknown shard mode {mode!r}; expected one of {tuple(SHARD_MODES)}.")
    maxtext = import_maxtext()
    import jax
    import jax.numpy as jnp
    from flax import config as flax_config
    from flax import nnx

    cfg = maxtext_config(config, mode, devices)
    mesh = maxtext.utils.maxtext_utils.get_mesh_from_config(cfg, pick_devices(devices))
    unsharded = flax_config.temp_flip_flag("always_shard_variable", False)  # as MaxText wants
    with unsharded, jax.set_mesh(mesh), nnx.logical_axis_rules(cfg.logical_axis_rules):
        _, model = maxtext.utils.model_creation_utils.create_nnx_abstract_model(cfg, mesh)
        graphdef, params, rest = nnx.split(model, nnx.Param, ...)  # type: ignore[misc]  # flax types it variadic
        data = maxtext.utils.sharding.get_input_data_sharding(cfg, mesh)
        tokens = jax.ShapeDtypeStruct(
            (cfg.global_batch_size_to_train_on, cfg.max_target_length), jnp.int32, sharding=data
        )

        def loss(model, tokens, positions):
            logits = model(tokens, positions, enable_dropout=False)
            return jnp.mean(jax.nn.logsumexp(logits, axis=-1))

        def step(params, rest, tokens, positions):
            return nnx.grad(loss)(nnx.merge(graphdef, params, rest), tokens, positions)

        lowered = jax.jit(step).lower(params, rest, tokens, tokens)  # positions: same type
    names = [name.replace(".", "/") for name in output_names(lowered)]  # as site_row names them
    return Decoder(lowered, names, devices)


def site_row(site: TransposeSite) -> dict:
    """One site as plain data: shapes, what stands between, its parameter, op name, source, bytes."""
    return {
        "shapes": [site.dot_shape.split("{")[0], site.shape.split("{")[0]],
        "between": list(site.between),
        "parameter": site.output.replace(".", "/") if isinstance(site.output, str) else None,
        "op_name": site.op_name,
        "source": readable(site.source),
        "bytes": shape_bytes(site.shape),
    }


def mode_report(decoder: Decoder) -> dict:
    """The ``Sharding`` calls, program size and every transpose-of-dot site of one mode."""
    hlo = decoder.lowered.as_text(dialect="hlo")
    calls = sharding_call_count(hlo)
    return {
        "sharding_calls": calls,
        "other_instructions": len(instructions(hlo)) - calls,
        "sites": [site_row(site) for site in lowered_sites(decoder.lowered)],
    }


def what_it_is(site: dict) -> str:
    """A short label: the parameter (layer index as ``*``), else the einsum that made the dot.

    >>> what_it_is({"parameter": "decoder/layers_0/mlp/wi_0/kernel", "op_name": None})
    'mlp/wi_0'
    >>> what_it_is({"parameter": None, "op_name": "jit(step)/jvp(...k,k->...k)/dot_general"})
    'activation, ...k,k->...k'
    """
    if site["parameter"]:
        parts = [p for p in site["parameter"].split("/") if p not in ("decoder", "kernel")]
        return "/".join(p for p in parts if not re.fullmatch(r"layers(_\d+)?", p))
    einsum = re.search(r"([\w.]+,[\w.]+->[\w.]+)", site["op_name"] or "")
    where = einsum[1] if einsum else Path(site.get("source") or "?").name
    return f"activation, {where}"


def grouped(sites: list[dict], *keys: str) -> list[dict]:
    """Sites with the same label, shapes and ``keys`` merged into one row with a count."""
    rows: dict[tuple, dict] = {}
    for site in sites:
        key = (what_it_is(site), *site["shapes"], *(str(site.get(k)) for k in keys))
        row = rows.setdefault(key, {"site": key[0], "dot": key[1], "transpose": key[2]})
        row |= {k: site.get(k) for k in keys}
        row["count"] = row.get("count", 0) + 1
    return list(rows.values())


def with_folds(sites: list[dict], control: list[dict]) -> list[dict]:
    """``sites`` with the control's ``folded`` and ``after_algsimp``, matched by shapes and op
    name in order (the one-device step has the mesh's sites, in the same order)."""
    pending: dict[tuple, list[dict]] = {}
    for row in control:
        pending.setdefault((*row["shapes"], row["op_name"]), []).append(row)
    missing = {"folded": None, "after_algsimp": "no such site in the one-device step"}
    matched = []
    for site in sites:
        rows = pending.get((*site["shapes"], site["op_name"]), [])
        row = rows.pop(0) if rows else missing
        matched.append({**site, "folded": row["folded"], "after_algsimp": row["after_algsimp"]})
    return matched


def short_fate(after_algsimp: str) -> str:
    """A few words for a site's fate in the control.

    >>> short_fate("kept: dot -> reshape -> Sharding -> transpose")
    'kept: reshape, Sharding between'
    >>> short_fate("folded: the dot writes the transposed shape")
    'folded'
    """
    if after_algsimp.startswith("kept: "):
        between = after_algsimp.removeprefix("kept: ").split(" -> ")[1:-1]
        return f"kept: {', '.join(between)} between" if between else "kept, nothing between"
    if after_algsimp.startswith("kept; its dot became a "):
        return "dot became a " + after_algsimp.rsplit(" ", 1)[1]
    return after_algsimp.split(":", maxsplit=1)[0]


def fold_rows(explicit: list[dict], auto: list[dict]) -> list[dict]:
    """One row per kind of site: what the first algsimp did to it in each mode (same sites, same order)."""
    merged = [
        {**e, "explicit": short_fate(e["after_algsimp"]), "auto": short_fate(a["after_algsimp"])}
        for e, a in zip(explicit, auto, strict=True)
    ]
    return grouped(merged, "explicit", "auto")


def relayouts_by_label(relayouts: dict[str, list[dict]]) -> dict[str, str]:
    """Per parameter (layer index as ``*``): ``"N copy, M relabel"`` of its gradient, compiled.

    >>> relayouts_by_label({"decoder/layers_0/mlp/wo/kernel": [{"moves_data": True}, {"moves_data": False}]})
    {'mlp/wo': '1 copy, 1 relabel'}
    """
    summary: dict[str, list[str]] = {}
    for name, ops in relayouts.items():
        moved = sum(op["moves_data"] for op in ops)
        text = f"{moved} copy, {len(ops) - moved} relabel" if ops else "none"
        label = summary.setdefault(what_it_is({"parameter": name, "op_name": None}), [])
        label += [text] if text not in label else []
    return {label: " or ".join(texts) for label, texts in summary.items()}


def decoder_report(
    config: DecoderConfig, causal: bool = False, compiled: bool = False
) -> dict[str, Any]:
    """Both shard modes: ``Sharding`` calls and sites; with ``causal``, which folds the calls block."""
    report: dict[str, Any] = {"maxtext": MAXTEXT_RELEASE, "config": config.model_dump()}
    for mode in SHARD_MODES:
        decoder = lower_decoder(config, mode)
        report[mode] = mode_report(decoder)
        if causal:
            one_device = lower_decoder(config, mode, devices=1).lowered
            report[mode]["sites"] = with_folds(report[mode]["sites"], site_fates(one_device, mode))
        if compiled:
            text = compiled_text(decoder.lowered.compile())
            relayouts = parameter_relayouts(text, decoder.parameters, decoder.devices)
            report[mode]["gradient_relayouts"] = relayouts
    return report
