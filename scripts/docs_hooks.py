"""MkDocs hooks (mkdocs.yml `hooks:`): fix two things mkdocs-click renders wrongly on the CLI page.

- The commands' help names placeholders in angle brackets (`trained/<run id>`); the
  page carries them as raw HTML, so a browser would hide them as unknown tags.
- click 8.3 marks an option declared without a default with a sentinel, which
  mkdocs-click prints as `Sentinel.UNSET`; the value such an option takes is what a
  reader wants: False for a flag, None otherwise.
"""

from __future__ import annotations

import re
from typing import Any

CLI_PAGE = "reference/cli.md"
#: `<run id>`, `<step>`, `<id>`: a lower-case word or words, never an HTML tag of the page.
PLACEHOLDER = re.compile(r"<((?:run |report )?id|step|name|8-digit step)>")
UNSET_FLAG = re.compile(r"(<td>boolean</td>\n<td>.*?</td>\n<td>)<code>Sentinel\.UNSET</code>", re.S)
UNSET = "<code>Sentinel.UNSET</code>"


def on_page_content(html: str, page: Any, **_: Any) -> str:
    if page.file.src_uri != CLI_PAGE:
        return html
    html = PLACEHOLDER.sub(r"&lt;\1&gt;", html)
    html = UNSET_FLAG.sub(r"\1<code>False</code>", html)
    return html.replace(UNSET, "<code>None</code>")
