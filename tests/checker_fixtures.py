"""The XLA dumps that find-barriers' own tests read (``find-barriers/tests/data/``), made from the
models of ``tests/checker_models.py`` and the steps of ``tests/checker_patterns.py``;
``python -m tests.checker_fixtures`` writes them anew.

Each is the ``before_optimizations`` module XLA:CPU dumps while compiling the step on four
simulated devices. Paths are made neutral (the models at ``/home/user/project/model.py`` and
``patterns.py``, installed packages under ``/venv``), so the files do not depend on where they
were made. The nnx step is dumped twice, by two driver scripts (``train.py`` runs it at its top
level, ``harness.py`` inside ``main()``): the same model, called from elsewhere.
"""

from __future__ import annotations

import importlib
import importlib.util
import runpy
import shutil
import sys
import tempfile
from collections.abc import Callable
from functools import partial
from pathlib import Path

import jax
from flax import nnx
from jax import lax
from jax.sharding import AxisType

ROOT = Path(__file__).resolve().parent.parent
DATA = ROOT / "find-barriers" / "tests" / "data"
MODEL = Path(__file__).with_name("checker_models.py")
PATTERNS = Path(__file__).with_name("checker_patterns.py")
NEUTRAL = "/home/user/project"
"""Where the dumps say the model is."""
OPTIONS = {"xla_dump_hlo_as_text": True, "xla_dump_hlo_module_re": "train_step"}
DRIVERS = {
    "train.py": """import jax
from patterns import nnx_step

mesh, train_step, args = nnx_step()
with jax.set_mesh(mesh):
    train_step.lower(*args).compile(compiler_options=options)
""",
    "harness.py": """import jax
from patterns import nnx_step


def main():
    mesh, train_step, args = nnx_step()
    with jax.set_mesh(mesh):
        train_step.lower(*args).compile(compiler_options=options)


main()
""",
}
"""Two scripts that dump the nnx step of ``patterns.py`` (``nnx.jit`` names its parameters by
position, so a baseline keys its sites by the model's functions), given ``options``."""


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
    jitted.lower(*args).compile(compiler_options=OPTIONS | {"xla_dump_to": str(folder)})
    return dumped(folder)


def dumped(folder: Path) -> str:
    """The one ``before_optimizations`` module in ``folder``, as text."""
    (found,) = folder.glob("*.before_optimizations.txt")
    return found.read_text()


def pattern_dumps(folder: Path) -> dict[str, str]:
    """Each step of ``checker_patterns`` dumped, by fixture name, from a copy in ``folder``."""
    folder.mkdir(parents=True)
    shutil.copy(PATTERNS, folder / "patterns.py")
    sys.path.insert(0, str(folder))
    try:
        patterns = importlib.import_module("patterns")
        steps = {
            "linen_remat": patterns.linen_step,
            "linen_remat_fixed": partial(patterns.linen_step, fixed=True),
            "nnx_tied_tree": partial(patterns.nnx_step, graph=False),
            "nnx_tied_fixed": partial(patterns.nnx_step, fixed=True, graph=False),
            "jax_checkpoint": patterns.jax_step,
            "jax_checkpoint_fixed": partial(patterns.jax_step, fixed=True),
            "shard_map_fsdp": patterns.shard_map_step,
        }
        found = {}
        for name, make in steps.items():
            mesh, step, args = make()
            with jax.set_mesh(mesh):
                found[name] = dump(step, args, folder / name)
        for name, driver in zip(("nnx_tied", "nnx_tied_moved"), DRIVERS, strict=True):
            (folder / driver).write_text(DRIVERS[driver])
            options = OPTIONS | {"xla_dump_to": str(folder / name)}
            runpy.run_path(str(folder / driver), {"options": options}, run_name="__main__")
            found[name] = dumped(folder / name)
    finally:
        sys.path.remove(str(folder))
        sys.modules.pop("patterns", None)
    return found


def neutral(text: str, folder: Path) -> str:
    """A dump's text with the paths of where it was made replaced by neutral ones."""
    text = text.replace(str(folder), NEUTRAL).replace(str(ROOT), NEUTRAL)
    return text.replace(sys.prefix, "/venv")


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
                text = neutral(text, folder / f"model{int(shifted)}")
                found[f"{name}{'_shifted' if shifted else ''}.hlo.txt"] = text
        for name, text in pattern_dumps(folder / "patterns").items():
            found[f"{name}.hlo.txt"] = neutral(text, folder / "patterns")
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
