"""bench/mutation.py's ``--changed``: which lines a change touches, and which mutants sit on them.

The line logic is checked on a fake ``git diff -U0`` and fake mutant diffs (no mutmut needed), on a
throwaway git repository (commits since the merge base, staged and unstaged edits, untracked files; not
what the base branch did since), and, where mutmut is installed, on the diffs mutmut itself writes.
"""

from __future__ import annotations

import importlib.util
import subprocess
import textwrap

import pytest

from bench.mutation import (
    _diffs,
    _mutant_names,
    changed_mutants,
    changed_since,
    mutant_lines,
    touched_lines,
)

FAKE_DIFF = """\
diff --git a/judge/a.py b/judge/a.py
index 1111111..2222222 100644
--- a/judge/a.py
+++ b/judge/a.py
@@ -4 +4 @@ def f(x):
-    return x + 1
+    return x + 2
@@ -10,0 +11,3 @@ def g(x):
+    if x:
+        return 0
+    return 1
@@ -20,2 +22,0 @@ def h():
-    pass
-    pass
diff --git a/judge/gone.py b/judge/gone.py
deleted file mode 100644
--- a/judge/gone.py
+++ /dev/null
@@ -1,3 +0,0 @@
-x = 1
-y = 2
-z = 3
diff --git a/judge/old_name.py b/judge/new_name.py
similarity index 90%
rename from judge/old_name.py
rename to judge/new_name.py
--- a/judge/old_name.py
+++ b/judge/new_name.py
@@ -7 +7,2 @@ class K:
-        return 1
+        return 2
+        # unreachable
"""


def test_touched_lines_reads_additions_changes_and_the_cut_of_a_removal():
    got = touched_lines(FAKE_DIFF)
    # a one-line change; three added lines; two removed lines: the lines either side of where they were
    assert got == {"judge/a.py": {4, 11, 12, 13, 22, 23}, "judge/new_name.py": {7, 8}}


SOURCE = '''\
"""A module."""

import os


def f(x):
    y = x + 1
    y = x + 1
    return y


class K:
    # a comment just above the method
    def m(self, x):
        if x > 1:
            return 1
        return 1

    @staticmethod
    def s(x):
        return x * 2
'''


def _mutant(old: str, new: str, before: list[str], after: list[str], start: int) -> str:
    """A mutant's diff as mutmut writes it: the original function against the mutant, numbered from its first
    line, three lines of context (a method's lines one indentation level out)."""
    body = [f" {x}" for x in before] + [f"-{old}", f"+{new}"] + [f" {x}" for x in after]
    n = len(before) + 1 + len(after)
    return f"--- m.py\n+++ m.py\n@@ -{start},{n} +{start},{n} @@\n" + "\n".join(body)


def test_mutant_lines_place_each_change_on_its_source_line_among_lines_alike():
    lines = SOURCE.splitlines()
    # the second of two equal lines in f: the numbering decides between them
    second = _mutant("    y = x + 1", "    y = x - 1", ["def f(x):", "    y = x + 1"], ["    return y"], 1)
    assert mutant_lines(second, SOURCE, "judge.m.x_f__mutmut_2") == {8}
    first = _mutant("    y = x + 1", "    y = x - 1", ["def f(x):"], ["    y = x + 1", "    return y"], 1)
    assert mutant_lines(first, SOURCE, "judge.m.x_f__mutmut_1") == {7}
    # a method with a comment above it, shown dedented: the second `return 1`, not the first
    ret = _mutant("    return 1", "    return 2", ["    if x > 1:", "        return 1"], [], 3)
    got = mutant_lines(ret, SOURCE, "judge.m.xǁKǁm__mutmut_4")
    assert got == {17} and lines[16].strip() == "return 1"
    cond = _mutant("    if x > 1:", "    if x >= 1:", ["# a comment just above the method", "def m(self, x):"],
                   ["        return 1", "    return 1"], 1)
    assert mutant_lines(cond, SOURCE, "judge.m.xǁKǁm__mutmut_1") == {15}
    static = _mutant("    return x * 2", "    return x / 2", ["@staticmethod", "def s(x):"], [], 1)
    assert mutant_lines(static, SOURCE, "judge.m.xǁKǁs__mutmut_1") == {21}
    assert mutant_lines(static, SOURCE, "judge.m.xǁKǁgone__mutmut_1") == set()  # a function no longer there


def test_changed_mutants_keeps_exactly_those_on_touched_lines():
    diffs = {
        "judge.m.x_f__mutmut_1": _mutant("    y = x + 1", "    y = x - 1", ["def f(x):"],
                                         ["    y = x + 1", "    return y"], 1),
        "judge.m.x_f__mutmut_2": _mutant("    y = x + 1", "    y = x - 1", ["def f(x):", "    y = x + 1"],
                                         ["    return y"], 1),
        "judge.m.xǁKǁs__mutmut_1": _mutant("    return x * 2", "    return x / 2", ["@staticmethod", "def s(x):"],
                                          [], 1),
    }
    assert changed_mutants(diffs, SOURCE, {8, 9}) == ["judge.m.x_f__mutmut_2"]
    assert changed_mutants(diffs, SOURCE, {7, 21}) == ["judge.m.x_f__mutmut_1", "judge.m.xǁKǁs__mutmut_1"]
    assert changed_mutants(diffs, SOURCE, {1, 2, 3, 4, 10, 11, 12}) == []


def _git(repo, *args):
    return subprocess.run(["git", "-C", str(repo), *args], check=True, capture_output=True, text=True).stdout


def test_changed_since_is_the_branch_since_the_merge_base_plus_what_is_not_committed(tmp_path):
    repo = tmp_path / "r"
    (repo / "judge").mkdir(parents=True)
    _git(repo.parent, "init", "-q", "-b", "main", str(repo))
    _git(repo, "config", "user.email", "t@example.com")
    _git(repo, "config", "user.name", "t")
    a = repo / "judge" / "a.py"
    a.write_text("".join(f"x{i} = {i}\n" for i in range(1, 21)))
    (repo / "judge" / "b.py").write_text("y = 1\n")
    _git(repo, "add", ".")
    _git(repo, "commit", "-qm", "base")
    _git(repo, "checkout", "-qb", "work")
    a.write_text(a.read_text().replace("x3 = 3", "x3 = 30"))
    _git(repo, "commit", "-qam", "committed on the branch")
    _git(repo, "checkout", "-q", "main")
    a.write_text(a.read_text().replace("x18 = 18", "x18 = 180"))  # the base moves on: not this change's
    _git(repo, "commit", "-qam", "on main since")
    _git(repo, "checkout", "-q", "work")
    a.write_text(a.read_text().replace("x10 = 10", "x10 = 100"))  # staged
    _git(repo, "add", "judge/a.py")
    a.write_text(a.read_text().replace("x12 = 12", "x12 = 120"))  # not staged
    (repo / "judge" / "new.py").write_text("z = 1\nw = 2\n")  # not tracked yet
    (repo / "judge" / "notes.txt").write_text("not python\n")
    assert changed_since(repo, "main") == {"judge/a.py": {3, 10, 12}, "judge/new.py": {1, 2}}


@pytest.mark.skipif(importlib.util.find_spec("mutmut") is None, reason="mutmut is not installed (pip install mutmut==3.8.1)")
def test_the_diffs_mutmut_writes_map_to_the_lines_they_change(tmp_path):
    """On mutmut's own diffs (a fake repository of one module): each mutant's removed lines are the source's text
    on the lines it is placed on, for functions, a commented method and a static method."""
    from bench.mutation import MODULES, Module, _env, _scratch, changed_lines

    repo = tmp_path / "repo"
    (repo / "judge").mkdir(parents=True)
    (repo / "tests").mkdir()
    (repo / "judge" / "__init__.py").write_text("")
    (repo / "judge" / "m.py").write_text(SOURCE)
    (repo / "tests" / "conftest.py").write_text("")
    (repo / "tests" / "test_m.py").write_text("from judge.m import f\n\n\ndef test_f():\n    assert f(1) == 2\n")
    (repo / "pyproject.toml").write_text(textwrap.dedent("""\
        [project]
        name = "judge"
        version = "0"
        """))
    mod = Module("judge/m.py", ["tests/test_m.py"])
    assert "m" not in MODULES
    env = _env(repo, mod)
    scratch = _scratch(repo, "m", mod, tmp_path / "work")
    names = _mutant_names(scratch, env)
    diffs = _diffs(scratch, names, env)
    assert len(names) >= 6
    lines = SOURCE.splitlines()
    for name, diff in diffs.items():
        got = mutant_lines(diff, SOURCE, name)
        old, _ = changed_lines(diff)
        assert got and {lines[i - 1].strip() for i in got} >= {o.strip() for o in old}, (name, diff)
    on_m = changed_mutants(diffs, SOURCE, {15})  # `if x > 1:` in the commented method
    assert on_m and all("xǁKǁm__mutmut_" in n for n in on_m)
