"""The environment keeps the configuration as ``conf.py`` set it, so a rebuild with nothing
changed does not report a changed configuration.

Sphinx compares the configuration it reads with the one the last build pickled with its
environment, but it pickles the live configuration, which the themes and extensions change in
place after that comparison: the book and PyData themes add their template folders and set
``html_permalinks_icon``, ``html_sourcelink_suffix`` and theme options, sphinx-copybutton and
sphinx-design add their static folders, and Sphinx adds a priority to each ``html_css_files``
and ``html_js_files`` entry. So every rebuild said "The configuration has changed (7 options:
...)". Here each option holds its value as read while the environment is pickled, and its value
in use again before the pages are written.
"""

from __future__ import annotations

import copy
from typing import Any

from sphinx.application import Sphinx
from sphinx.builders import Builder
from sphinx.config import Config
from sphinx.environment import BuildEnvironment


class ConfigAsRead:
    """The options as read, and the values in use of those changed since, while swapped out."""

    def __init__(self) -> None:
        self.as_read: dict[str, Any] = {}
        self.in_use: dict[str, Any] = {}

    def remember(self, app: Sphinx, config: Config) -> None:
        """Copy every option once Sphinx has read and normalised the configuration."""
        self.as_read = {option.name: copy.deepcopy(option.value) for option in config}

    def put_back_as_read(self, app: Sphinx, env: BuildEnvironment) -> None:
        """Before the environment is pickled: the options changed since, as they were read."""
        for name, value in self.as_read.items():
            if app.config[name] != value:
                self.in_use[name] = app.config[name]
                setattr(app.config, name, value)

    def restore_in_use(self, app: Sphinx, builder: Builder) -> None:
        """Before the pages are written: the values the themes and extensions set again."""
        for name, value in self.in_use.items():
            setattr(app.config, name, value)
        self.in_use = {}


def setup(app: Sphinx) -> dict[str, Any]:
    kept = ConfigAsRead()
    # After Sphinx's own normalising handlers (priority 800), before the environment loads.
    app.connect("config-inited", kept.remember, priority=900)
    # After every other handler: the builder pickles the environment next.
    app.connect("env-updated", kept.put_back_as_read, priority=900)
    app.connect("write-started", kept.restore_in_use, priority=100)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
