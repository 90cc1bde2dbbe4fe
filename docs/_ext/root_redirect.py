"""An ``index.html`` at the top of the HTML output that opens the root document, for a site whose
root document is in a folder (``docs/index``); it shows the site's title and favicon (a file)."""

from pathlib import Path

REDIRECT = """<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8">
<meta http-equiv="refresh" content="0; url={target}">
<link rel="canonical" href="{target}">
<link rel="icon" href="_static/{favicon}">
<title>{title}</title></head>
<body><p><a href="{target}">{title}</a></p></body></html>
"""


def _write_root_redirect(app, exception):
    if exception is None and app.builder.format == "html":
        target = app.builder.get_target_uri(app.config.root_doc)
        favicon, title = Path(app.config.html_favicon).name, app.config.html_title
        page = REDIRECT.format(target=target, favicon=favicon, title=title)
        (app.outdir / "index.html").write_text(page)


def setup(app):
    app.connect("build-finished", _write_root_redirect)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
