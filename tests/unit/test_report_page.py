"""The report's first page (calbench.cli.report): the summary's Markdown tables as reStructuredText tables, the key
figures inline, and a page that still renders before a run has results."""

from __future__ import annotations

import base64
import re

from docutils.core import publish_parts

from calbench.cli.report import front_page_rst, markdown_tables_rst

SUMMARY = """# calbench results

### nll (lower is better)

| source | uncal | ts |
|---|---|---|
| tiny | 0.85 (2) | 0.64 (1) |
| **average rank** | **2.0** | **1.0** |
"""


def _html(rst: str) -> str:
    return publish_parts(rst, writer="html", settings_overrides={"report_level": 2, "halt_level": 2})["html_body"]


def test_markdown_tables_become_html_tables():
    html = _html(markdown_tables_rst(SUMMARY))
    assert html.count("<table") == 1 and "<strong>nll (lower is better)</strong>" in html
    assert re.search(r"<td>0.64 \(1\)</td>", html) and "<strong>average rank</strong>" in html


def test_the_page_shows_the_summary_and_the_key_figures_inline(tmp_path):
    tables, figures = tmp_path / "results" / "tables", tmp_path / "results" / "figures" / "reliability" / "tiny"
    tables.mkdir(parents=True)
    figures.mkdir(parents=True)
    (tables / "summary.md").write_text(SUMMARY)
    png = b"\x89PNG\r\n\x1a\n" + bytes(range(256)) * 4
    (figures / "conf.png").write_bytes(png)
    page = front_page_rst(tmp_path, "The run's description.")
    assert "no recommendation: " in page  # no metrics table yet: said, not failed
    body = page.replace("{% raw %}", "").replace("{% endraw %}", "")
    html = _html(body)
    assert html.count("<table") == 1 and "The run's description." in html
    data = re.search(r'src="data:image/png;base64,(.*?)"', html, flags=re.S).group(1)
    assert max(map(len, body.splitlines())) < 10_000  # docutils refuses longer lines
    assert base64.b64decode(re.sub(r"\s", "", data)) == png
