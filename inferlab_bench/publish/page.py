"""The HTML page's one template, rendered by Jinja2 with autoescape on: every value is escaped.

The page is built as plain blocks (headings, paragraphs, tables, lists, images) of text parts;
the template is the only place markup is written, and only our own constants (the style and
the plot-counting script) are marked safe. A value from a bundle, a result file or a peer's
file can therefore never become markup, whichever field it reached the page through.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import jinja2

STYLE = """
body{font-family:system-ui,sans-serif;margin:2em;color:#222;max-width:1200px}
table{border-collapse:collapse;margin:0.5em 0 1.5em}
td,th{border:1px solid #ccc;padding:3px 8px;text-align:right}
td:first-child,th:first-child{text-align:left}
.same{color:#333}.faster{color:#080;font-weight:bold}.slower{color:#b00;font-weight:bold}
.nc{color:#a60}.fail{color:#b00}.pass{color:#080}.note{color:#666;font-size:90%}
img{max-width:100%;border:1px solid #eee}
code{font-size:90%}
"""
SCRIPT = """
window.addEventListener('load', function () {
  var shown = 0;
  document.querySelectorAll('img.plot').forEach(function (img) {
    if (img.complete && img.naturalWidth > 0) { shown += 1; }
  });
  document.body.setAttribute('data-plots-rendered', String(shown));
});
"""
CLASSES = frozenset({"", "same", "faster", "slower", "nc", "fail", "pass", "unknown", "note"})
"""The only class names a part may carry (a value never picks one)."""

TEMPLATE = """<!DOCTYPE html>
{%- macro part(p) -%}
{%- if p.cls %}<span class="{{ p.cls }}">{{ p.text }}</span>
{%- elif p.code %}<code>{{ p.text }}</code>
{%- elif p.bold %}<b>{{ p.text }}</b>
{%- else %}{{ p.text }}{% endif -%}
{%- endmacro %}
<html lang="en"><head><meta charset="utf-8"><title>{{ title }}</title>
<style>{{ style | safe }}</style></head><body>
{%- for b in blocks %}
{%- if b.kind == "heading" %}
<h{{ b.level }}>{{ b.text }}</h{{ b.level }}>
{%- elif b.kind == "paragraph" %}
<p{% if b.cls %} class="{{ b.cls }}"{% endif %}>{% for p in b.parts %}{{ part(p) }}{% endfor %}</p>
{%- elif b.kind == "table" %}
<table>{% if b.header %}<thead><tr>
{%- for h in b.header %}<th>{{ h }}</th>{% endfor %}</tr></thead>{% endif %}<tbody>
{%- for row in b.rows %}<tr>{% for c in row %}<td>{{ part(c) }}</td>{% endfor %}</tr>{% endfor -%}
</tbody></table>
{%- elif b.kind == "list" %}
<ul>{% for item in b.items %}<li>{% for p in item %}{{ part(p) }}{% endfor %}</li>{% endfor %}</ul>
{%- elif b.kind == "image" %}
<p><img class="plot" alt="{{ b.text }}" src="data:image/png;base64,{{ b.data }}"></p>
{%- endif %}
{%- endfor %}
<script>{{ script | safe }}</script></body></html>
"""
_ENVIRONMENT = jinja2.Environment(
    autoescape=True, undefined=jinja2.StrictUndefined, keep_trailing_newline=True
)
_TEMPLATE = _ENVIRONMENT.from_string(TEMPLATE)


@dataclass(frozen=True)
class Part:
    """A run of text, optionally styled by one of our own class names."""

    text: str
    cls: str = ""
    code: bool = False
    bold: bool = False

    def __post_init__(self) -> None:
        if self.cls not in CLASSES:
            raise ValueError(f"class {self.cls!r} is not one of the page's own")


Cell = Part | str


@dataclass(frozen=True)
class Block:
    kind: str
    text: str = ""
    level: int = 2
    cls: str = ""
    parts: tuple[Part, ...] = ()
    header: tuple[str, ...] = ()
    rows: tuple[tuple[Part, ...], ...] = ()
    items: tuple[tuple[Part, ...], ...] = ()
    data: str = ""


def heading(text: str, level: int = 2) -> Block:
    return Block("heading", text=text, level=level)


def paragraph(*parts: Cell, cls: str = "") -> Block:
    if cls not in CLASSES:
        raise ValueError(f"class {cls!r} is not one of the page's own")
    return Block("paragraph", parts=_parts(parts), cls=cls)


def table(header: Sequence[str], rows: Sequence[Sequence[Cell]]) -> Block:
    """A table; an empty ``header`` leaves the header row out (no empty row)."""
    return Block("table", header=tuple(header), rows=tuple(_parts(r) for r in rows))


def bullets(items: Sequence[Sequence[Cell]]) -> Block:
    return Block("list", items=tuple(_parts(i) for i in items))


def image(alt: str, base64_png: str) -> Block:
    return Block("image", text=alt, data=base64_png)


def render(title: str, blocks: Sequence[Block]) -> str:
    return _TEMPLATE.render(title=title, blocks=blocks, style=STYLE, script=SCRIPT)


def _parts(cells: Sequence[Cell]) -> tuple[Part, ...]:
    return tuple(c if isinstance(c, Part) else Part(str(c)) for c in cells)
