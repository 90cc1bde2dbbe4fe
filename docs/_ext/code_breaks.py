"""Inline code wraps between the words of a name: on a phone, a flag such as
``lm_head_weight_grad_in_kernel_order`` breaks after ``kernel_``, never inside ``kernel``, and
``snippets.measure.multihost`` after a dot.
Each rendered page gets a ``<wbr>`` after every underscore between two letters or digits of an
inline literal, and after every dot between a name and the next (not in a number such as
``0.2.5``); copied text is unchanged."""

from __future__ import annotations

import re

_INLINE_CODE = re.compile(r'(<code class="[^"]*\bliteral\b[^"]*">)(.*?)(</code>)', re.DOTALL)
_TAG = re.compile(r"(<[^>]*>)")
_WORD_END = re.compile(r"(?<=[A-Za-z0-9])_(?=[A-Za-z0-9])|(?<=[A-Za-z0-9_)\]])\.(?=[A-Za-z_])")
"""An underscore inside a name, or a dot between a name (or a call, or an index) and a name."""


def break_between_words(html: str) -> str:
    """``html`` with a ``<wbr>`` after each word end (``_WORD_END``) in its inline literals' text."""

    def one(code: re.Match[str]) -> str:
        start, inner, end = code.groups()
        pieces = _TAG.split(inner)  # text and tags alternate; only text changes
        text = (p if p.startswith("<") else _WORD_END.sub(r"\g<0><wbr>", p) for p in pieces)
        return start + "".join(text) + end

    return _INLINE_CODE.sub(one, html)


def _page(app, pagename, templatename, context, doctree):
    if "body" in context:
        context["body"] = break_between_words(context["body"])


def setup(app):
    app.connect("html-page-context", _page)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
