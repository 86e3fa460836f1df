"""The ``--changed`` half of ``bench/mutation.py``: which lines a change touches, and which mutants sit on them.

Pure functions of git's and mutmut's diffs (no mutmut run here); ``bench/mutation.py`` imports them.
"""

from __future__ import annotations

import ast
import re
import subprocess
from pathlib import Path

_HUNK = re.compile(r"^@@ -(\d+)(?:,(\d+))? \+(\d+)(?:,(\d+))? @@")


def touched_lines(diff: str) -> dict[str, set]:
    r"""Per file, the line numbers (in its new version) that a ``git diff -U0`` adds or changes.

    Where lines were only removed, the two lines either side of the cut count as touched
    (the code that now runs without them). Deleted files are left out.

    Examples
    --------
    >>> diff = "+++ b/judge/a.py\n@@ -3 +3,2 @@\n@@ -10,2 +11,0 @@\n+++ /dev/null\n@@ -1,4 +0,0 @@"
    >>> {path: sorted(lines) for path, lines in touched_lines(diff).items()}
    {'judge/a.py': [3, 4, 11, 12]}
    """
    out: dict[str, set] = {}
    path = None
    for line in diff.splitlines():
        if line.startswith("+++ "):
            name = line[4:].rstrip("\t").strip()
            path = None if name == "/dev/null" else name[2:] if name.startswith("b/") else name
            continue
        m = _HUNK.match(line)
        if m and path is not None:
            start, n = int(m.group(3)), int(m.group(4) if m.group(4) is not None else 1)
            out.setdefault(path, set()).update(range(start, start + n) if n else (start, start + 1))
    return out


def _function_span(source: str, key: str) -> tuple[int, int] | None:
    """The first and last line of the function or method a mutmut key names (``...x_name__mutmut_3`` or
    ``...xǁClassǁname__mutmut_3``), decorators and the comments just above it included."""
    mangled = key.rsplit(".", 1)[-1].rpartition("__mutmut_")[0]
    cls, name = (mangled.split("ǁ")[1:3] if mangled.startswith("xǁ") else (None, mangled[2:]))
    tree = ast.parse(source)
    body = tree.body
    if cls is not None:
        body = next((n.body for n in tree.body if isinstance(n, ast.ClassDef) and n.name == cls), [])
    node = next((n for n in body if isinstance(n, ast.FunctionDef | ast.AsyncFunctionDef) and n.name == name), None)
    if node is None:
        return None
    lines = source.splitlines()
    first = min([node.lineno] + [d.lineno for d in node.decorator_list])
    while first > 1 and lines[first - 2].strip().startswith("#"):
        first -= 1
    return first, node.end_lineno


def mutant_lines(diff: str, source: str, key: str) -> set:
    r"""The lines of ``source`` that mutant ``key`` changes, from its diff (mutmut's ``get_diff_for_mutant``: the
    original function against the mutant, numbered from the function's first line).

    Each removed line is placed at the line of the function with the same text nearest to where the hunk
    numbering puts it (a method's lines are shown one indentation level out); a mutant that only inserts
    counts the line it inserts before.

    Examples
    --------
    >>> src = "import os\n\n\ndef f(x):\n    y = x + 1\n    return y\n"
    >>> d = "--- m.py\n+++ m.py\n@@ -1,3 +1,3 @@\n def f(x):\n-    y = x + 1\n+    y = x - 1\n     return y"
    >>> mutant_lines(d, src, "m.x_f__mutmut_1")
    {5}
    """
    span = _function_span(source, key)
    if span is None:
        return set()
    first, last = span
    lines = source.splitlines()
    out, old, removed_here = set(), 0, False
    for line in diff.splitlines():
        m = _HUNK.match(line)
        if m:
            old, removed_here = int(m.group(1)), False
            continue
        if line.startswith(("---", "+++")):
            continue
        if line.startswith("-"):
            guess = first + old - 1
            same = [i for i in range(first, last + 1) if lines[i - 1].strip() == line[1:].strip()]
            out.add(min(same, key=lambda i: abs(i - guess)) if same else guess)
            old, removed_here = old + 1, True
        elif line.startswith("+"):
            if not removed_here:
                out.add(min(max(first, first + old - 1), last))
        else:
            old += 1
    return out


def changed_mutants(diffs: dict, source: str, touched: set) -> list[str]:
    r"""The mutants (name -> diff) whose changed lines include a touched line, sorted.

    Examples
    --------
    >>> src = "def f(x):\n    return x + 1\n\n\ndef g(x):\n    return x * 2\n"
    >>> d = {"m.x_f__mutmut_1": "@@ -1,2 +1,2 @@\n def f(x):\n-    return x + 1\n+    return x - 1",
    ...      "m.x_g__mutmut_1": "@@ -1,2 +1,2 @@\n def g(x):\n-    return x * 2\n+    return x / 2"}
    >>> changed_mutants(d, src, {6})
    ['m.x_g__mutmut_1']
    """
    return sorted(k for k, d in diffs.items() if mutant_lines(d, source, k) & touched)


def changed_since(repo: Path, base: str) -> dict[str, set]:
    """Per file of ``judge/``, the lines touched since the merge base of ``base`` and HEAD: the commits since, what
    is staged or not yet staged, and files git does not track yet (every line)."""
    def git(*a):
        return subprocess.run(["git", "-C", str(repo), *a], capture_output=True, text=True, check=True).stdout

    mb = git("merge-base", base, "HEAD").strip()
    out = touched_lines(git("diff", "-U0", "--no-color", "--no-ext-diff", mb, "--", "judge"))
    for name in git("ls-files", "--others", "--exclude-standard", "--", "judge").split():
        if name.endswith(".py"):
            out[name] = set(range(1, len((repo / name).read_text().splitlines()) + 1))
    return out


# ----------------------------------------------------------------------------- one module
