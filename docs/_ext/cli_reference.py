"""Sphinx extension: the command-line reference page is written from the parsers at build time.

``<!-- cli-reference -->`` in a page becomes one section per command holding its ``--help``
text (``judge.cli.command_help``), so the reference cannot drift from the code.
"""

from __future__ import annotations

MARK = "<!-- cli-reference -->"


def cli_sections() -> str:
    from judge.cli import command_help

    parts = []
    for name, text in command_help().items():
        parts.append(f"## `{name}`\n\n```text\n{text.rstrip()}\n```\n")
    return "\n".join(parts)


def on_source_read(app, docname, source):
    if MARK in source[0]:
        source[0] = source[0].replace(MARK, cli_sections())


def setup(app):
    app.connect("source-read", on_source_read)
    return {"version": "1", "parallel_read_safe": True, "parallel_write_safe": True}
