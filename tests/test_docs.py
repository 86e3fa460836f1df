"""The documentation: the site builds with warnings as errors, and every code block on a page
either runs here or says why not.

A fenced block is run when it is Python and carries no mark; any block may be followed by one
line ``<!-- not run: REASON -->`` or ``<!-- runs in CI: WHERE -->`` (WHERE names the test or the
CI step that runs it). Blocks in other languages must carry one of the two. Python blocks run
from the repository root in a fresh interpreter, one subprocess each (identical blocks once).
"""

from __future__ import annotations

import hashlib
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]
MARK = re.compile(r"^<!-- (not run(?: in CI| here)?|runs in CI): (.{10,}) -->$")


def blocks(path: Path):
    """(line, language, code, mark) of each fenced block of a Markdown page."""
    lines = path.read_text().split("\n")
    out, i = [], 0
    while i < len(lines):
        if lines[i].startswith("```"):
            lang, j = lines[i][3:].strip(), i + 1
            while j < len(lines) and not lines[j].startswith("```"):
                j += 1
            assert j < len(lines), f"{path.name}:{i + 1}: a code block is never closed"
            after = lines[j + 1] if j + 1 < len(lines) else ""
            m = MARK.match(after)
            out.append((i + 1, lang, "\n".join(lines[i + 1:j]), m))
            i = j + 1
        else:
            i += 1
    return out


def runnable():
    seen, out = set(), []
    for page in PAGES:
        for line, lang, code, mark in blocks(page):
            if lang == "python" and (mark is None or mark.group(1) == "runs in CI"):
                key = hashlib.sha1(code.encode()).hexdigest()
                if key not in seen:
                    seen.add(key)
                    out.append(pytest.param(code, id=f"{page.relative_to(ROOT)}:{line}"))
    return out


def test_every_block_has_a_language_and_runs_or_says_why_not():
    problems = []
    for page in PAGES:
        for line, lang, _, mark in blocks(page):
            where = f"{page.relative_to(ROOT)}:{line}"
            if not lang:
                problems.append(f"{where}: no language after the fence")
            elif lang != "python" and mark is None:
                problems.append(f"{where}: a {lang} block without '<!-- not run: why -->' or '<!-- runs in CI: where -->'")
    assert not problems, "\n".join(problems)
    assert len(runnable()) >= 2  # the first example and the decisions example, at least


def test_the_marks_name_tests_that_exist():
    for page in PAGES:
        for _, _, _, mark in blocks(page):
            if mark is None:
                continue
            for name in re.findall(r"tests/[\w/]+\.py", mark.group(2)):
                assert (ROOT / name).is_file(), f"{page.name} names {name}, which does not exist"


@pytest.mark.model
@pytest.mark.parametrize("code", runnable())
def test_python_block_runs(code, datasets_dir):
    code = code.replace('"../shared/datasets"', repr(str(datasets_dir)))  # where JUDGE_SHARED_DIR points
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=600)
    assert out.returncode == 0, out.stderr[-4000:]


def test_the_site_builds_with_warnings_as_errors(tmp_path):
    out = subprocess.run([sys.executable, "-m", "mkdocs", "build", "--strict", "-q", "-d", str(tmp_path / "site")],
                         cwd=ROOT, capture_output=True, text=True, timeout=600,
                         env={**os.environ, "NO_MKDOCS_2_WARNING": "1"})
    assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-3000:]
    cli = (tmp_path / "site" / "reference" / "cli" / "index.html").read_text()
    api = (tmp_path / "site" / "reference" / "api" / "index.html").read_text()
    for command in ("judge predict", "judge serve", "judge fit-decisions", "--labels"):
        assert command in cli  # generated from the parsers
    for name in ("Classifier", "predict_proba", "Decider", "Scorer", "VLLMScorer", "classify_dataset"):
        assert name in api  # generated from the docstrings
