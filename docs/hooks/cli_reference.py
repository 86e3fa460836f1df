"""MkDocs hook: the command-line reference page is written from the parsers at build time.

``<!-- cli-reference -->`` in a page becomes one section per command holding its ``--help``
text (``judge.cli.command_help``), so the reference cannot drift from the code.
"""

from __future__ import annotations

MARK = "<!-- cli-reference -->"


def on_page_markdown(markdown, page, config, files):
    if MARK not in markdown:
        return markdown
    from judge.cli import command_help

    parts = []
    for name, text in command_help().items():
        parts.append(f"## `{name}`\n\n```text\n{text.rstrip()}\n```\n")
    return markdown.replace(MARK, "\n".join(parts))
