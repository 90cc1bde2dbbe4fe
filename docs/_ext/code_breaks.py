"""Inline code wraps at its underscores: on a phone, ``lm_head_weight_grad_in_kernel_order`` breaks
after ``kernel_``, never inside ``kernel``. Each rendered page gets a ``<wbr>`` after every
underscore between two letters or digits of an inline literal; copied text is unchanged."""

from __future__ import annotations

import re

_INLINE_CODE = re.compile(r'(<code class="[^"]*\bliteral\b[^"]*">)(.*?)(</code>)', re.DOTALL)
_TAG = re.compile(r"(<[^>]*>)")
_INNER_UNDERSCORE = re.compile(r"(?<=[A-Za-z0-9])_(?=[A-Za-z0-9])")


def break_at_underscores(html: str) -> str:
    """``html`` with a ``<wbr>`` after each inner underscore in the text of its inline literals."""

    def one(code: re.Match[str]) -> str:
        start, inner, end = code.groups()
        pieces = _TAG.split(inner)  # text and tags alternate; only text changes
        text = (p if p.startswith("<") else _INNER_UNDERSCORE.sub("_<wbr>", p) for p in pieces)
        return start + "".join(text) + end

    return _INLINE_CODE.sub(one, html)


def _page(app, pagename, templatename, context, doctree):
    if "body" in context:
        context["body"] = break_at_underscores(context["body"])


def setup(app):
    app.connect("html-page-context", _page)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
