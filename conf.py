"""Sphinx configuration. The source directory is the repository root; the site's own extensions
are in ``docs/_ext``, one module each."""

import os
import sys
import tomllib
from pathlib import Path
from urllib.parse import urlparse

sys.path.insert(0, str(Path(__file__).parent / "docs" / "_ext"))

project = "JAX sharding performance, executed"
author = "The shard-perf-docs authors"
copyright = "2026, the shard-perf-docs authors"

extensions = [
    "myst_nb",
    "notfound.extension",
    "sphinx.ext.autodoc",
    "sphinx.ext.napoleon",  # Google-style Args: sections, as Flax and MaxText write them
    "sphinx.ext.viewcode",
    "sphinx_copybutton",
    "sphinx_design",
    # docs/_ext
    "code_breaks",
    "config_as_read",
    "execution_cache",
    "jax_source",
    "notebook_download",
    "plain_docstrings",
    "repository",
    "root_redirect",
    "snippet_source",
]

root_doc = "docs/index"
source_suffix = {".md": "myst-nb", ".ipynb": "myst-nb"}
exclude_patterns = [
    "README.md",
    "_build",
    ".*",  # .nox, .venv, .git, .ci, .pytest_cache and other hidden tool folders
    "**/.*",
    "venv",
    "node_modules",  # package.json's lint tools
    "*.egg-info",
    "tests",
    "snippets",
    "find-barriers",  # its README is the distribution's, not a page
    "guides/*.ipynb",  # each guide's notebook for Colab, written from the guide (the page)
]

# Guides execute at build time, before Sphinx reads them, each cached with the inputs it read
# (docs/_ext/execution_cache.py).
nb_execution_mode = "cache"
nb_execution_cache_path = "_build/.jupyter_cache"
nb_execution_raise_on_error = True
nb_execution_show_tb = True
nb_execution_timeout = 600
nb_merge_streams = True
nb_render_markdown_format = "myst"  # Markdown outputs (tables) are parsed as MyST
myst_heading_anchors = 3
myst_url_schemes = ["http", "https", "mailto", "ftp", "jax-source"]  # docs/_ext/jax_source.py

napoleon_numpy_docstring = False  # Google style only
nitpicky = True  # a cross-reference to nothing is a warning, so the -W build fails on it
nitpick_ignore_regex = [
    # Types from other projects: no intersphinx, the build stays offline.
    ("py:class", r"(collections|typing|os|pathlib|argparse|subprocess|jax|jaxlib|flax)\..*"),
    ("py:class", r"(numpy|optax|matplotlib|orbax|pydantic)\..*"),
    # What autodoc prints of snippets.support.config.PositiveInt's Annotated[int, Field(...)] metadata.
    ("py:class", r"\w+=.*|Strict|Ge|FieldInfo"),
    # A generic function's type parameter (def interleaved[K: Hashable]): no class to link to.
    ("py:class", r"[A-Z]"),
]
viewcode_follow_imported_members = False  # an imported name's page would link under the importer
autodoc_member_order = "bysource"
autodoc_typehints = "description"
autodoc_class_signature = "separated"  # nnx.Module's metaclass hides __init__'s parameters
autodoc_preserve_defaults = True  # defaults as written (jnp.float32), not their repr
autodoc_default_options = {"members": True, "show-inheritance": True}

html_theme = "sphinx_book_theme"
html_title = "JAX sharding performance, executed"
html_theme_options = {
    "show_toc_level": 2,
    "home_page_in_toc": True,
    "use_download_button": True,
    # One search per screen: the sidebar's field on a wide screen, the article header's button on
    # a narrow one. Unset, pydata-sphinx-theme 0.20 adds a top bar with a second search field.
    "navbar_persistent": [],
}
html_context = {"default_mode": "auto"}  # the theme logs an error for an unset mode
html_static_path = ["docs/_static"]
html_css_files = ["custom.css"]
html_js_files = [("search_excerpts.js", {"defer": "defer"})]
html_favicon = "docs/_static/favicon.svg"

# The repository's address, the one place it is set: pages show it and link their sources to it
# (docs/_ext/repository.py).
_project = tomllib.loads((Path(__file__).parent / "pyproject.toml").read_text())["project"]
repository_address = _project.get("urls", {}).get("Repository", "").rstrip("/")

# Where the site is published: Read the Docs, which sets READTHEDOCS_CANONICAL_URL. With that
# address, pages get a canonical link and the site a sitemap.xml; any other build has neither.
# The 404 page's links are absolute, so they start with the address's path ("/" without one).
_base_url = os.environ.get("READTHEDOCS_CANONICAL_URL", "")
if _base_url:
    html_baseurl = _base_url.rstrip("/") + "/"
    extensions.append("sphinx_sitemap")
    sitemap_url_scheme = "{link}"  # html_baseurl already holds any language and version
    sitemap_excludes = ["404.html", "genindex.html", "py-modindex.html", "search.html"]
    sitemap_excludes += ["_modules/*"]  # viewcode's highlighted sources
notfound_urls_prefix = urlparse(_base_url).path.rstrip("/") + "/"

# No network at build time: no intersphinx, no remote images.
