"""MkDocs hook: every notebook under docs/ (docs/examples/*.ipynb) is also a page of the site.

The page is made from the notebook as committed, outputs included (tests/notebook_exec.py
runs it and writes them; CI runs it again: tests/test_example_notebook.py): markdown cells as
they are, code cells as Python blocks, text outputs as text blocks, images inline, HTML (a
DataFrame, a result's summary) as it is. The notebook itself stays beside its page, linked
from it, for download. No plugin is needed for this, so the docs extras stay as they were.
"""

from __future__ import annotations

import html
import json
from pathlib import PurePosixPath
from typing import Any

from mkdocs.config.defaults import MkDocsConfig
from mkdocs.structure.files import File, Files


def on_files(files: Files, config: MkDocsConfig) -> Files:
    for notebook in [f for f in files if f.src_uri.endswith(".ipynb")]:
        page = str(PurePosixPath(notebook.src_uri).with_suffix(".md"))
        with open(notebook.abs_src_path, encoding="utf-8") as source:  # type: ignore[arg-type]
            content = as_markdown(json.load(source), PurePosixPath(notebook.src_uri).name)
        files.append(File.generated(config, page, content=content))
    return files


def as_markdown(notebook: dict[str, Any], name: str) -> str:
    parts = []
    for cell in notebook["cells"]:
        source = text(cell["source"])
        if cell["cell_type"] == "markdown":
            parts.append(source)
        elif cell["cell_type"] == "code":
            parts.append(f"```python\n{source}\n```")
            parts += [shown for output in cell.get("outputs", [])
                      if (shown := output_markdown(output))]
    parts.append(f"[Download this notebook]({name}) and run it with `dfl-mesh` installed.")
    return "\n\n".join(parts) + "\n"


def output_markdown(output: dict[str, Any]) -> str | None:
    kind = output["output_type"]
    if kind == "stream":
        return f"```text\n{text(output['text']).rstrip()}\n```"
    if kind == "error":
        return f"```text\n{output['ename']}: {output['evalue']}\n```"
    data = output.get("data", {})
    if "image/png" in data:
        return f'<img alt="cell output" src="data:image/png;base64,{text(data["image/png"])}">'
    if "image/svg+xml" in data:
        return f'<div class="nb-output">{text(data["image/svg+xml"])}</div>'
    if "text/html" in data:
        return f'<div class="nb-output">\n{text(data["text/html"])}\n</div>'
    if "text/plain" in data:
        return f"<pre>{html.escape(text(data['text/plain']))}</pre>"
    return None


def text(value: str | list[str]) -> str:
    """A notebook string, stored whole or as a list of lines."""
    return value if isinstance(value, str) else "".join(value)
