"""How long :func:`find_barriers.jax.lowered_sites` takes at a real model's scale, against the
lowering it reads, and how long the command line takes on that model's XLA dump directory.

By default MaxText's decoder at llama2-7b's shape, explicit mode, on 4 simulated devices: after a
warm-up, each repeat lowers the step and runs ``lowered_sites`` on it (untimed garbage collection
between), and a fresh ``find-barriers DIR`` process reads the dump. ``nox -s barrier_bench`` runs it.
"""

from __future__ import annotations

import contextlib
import gc
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path

import jax

from find_barriers import BEFORE
from find_barriers.jax import lowered_sites
from snippets.devices import MESH_DEVICES, SHARD_MODES, setup_devices
from snippets.hlo.maxtext_decoder import DecoderConfig, lower_decoder
from snippets.support.cli import Parser, positive_int, reported
from snippets.support.tables import print_report
from snippets.support.timing import spread

LLAMA2_7B = DecoderConfig(emb=4096, vocab=32000, layers=32)
"""llama2-7b's width, vocabulary and depth (MaxText's ``configs/models/llama2-7b.yml``)."""


def write_dump(lowered: jax.stages.Lowered, directory: str) -> Path:
    """XLA's own dump directory of ``lowered``, without a full compile: with every HLO pass
    disabled XLA:CPU writes the ``before_optimizations`` module (and its other files) first, then
    stops at the first ``Sharding`` call it cannot run (the error this expects)."""
    options = {"xla_dump_to": directory, "xla_dump_hlo_as_text": True}
    with contextlib.suppress(jax.errors.JaxRuntimeError):
        lowered.compile(compiler_options=options | {"xla_disable_all_hlo_passes": True})
    return Path(directory)


_CHECK_WITH_PEAK = """import sys
from find_barriers import main
try:
    main(sys.argv[1:])
finally:
    status = open("/proc/self/status").read()
    sys.stderr.write(status[status.index("VmHWM:") :].splitlines()[0])
"""
"""``find-barriers`` that writes its own peak RSS (``VmHWM``) to stderr: a child's ``ru_maxrss``
would count this process's memory, copied into it before ``exec``."""


def read_dump(path: Path) -> tuple[float, int, int]:
    """Seconds, peak resident bytes and exit status of ``find-barriers --format json PATH`` (a
    dump directory or file)."""
    command = [sys.executable, "-c", _CHECK_WITH_PEAK, "--format", "json", str(path)]
    started = time.perf_counter()
    result = subprocess.run(command, capture_output=True, text=True, check=False)
    seconds = time.perf_counter() - started
    return seconds, int(result.stderr.split()[-2]) * 1024, result.returncode


def bench_find_barriers(config: DecoderConfig, mode: str, repeats: int) -> dict:
    """Lower and check ``repeats`` times after one uncounted warm-up (imports, first traces), and
    read the dump of the first lowering as often."""
    runs: dict[str, list[float]] = {"lowering_s": [], "lowered_sites_s": []}
    lowered_sites(lower_decoder(config, mode).lowered)
    with tempfile.TemporaryDirectory() as directory:
        for repeat in range(repeats):
            started = time.perf_counter()
            lowered = lower_decoder(config, mode).lowered
            lowering = time.perf_counter() - started
            gc.collect()  # the lowering's garbage, collected outside both timings
            started = time.perf_counter()
            sites = lowered_sites(lowered)
            runs["lowered_sites_s"].append(time.perf_counter() - started)
            runs["lowering_s"].append(lowering)
            if repeat == 0:
                dump = write_dump(lowered, directory)
            del lowered
        reads = [read_dump(dump) for _ in range(repeats)]
        size = sum(file.stat().st_size for file in dump.glob(f"*{BEFORE}"))
    pairs = zip(runs["lowered_sites_s"], runs["lowering_s"], strict=True)
    ratios = [check / lowering for check, lowering in pairs]
    return {
        "config": config.model_dump() | {"mode": mode, "devices": MESH_DEVICES, "repeats": repeats},
        "sites": len(sites),
        "blocked": sum(site.blocked for site in sites),
        "dump_bytes": size,
        "dump_exit_status": sorted({status for _, _, status in reads}),
        "table": [
            {"measure": "lowering (s)", **spread(runs["lowering_s"])},
            {"measure": "lowered_sites (s)", **spread(runs["lowered_sites_s"])},
            {"measure": "lowered_sites / lowering", **spread(ratios)},
            {"measure": "dump directory, CLI (s)", **spread([seconds for seconds, _, _ in reads])},
            {"measure": "dump directory, peak RSS (MB)", **spread([r / 1e6 for _, r, _ in reads])},
        ],
    }


def main(argv: Sequence[str] | None = None) -> None:
    """Print the benchmark table, with the load average before and after."""
    parser = Parser(__doc__)
    parser.add_argument("--repeats", type=positive_int, default=5)
    for size in ("emb", "vocab", "layers"):
        parser.add_argument(f"--{size}", type=positive_int, default=getattr(LLAMA2_7B, size))
    parser.add_argument("--mode", choices=tuple(SHARD_MODES), default="explicit")
    args = parser.parse_args(argv)
    with reported(args.debug):
        config = DecoderConfig(emb=args.emb, vocab=args.vocab, layers=args.layers)
        setup_devices(MESH_DEVICES)
        load_before = Path("/proc/loadavg").read_text().strip()
        report = bench_find_barriers(config, args.mode, args.repeats)
    report["loadavg"] = {"before": load_before, "after": Path("/proc/loadavg").read_text().strip()}
    print_report(report, args.json)
