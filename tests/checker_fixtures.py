"""The XLA dumps that find-barriers' own tests read (``find-barriers/tests/data/``), made from the
models of ``tests/checker_models.py``; ``python -m tests.checker_fixtures`` writes them anew.

Each is the ``before_optimizations`` module XLA:CPU dumps while compiling the step on four
simulated devices. Paths are made neutral (the model at ``/home/user/project/model.py``,
installed packages under ``/venv``), so the files do not depend on where they were made.
"""

from __future__ import annotations

import importlib.util
import shutil
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path

import jax
from flax import nnx
from jax import lax
from jax.sharding import AxisType

ROOT = Path(__file__).resolve().parent.parent
DATA = ROOT / "find-barriers" / "tests" / "data"
MODEL = Path(__file__).with_name("checker_models.py")
NEUTRAL = "/home/user/project"
"""Where the dumps say the model is."""


def load_model(shifted: bool, folder: Path):
    """``checker_models`` imported from a copy in ``folder`` (as ``model.py``), with a comment line
    added at its top when ``shifted``: every line of the model one further down."""
    source = MODEL.read_text()
    folder.mkdir(parents=True)
    path = folder / "model.py"
    path.write_text(("# one line more\n" if shifted else "") + source)
    spec = importlib.util.spec_from_file_location(f"model_{int(shifted)}", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def steps(model) -> dict[str, Callable[[], tuple[Callable, tuple]]]:
    """Each fixture's step and arguments, by name, from the model module ``model``."""
    return {
        "scanned": lambda: model.accumulating_step(
            model.ScannedStack(lax.dot_general, nnx.Rngs(0))
        ),
        "scanned_fixed": lambda: model.accumulating_step(
            model.ScannedStack(model.kernel_order_dot_general, nnx.Rngs(0))
        ),
        "three_layers": lambda: model.flat_step(model.ThreeLayers(nnx.Rngs(0))),
        "constrained": model.constrained_step,
    }


def dump(step: Callable, args: tuple, folder: Path) -> str:
    """The ``before_optimizations`` module of ``step`` XLA:CPU dumps, as text."""
    jitted = step if hasattr(step, "lower") else jax.jit(step)
    options = {"xla_dump_to": str(folder), "xla_dump_hlo_as_text": True}
    jitted.lower(*args).compile(compiler_options=options | {"xla_dump_hlo_module_re": "train_step"})
    (found,) = folder.glob("*.before_optimizations.txt")
    return found.read_text()


def fixtures() -> dict[str, str]:
    """Every fixture's text by file name: each step from the model as written, then, as
    ``*_shifted``, from the model with one line more at its top."""
    meshes = {
        axes: jax.make_mesh((4,), ("data",), axis_types=(axes,))
        for axes in (AxisType.Explicit, AxisType.Auto)
    }
    found = {}
    with tempfile.TemporaryDirectory() as temporary:
        folder = Path(temporary)
        for shifted in (False, True):
            model = load_model(shifted, folder / f"model{int(shifted)}")
            for name, build in steps(model).items():
                if shifted and name in ("scanned_fixed", "constrained"):
                    continue
                axes = AxisType.Auto if name == "constrained" else AxisType.Explicit
                with jax.set_mesh(meshes[axes]):
                    text = dump(*build(), folder / f"{name}{int(shifted)}")
                text = text.replace(f"{folder}/model{int(shifted)}", NEUTRAL)
                text = text.replace(str(ROOT), NEUTRAL).replace(sys.prefix, "/venv")
                found[f"{name}{'_shifted' if shifted else ''}.hlo.txt"] = text
    return found


def main() -> None:
    """Write the fixtures into ``DATA``, replacing the ones there."""
    shutil.rmtree(DATA, ignore_errors=True)
    DATA.mkdir(parents=True)
    for name, text in fixtures().items():
        (DATA / name).write_text(text)
        print(f"{DATA / name}: {len(text):,} characters")


if __name__ == "__main__":
    jax.config.update("jax_num_cpu_devices", 4)
    main()
