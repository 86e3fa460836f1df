"""The public surface is declared and importing judge stays light."""

from __future__ import annotations

import subprocess
import sys

import pytest

import judge


def test_public_names():
    assert sorted(judge.__all__) == sorted([
        "Cascade", "Classifier", "LabelError", "NotCalibratedError", "TrieAutomaton", "Vocabulary",
        "TrieLogitsProcessor", "calibration", "datasets", "__version__", "Engine", "Query", "Decider",
        "Choice", "YesNo", "Score", "structured", "PromptTemplate", "DEFAULT_PROMPT", "classify", "SetAnswer"])
    for name in judge.__all__:
        assert getattr(judge, name) is not None


def test_import_is_light():
    code = ("import sys, judge; heavy = [m for m in ('torch', 'transformers', 'matplotlib', 'datasets', 'pandas')"
            " if m in sys.modules]; print(heavy)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"


def _public_modules():
    import pkgutil

    names = ["judge"]
    for info in pkgutil.walk_packages(judge.__path__, "judge."):
        parts = info.name.split(".")
        if any(p.startswith("_") for p in parts[1:]):
            continue  # private modules: package internals
        names.append(info.name)
    return names


def test_every_public_module_is_covered():
    """The walk below sees every public module of the package (none silently missing)."""
    names = _public_modules()
    for expected in ("judge.engine.engine", "judge.engine.protocol", "judge.testing.reference",
                     "judge.automaton.trie", "judge.calibration.state", "judge.decisions", "judge.server"):
        assert any(n == expected or n.startswith(expected + ".") for n in names), expected


@pytest.mark.parametrize("name", _public_modules())
def test_every_public_callable_has_a_docstring_with_example(name):
    import importlib

    mod = importlib.import_module(name)
    missing = []
    for attr in getattr(mod, "__all__", []):
        obj = getattr(mod, attr)
        if callable(obj) and not (obj.__doc__ and "Examples" in obj.__doc__):
            missing.append(f"{name}.{attr}")
    assert not missing, missing
