"""A throwaway Sphinx project that loads some of ``docs/_ext``'s extensions, built ``-W``."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from types import ModuleType

EXTENSIONS = Path(__file__).resolve().parent.parent / "docs/_ext"
GUIDE = """---
jupytext:
  text_representation:
    extension: .md
    format_name: myst
kernelspec:
  display_name: Python 3
  language: python
  name: python3
---

# A guide

```{code-cell} ipython3
1 + 1
```
"""
"""A one-cell guide, as jupytext writes a MyST notebook."""


def build_project(
    source: Path,
    out: Path,
    extensions: list[str | ModuleType],
    settings: str = "",
    *options: str,
    env: dict[str, str] | None = None,
) -> subprocess.CompletedProcess:
    """Write a ``conf.py`` loading ``extensions`` (``docs/_ext``'s as modules) with ``settings``
    to ``source``, and run ``sphinx-build -W --keep-going --no-color`` with ``options`` into ``out``."""
    names = [getattr(extension, "__name__", extension) for extension in extensions]
    conf = f"import sys\nsys.path.insert(0, {str(EXTENSIONS)!r})\nextensions = {names!r}\n"
    (source / "conf.py").write_text(conf + settings)
    # --no-color: a CI runner that forces colour would otherwise put escapes in the text tests read.
    command = [sys.executable, "-m", "sphinx", "-W", "--keep-going", "--no-color", *options]
    command.append(str(source))
    return subprocess.run(
        [*command, str(out)], capture_output=True, text=True, check=False, env=env
    )
