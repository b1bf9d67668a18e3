"""The panel's Jinja2 environment: every page is a template with autoescaping on.

Templates are package data (gateway/panel/templates/, pyproject's package-data), loaded through
the package so an installed copy finds them as well as a checkout. Autoescaping is on for every
template, so a value is escaped unless it is `Markup` (only `html.markdown()` makes one); no
template marks text `|safe` (tests/gateway/panel/test_escaping.py checks both). An undefined
name is an error, not an empty string, so a typo in a template fails its test.
"""

from __future__ import annotations

from typing import Any

from jinja2 import Environment, PackageLoader, StrictUndefined

from gateway.panel.html import PERSON_TABS, person_url, url, when

ENV = Environment(
    loader=PackageLoader("gateway.panel", "templates"),
    autoescape=True,
    undefined=StrictUndefined,
    trim_blocks=True,
    lstrip_blocks=True,
    auto_reload=False,
)
ENV.filters["when"] = when
ENV.globals.update(person_url=person_url, url=url, tabs=PERSON_TABS)


def render(template: str, **context: Any) -> str:
    return ENV.get_template(template).render(**context)
