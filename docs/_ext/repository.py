"""The repository's address on the site: the theme's repository, source, edit, issue and Colab
links, the ``repository`` tag, and the ``{repository}`/``` role, all from ``repository_address``."""

from urllib.parse import urlparse

from docutils import nodes
from sphinx.util import logging

HOSTS = ("github.com", "gitlab.com", "bitbucket.org")
"""Where the theme can link a page's source (it knows no other host's address scheme)."""


def repository_options(url: str) -> dict[str, object]:
    """Theme options for the repository button and the source, edit and issue links of ``url``,
    and, for a GitHub repository, each guide's "Colab" launch button (it opens the guide's
    notebook beside it, ``guides/NAME.ipynb``).

    With no address there are no such links, and no placeholder stands in for one.
    """
    if not url:
        return {}
    colab = {"colab_url": "https://colab.research.google.com"}  # it opens GitHub's notebooks only
    return {
        "repository_url": url,
        "repository_branch": "main",
        "path_to_docs": "",
        "use_repository_button": True,
        "use_source_button": True,
        "use_edit_page_button": True,
        "use_issues_button": True,
    } | ({"launch_buttons": colab} if urlparse(url).hostname == "github.com" else {})


def repository_role(name, rawtext, text, lineno, inliner, options=None, content=None):
    """``{repository}`/``` shows the repository's address as a link; it needs one to be set.

    Pages use it inside ``{only} repository``, which Sphinx drops when no address is set.
    """
    url = inliner.document.settings.env.config.repository_address
    if not url:
        return [nodes.literal(rawtext, text)], []
    if text != "/":
        message = inliner.reporter.error(
            f"{{repository}} takes only '/' (the repository's address), not {text!r}", line=lineno
        )
        return [inliner.problematic(rawtext, rawtext, message)], [message]
    address = nodes.literal(url, url)  # shown whole, not shortened
    return [nodes.reference(rawtext, "", address, refuri=url)], []


def _apply_address(app, config):
    """With an address, turn on the theme's links to it and the ``repository`` tag; an address
    on another host is a warning that names it (an error in a ``-W`` build), and links nothing."""
    if urlparse(config.repository_address).hostname not in (None, *HOSTS):
        logging.getLogger(__name__).warning(
            "Repository address %r is not on %s: no page links to it",
            *(config.repository_address, ", ".join(HOSTS)),
        )
    elif config.repository_address:
        app.tags.add("repository")
        options = repository_options(config.repository_address)
        config.html_theme_options = config.html_theme_options | options


def setup(app):
    app.add_config_value("repository_address", "", "env")  # a new address re-reads every page
    app.add_role("repository", repository_role)
    app.connect("config-inited", _apply_address)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
