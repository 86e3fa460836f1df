"""Mutation testing of the modules that carry the promises, each against its relevant tests only.

    pip install mutmut==3.8.1            # not a dependency of the package, of dev or of CI
    OMP_NUM_THREADS=1 python -m bench.mutation --modules high --json bench/results/mutation.json
    python -m bench.mutation --modules engine.masks,engine.options --sample 80 --json bench/results/mutation.json
    python -m bench.mutation --list                                  # the modules, their tests and targets
    python -m bench.mutation --report bench/results/mutation.json    # the table of a results file
    python -m bench.mutation --changed main                          # only the lines a change touches (below)

For each module (see ``--list``): a scratch copy of the repository (``judge/``, ``tests/``,
``pyproject.toml`` with a ``[tool.mutmut]`` section naming the module and its tests) in a
temporary folder outside the work tree, ``mutmut run`` there (one worker by default: the
machines here are shared), then every mutant's status and, for those not killed, its diff.
mutmut runs only the selected tests that reach the mutated function, in a process forked
after the tests were imported once, ``-x``: a killed mutant costs its first failing test.
The selections include the module's doctests and the ``slow`` tests of its files (the
wider property tests: the ``mutation`` hypothesis profile of tests/conftest.py is loaded).
mutmut's copies of each function (one per mutant, and the original's) carry its docstring:
their doctests are deselected (``-k "not __mutmut_"``), so each doctest runs once, through
the function's own name (which calls the mutant under test). Before this, a module's doctests
ran once per mutant of it in every pass: calibration.metrics' 11 became 518, 225 s a pass.

Each mutant is one of

* ``killed`` (a selected test failed), ``timeout`` (it ran past mutmut's limit: an endless
  loop that CI would also notice; counted as detected);
* ``survived`` (every selected test that reaches it passed), ``no tests`` (no selected test
  reaches its function: not detected either);
* ``equivalent``: a survivor listed in ``bench/mutation_equivalent.json`` with a one-line reason
  (the entry names the mutant and its changed lines; an entry whose lines no longer match
  is reported as stale and the mutant as survived).

and of one of two kinds: ``message`` (only the wording of an error message or warning
changed: a string literal inside ``raise``, ``warn(...)`` or an exception's constructor)
or ``code`` (everything else). The **score** is detected / (code mutants - equivalent); the
score over every mutant, messages included, is reported beside it.

Writes (``--json``) per module: the counts, the score and its target (0.9 for
``engine.search``, ``calibration.state``, ``server.admission``, ``adaptation.head``;
0.8 for the others), the seconds it took, the survivors with their diffs, and the
equivalents with their reasons; modules not run in this call keep their earlier entry.
With ``--sample N`` a seeded random sample of N mutants per module is run (the score is
then an estimate; the entry says so).

``--changed BASE`` is the habit before closing an issue that changes a promise-carrying module:
the lines the change touches (``git diff BASE...HEAD`` plus what is not committed yet, staged or
not, and files not yet tracked) in the modules of ``--list``, every mutant of those modules
whose changed line is one of them, then a seeded sample of at most ``--max-mutants`` (20) of
them run against the modules' own tests; the survivors are printed with their diffs. Its cost
is one run of each touched module's tests (mutmut's stats and clean runs) plus the mutants.

What it deliberately does not do: run in CI (a module takes minutes to an hour on one
core), mutate the numba kernels (mutmut leaves decorated functions alone; their
Python loops run with ``NUMBA_DISABLE_JIT=1`` in the tests of ``automaton.kernels``), or
decide which survivors are equivalent (a person does, in the JSON file above).
"""

from __future__ import annotations

import argparse
import ast
import json
import os
import random
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

from bench._mutation_diff import changed_mutants, changed_since, mutant_lines, touched_lines  # noqa: F401 (re-exported)

REPO = Path(__file__).resolve().parents[1]
EQUIVALENT = REPO / "bench" / "mutation_equivalent.json"
MUTMUT = "mutmut==3.8.1"

_ENGINE_TESTS = ["tests/test_classifier.py", "tests/engine/test_search.py", "tests/test_architectures.py",
                 "tests/engine/test_passes.py",
                 "tests/server/test_limits.py::test_split_rows_score_as_one_row",
                 "tests/server/test_limits.py::test_plan_covers_every_option_once_within_the_budgets",
                 "tests/server/test_limits.py::test_blockwise_masks_equal_the_naive_mask",
                 "tests/server/test_limits.py::test_engine_refuses_positions_past_the_context"]
_AUTOMATON_TESTS = ["tests/automaton/test_trie.py", "tests/automaton/test_vocab.py",
                    "tests/automaton/test_token_classes.py"]
_CALIBRATION_TESTS = ["tests/calibration/test_calibration.py", "tests/test_calibrated.py"]
_COMPILED_TESTS = ["tests/test_compiled.py", "tests/test_label_paths.py", "tests/test_classifier.py",
                   "tests/engine/test_search.py", "tests/test_label_sets.py",  # label_sets: the prefetch
                   "tests/test_accuracy_options.py"]  # rotation averaging against its reference
# the engine-level drawn property (it never reaches the compiled set) and the two-minute default-decode_above check
# (its fast twin, test_every_path_answers_by_one_definition_above_and_below_decode_above, runs)
_COMPILED_SKIP = ["tests/engine/test_search.py::test_certified_search_equals_full_exact_drawn",
                  "tests/engine/test_search.py::test_thousands_of_tool_names_answer_by_one_definition_at_the_default_decode_above"]
_GUARD_TESTS = ["tests/decisions/test_guard.py", "tests/decisions/test_guard_methods.py"]
# the server tests that time, measure memory or start a subprocess: slow, and they add nothing that
# the in-process tests of admission do not check
_SERVER_SKIP = ["tests/server/test_limits.py::test_peak_memory_of_the_largest_requests_stays_under_the_documented_bound",
                "tests/server/test_limits.py::test_sigterm_lets_the_request_in_flight_finish",
                "tests/server/test_limits.py::test_a_flood_of_oversized_requests_does_not_hold_up_a_small_one",
                "tests/server/test_limits.py::test_a_client_that_disconnects_has_its_waiting_work_dropped",
                "tests/server/test_limits.py::test_a_small_request_is_served_in_turn_with_a_large_one"]


@dataclass
class Module:
    path: str
    tests: list
    target: float = 0.8
    env: dict = field(default_factory=dict)
    deselect: list = field(default_factory=list)


MODULES = {
    "engine.search": Module("judge/engine/search.py", ["tests/engine/test_search.py"], 0.9),
    "calibration.state": Module("judge/calibration/state.py", ["tests/calibration/test_calibration.py",
                                                               "tests/adaptation/test_fit.py"], 0.9),
    "server.admission": Module("judge/server/admission.py", ["tests/server/test_admission.py",
                                                             "tests/server/test_limits.py", "tests/server/test_app.py",
                                                             "tests/server/test_guard.py"],
                               0.9, deselect=_SERVER_SKIP),
    "adaptation.head": Module("judge/adaptation/head.py", ["tests/adaptation/test_fit.py",
                                                           "tests/test_baselines_beside.py",
                                                           "tests/adaptation/test_choosing.py",
                                                           "tests/adaptation/test_selftrain.py"], 0.9),
    "adaptation.selftrain": Module("judge/adaptation/selftrain.py", ["tests/adaptation/test_selftrain.py"]),
    "adaptation.fit": Module("judge/adaptation/fit.py", ["tests/adaptation/test_fit.py",
                                                         "tests/adaptation/test_selftrain.py",
                                                         "tests/adaptation/test_choosing.py"]),
    "adaptation.tuning": Module("judge/adaptation/tuning.py", ["tests/adaptation/test_tuning.py",
                                                               "tests/adaptation/test_choosing.py"]),
    "adaptation.choosing": Module("judge/adaptation/choosing.py", ["tests/adaptation/test_choosing.py",
                                                                   "tests/adaptation/test_fit.py"]),
    "engine.passes": Module("judge/engine/passes.py", _ENGINE_TESTS),
    "engine.forest": Module("judge/engine/forest.py", _ENGINE_TESTS),
    "engine.masks": Module("judge/engine/masks.py", _ENGINE_TESTS),
    "engine.options": Module("judge/engine/options.py", _ENGINE_TESTS),
    "automaton.trie": Module("judge/automaton/trie.py", _AUTOMATON_TESTS),
    "automaton.vocab": Module("judge/automaton/vocab.py", _AUTOMATON_TESTS),
    "automaton.kernels": Module("judge/automaton/_kernels.py", ["tests/automaton/test_trie.py",
                                                               "tests/automaton/test_token_classes.py",
                                                               "tests/automaton/test_kernels.py"],
                                env={"NUMBA_DISABLE_JIT": "1"}),
    "calibration.bias": Module("judge/calibration/bias.py", _CALIBRATION_TESTS),
    "calibration.temperature": Module("judge/calibration/temperature.py", _CALIBRATION_TESTS),
    "calibration.abstention": Module("judge/calibration/abstention.py", _CALIBRATION_TESTS),
    "calibration.conformal": Module("judge/calibration/conformal.py", _CALIBRATION_TESTS),
    "decisions.calibration": Module("judge/decisions/calibration.py", ["tests/decisions/test_decider.py"]),
    "decisions.decider": Module("judge/decisions/decider.py", ["tests/decisions/test_decider.py"]),
    "decisions.priors": Module("judge/decisions/priors.py", ["tests/decisions/test_decider.py"]),
    "decisions.prompts": Module("judge/decisions/prompts.py", ["tests/decisions/test_decider.py"]),
    "decisions.questions": Module("judge/decisions/questions.py", ["tests/decisions/test_decider.py"]),
    "calibration.metrics": Module("judge/calibration/metrics.py", ["tests/calibration/test_calibration.py"]),
    "compiled": Module("judge/compiled.py", _COMPILED_TESTS, deselect=_COMPILED_SKIP),
    "label_paths": Module("judge/label_paths.py", _COMPILED_TESTS, deselect=_COMPILED_SKIP),
    "decisions.guard": Module("judge/decisions/guard.py", _GUARD_TESTS),
    "decisions.fusion": Module("judge/decisions/fusion.py", ["tests/decisions/test_fusion.py"]),
    "fusion": Module("judge/fusion.py", ["tests/test_fusion.py", "tests/test_calibrated.py", "tests/test_experts.py"]),
    "experts": Module("judge/experts.py", ["tests/test_experts.py", "tests/test_fusion.py", "tests/test_compiled.py",
                                           "tests/multilabel/test_multilabel.py"]),
    "transductive": Module("judge/transductive.py", ["tests/test_fusion.py"]),
    "calibrated": Module("judge/calibrated.py",
                                    [*_CALIBRATION_TESTS, "tests/test_fusion.py",
                                     "tests/multilabel/test_multilabel.py"]),
    "server.routes": Module("judge/server/routes.py", ["tests/server/test_routes.py", "tests/server/test_admission.py"]),
    "engine.states": Module("judge/engine/states.py", ["tests/test_architectures.py", "tests/adaptation/test_fit.py"]),
    "decisions.profiles": Module("judge/decisions/profiles.py", ["tests/decisions/test_profiles.py"]),
    "multilabel": Module("judge/multilabel/__init__.py", ["tests/multilabel/test_multilabel.py",
                                                          "tests/multilabel/test_models.py"]),
    "multilabel.models": Module("judge/multilabel/models.py", ["tests/multilabel/test_models.py",
                                                               "tests/multilabel/test_multilabel.py"]),
}
GROUPS = {"high": [k for k, m in MODULES.items() if m.target >= 0.9], "all": list(MODULES)}

#: mutmut's exit codes (mutmut.stats.status_by_exit_code, 3.8), folded into this report's statuses
_STATUS = {1: "killed", 3: "killed", 0: "survived", 5: "no tests", 33: "no tests", 34: "skipped", 36: "timeout",
           -24: "timeout", 24: "timeout", 152: "timeout", 255: "timeout", None: "not checked"}
DETECTED = ("killed", "timeout")


# ----------------------------------------------------------------------------- kinds of mutants
def message_lines(source: str) -> set:
    """Line numbers of the error messages and warnings in ``source``: inside ``raise``, ``warn(...)``,
    or a call to a name ending in Error/Exception/Invalid/Warning."""
    lines = set()
    for node in ast.walk(ast.parse(source)):
        inside = isinstance(node, ast.Raise)
        if isinstance(node, ast.Call):
            f = node.func
            name = f.attr if isinstance(f, ast.Attribute) else f.id if isinstance(f, ast.Name) else ""
            inside = name == "warn" or name.endswith(("Error", "Exception", "Invalid", "Warning"))
        if inside:
            lines.update(range(node.lineno, node.end_lineno + 1))
    return lines


def changed_lines(diff: str) -> tuple[list, list]:
    """The removed and added lines of a unified diff (without their +/- marks)."""
    old = [x[1:] for x in diff.splitlines() if x.startswith("-") and not x.startswith("---")]
    new = [x[1:] for x in diff.splitlines() if x.startswith("+") and not x.startswith("+++")]
    return old, new


def kind_of(diff: str, source_lines: list, messages: set) -> str:
    """``message`` when only a string's letters changed (mutmut's XX..XX or case mutants) on lines
    that are all inside error messages or warnings; ``code`` otherwise.

    Examples
    --------
    >>> src = ["def f(x):", "    if x > 1:", "        raise ValueError(f'x is {x}')"]
    >>> kind_of("--- a\\n+++ a\\n-        raise ValueError(f'x is {x}')\\n+        raise ValueError(f'XXx is XX{x}')",
    ...         src, {3})
    'message'
    >>> kind_of("--- a\\n+++ a\\n-    if x > 1:\\n+    if x >= 1:", src, {3})
    'code'
    """
    old, new = changed_lines(diff)
    if not old or len(old) != len(new):
        return "code"
    for o, n in zip(old, new):
        if n.replace("XX", "").lower() != o.lower():
            return "code"
        where = [i + 1 for i, line in enumerate(source_lines) if line.strip() == o.strip()]
        if not where or not all(i in messages for i in where):
            return "code"
    return "message"


# ----------------------------------------------------------------------------- the lines a change touches
def _toml_list(xs) -> str:
    return "[" + ", ".join(json.dumps(x) for x in xs) + "]"


def _scratch(repo: Path, name: str, mod: Module, workdir: Path) -> Path:
    """A copy of what the tests need, with the [tool.mutmut] section for ``mod``."""
    dest = workdir / name
    if dest.exists():
        shutil.rmtree(dest)
    dest.mkdir(parents=True)
    ignore = shutil.ignore_patterns("__pycache__", "*.pyc", ".hypothesis")
    for part in ("judge", "tests"):
        shutil.copytree(repo / part, dest / part, ignore=ignore)
    if (repo / "conftest.py").exists():  # the doctests' collection rules
        shutil.copy2(repo / "conftest.py", dest / "conftest.py")
    selection = [t for t in mod.tests if (repo / t.split("::")[0]).exists()]
    selection += [mod.path] + [f"--deselect={d}" for d in mod.deselect]
    # the wider property tests' profile, where the tests define it (an older checkout may not)
    profile = ["--hypothesis-profile=mutation"] if '"mutation"' in (repo / "tests/conftest.py").read_text() else []
    py = (repo / "pyproject.toml").read_text()
    py += ("\n[tool.mutmut]\n"
           'source_paths = ["judge"]\n'
           f"only_mutate = {_toml_list([mod.path])}\n"
           f"pytest_add_cli_args_test_selection = {_toml_list(selection)}\n"
           f"pytest_add_cli_args = {_toml_list(['-p', 'no:cacheprovider', '-k', 'not __mutmut_', *profile])}\n")
    (dest / "pyproject.toml").write_text(py)
    return dest


def _mutant_names(scratch: Path, env: dict) -> list[str]:
    """Every mutant of the module, by generating them without running a test (mutmut's own generator)."""
    code = ("import sys; from mutmut.__main__ import create_mutants, copy_src_dir, setup_source_paths; "
            "from pathlib import Path; Path('mutants').mkdir(exist_ok=True); copy_src_dir(); setup_source_paths(); "
            "create_mutants(1)")
    subprocess.run([sys.executable, "-c", code], cwd=scratch, env=env, check=True, capture_output=True)
    names = []
    for meta in (scratch / "mutants").rglob("*.py.meta"):
        names += list(json.loads(meta.read_text())["exit_code_by_key"])
    return sorted(names)


def _results(scratch: Path) -> dict:
    out = {}
    for meta in (scratch / "mutants").rglob("*.py.meta"):
        out.update(json.loads(meta.read_text())["exit_code_by_key"])
    return out


def _diffs(scratch: Path, names: list, env: dict) -> dict:
    """Each mutant's diff against the original function (what ``mutmut show NAME`` prints), in one process."""
    code = ("import json, sys; from mutmut.mutation.diff_apply import get_diff_for_mutant; "
            "names = json.load(sys.stdin); json.dump({n: get_diff_for_mutant(n) for n in names}, sys.stdout)")
    r = subprocess.run([sys.executable, "-c", code], cwd=scratch, env=env, input=json.dumps(names),
                       capture_output=True, text=True, check=True)
    return json.loads(r.stdout)


def _env(repo: Path, mod: Module) -> dict:
    env = dict(os.environ, **mod.env)
    env.setdefault("JUDGE_SHARED_DIR", str(Path(os.environ.get("JUDGE_SHARED_DIR", repo.parent / "shared")).resolve()))
    env.setdefault("OMP_NUM_THREADS", "1")
    env.setdefault("MKL_NUM_THREADS", "1")
    return env


def run_module(repo: Path, name: str, mod: Module, *, workdir: Path, children: int, sample: int | None,
               seed: int, equivalent: dict, log, only: list | None = None) -> dict:
    scratch = _scratch(repo, name, mod, workdir)
    env = _env(repo, mod)
    names = list(only or [])
    if only is not None and not only:
        return summarise(name, mod, [], 0.0, sample, [])
    if sample is not None and only is None:
        every = _mutant_names(scratch, env)
        names = sorted(random.Random(seed).sample(every, min(sample, len(every))))
    t0 = time.perf_counter()
    with open(scratch / "mutmut.log", "w") as f:
        r = subprocess.run([sys.executable, "-m", "mutmut", "run", "--max-children", str(children), *names],
                           cwd=scratch, env=env, stdout=f, stderr=subprocess.STDOUT)
    seconds = time.perf_counter() - t0
    if r.returncode != 0:
        tail = (scratch / "mutmut.log").read_text(errors="replace")[-3000:]
        raise RuntimeError(f"mutmut failed on {name} (exit {r.returncode}); the end of its log ({scratch}):\n{tail}")
    codes = _results(scratch)
    if names:
        codes = {k: v for k, v in codes.items() if k in set(names)}
    source = (repo / mod.path).read_text()
    src_lines, msgs = source.splitlines(), message_lines(source)
    listed = equivalent.get(name, {})
    diffs = _diffs(scratch, sorted(codes), env)
    rows, stale = [], []
    for key, code in sorted(codes.items()):
        status = _STATUS.get(code, "suspicious")
        row = {"name": key, "status": status, "kind": kind_of(diffs[key], src_lines, msgs)}
        if status not in DETECTED:
            row["diff"] = diffs[key]
            entry = listed.get(key)
            if entry is not None:
                if changed_lines(row["diff"]) == (entry["old"], entry["new"]):
                    row["status"], row["reason"] = "equivalent", entry["reason"]
                else:
                    stale.append(key)
        rows.append(row)
    log(f"{name}: {len(rows)} mutants in {seconds / 60:.1f} min")
    out = summarise(name, mod, rows, seconds, sample, stale)
    out["rows"] = [{k: r[k] for k in ("name", "status", "kind")} for r in rows]
    return out


def merge(old: dict, new: dict) -> dict:
    """``old`` with the verdicts of the mutants ``new`` reran (its survivors), times added."""
    kept = {r["name"]: r for r in old["survivors"] + old.get("equivalent", [])}
    by_name = {r["name"]: {**r, **{k: v for k, v in kept.get(r["name"], {}).items() if k in ("diff", "reason")}}
               for r in old["rows"]}
    rows_new = {r["name"]: r for r in new["rows"]}
    diffs = {r["name"]: r for r in new["survivors"] + new["equivalent"]}
    for n, r in rows_new.items():
        by_name[n] = {**r, **{k: v for k, v in diffs.get(n, {}).items() if k in ("diff", "reason")}}
        if r["status"] in ("survived", "no tests", "equivalent") and "diff" not in by_name[n]:
            by_name[n]["diff"] = ""
    rows = [by_name[n] for n in sorted(by_name)]
    mod = Module(old["path"], old["tests"], old["target"], old.get("env", {}), old.get("deselected", []))
    out = summarise(None, mod, rows, old["seconds"] + new["seconds"], True if old.get("sampled") else None,
                    new["stale_equivalents"])
    out["rows"] = [{k: r[k] for k in ("name", "status", "kind")} for r in rows]
    out["reran"] = sorted(rows_new)
    return out


def summarise(name, mod, rows, seconds, sample, stale) -> dict:
    def count(rs, status):
        return sum(r["status"] == status for r in rs)

    code = [r for r in rows if r["kind"] == "code"]
    statuses = ("killed", "timeout", "survived", "no tests", "equivalent", "skipped", "suspicious", "not checked")
    counts = {s: count(rows, s) for s in statuses}
    counts["code"] = len(code)
    counts["message survivors"] = sum(r["kind"] == "message" and r["status"] not in DETECTED for r in rows)
    det = sum(r["status"] in DETECTED for r in code)
    eq = count(code, "equivalent")
    denom = len(code) - eq
    score = det / denom if denom else 1.0
    det_all = sum(r["status"] in DETECTED for r in rows)
    score_all = det_all / (len(rows) - count(rows, "equivalent")) if rows else 1.0
    return {
        "path": mod.path, "tests": mod.tests, "deselected": mod.deselect, "env": mod.env, "target": mod.target,
        "mutants": len(rows), "sampled": sample is not None, "seconds": round(seconds, 1), "counts": counts,
        "score": round(score, 4), "score_with_messages": round(score_all, 4), "met": score >= mod.target,
        "stale_equivalents": stale,
        "survivors": [r for r in rows if r["status"] not in DETECTED + ("equivalent",)],
        "equivalent": [r for r in rows if r["status"] == "equivalent"],
    }


def run_changed(repo: Path, base: str, keys: list, *, workdir: Path, children: int, max_mutants: int, seed: int,
                equivalent: dict, log) -> tuple[dict, dict]:
    """``--changed BASE``: the mutants on the lines touched since BASE in ``keys``' modules, a seeded sample of at
    most ``max_mutants`` of them run. Returns (results per module, what was selected)."""
    touched = changed_since(repo, base)
    pool, seen = [], {}
    for k in keys:
        mod = MODULES[k]
        if mod.path not in touched:
            continue
        scratch = _scratch(repo, k, mod, workdir)
        env = _env(repo, mod)
        every = _mutant_names(scratch, env)
        hit = changed_mutants(_diffs(scratch, every, env), (repo / mod.path).read_text(), touched[mod.path])
        seen[k] = {"lines": sorted(touched[mod.path]), "mutants": len(every), "on_lines": len(hit)}
        log(f"{k}: {len(touched[mod.path])} lines touched, {len(hit)} of its {len(every)} mutants on them")
        pool += [(k, n) for n in hit]
    chosen = sorted(random.Random(seed).sample(pool, min(max_mutants, len(pool))))
    results = {}
    for k in seen:
        names = [n for kk, n in chosen if kk == k]
        seen[k]["run"] = len(names)
        if names:
            out = run_module(repo, k, MODULES[k], workdir=workdir, children=children, sample=len(names), seed=seed,
                             equivalent=equivalent, only=names, log=log)
            out["changed"] = {"base": base, **seen[k]}
            results[k] = out
    return results, seen


# ----------------------------------------------------------------------------- report
def table(results: dict) -> str:
    head = ("module", "mutants", "killed", "timeout", "survived", "no tests", "equiv", "msg surv", "score",
            "target", "min")
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for name, r in results.items():
        c = r["counts"]
        score = f"{100 * r['score']:.1f}%" + (" (sample)" if r.get("sampled") else "") + ("" if r["met"] else " ✗")
        lines.append("| " + " | ".join(str(x) for x in (
            name, r["mutants"], c["killed"], c["timeout"], c["survived"], c["no tests"], c["equivalent"],
            c["message survivors"], score, f"{100 * r['target']:.0f}%", f"{r['seconds'] / 60:.1f}")) + " |")
    return "\n".join(lines)


def _git_head(repo: Path) -> str | None:
    r = subprocess.run(["git", "-C", str(repo), "rev-parse", "--short", "HEAD"], capture_output=True, text=True)
    return r.stdout.strip() or None


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter, epilog=__doc__)
    ap.add_argument("--modules", default="high",
                    help="comma-separated module keys (see --list), or a group: 'high' (the 90%% targets), 'all'")
    ap.add_argument("--json", type=Path, help="results file to write (modules not run here keep their entry)")
    ap.add_argument("--sample", type=int, help="run a seeded random sample of this many mutants per module")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--max-children", type=int, default=1, help="mutmut workers (default 1: shared machines)")
    ap.add_argument("--workdir", type=Path, help="where the scratch copies go (default: a temporary folder, removed)")
    ap.add_argument("--repo", type=Path, default=REPO, help="the repository to copy (default: this one)")
    ap.add_argument("--rerun-survivors", action="store_true",
                    help="run only the mutants that the --json file lists as survivors (or not checked) of each "
                         "module, keeping its other verdicts (for tests added since: a killed mutant stays killed)")
    ap.add_argument("--tests", help="comma-separated test paths or node ids to use instead of the modules' own "
                                    "(a quicker, partial run; the entry says so)")
    ap.add_argument("--changed", metavar="BASE",
                    help="only the mutants on the lines touched since BASE (git diff BASE...HEAD, plus what is not "
                         "committed), in the modules of --modules (default: every module of --list); exit 1 when "
                         "one survives")
    ap.add_argument("--max-mutants", type=int, default=20,
                    help="with --changed: run a seeded sample of at most this many of them, over all modules "
                         "(default 20)")
    ap.add_argument("--list", action="store_true", help="print the modules, their tests and targets, and exit")
    ap.add_argument("--report", type=Path, help="print the table of a results file, and exit")
    args = ap.parse_args(argv)
    if args.list:
        for k, m in MODULES.items():
            print(f"{k:26s} {m.path:34s} target {m.target:.0%}  tests: {' '.join(m.tests)}")
        return 0
    if args.report:
        print(table(json.loads(args.report.read_text())["modules"]))
        return 0
    keys = []
    if args.changed and args.modules == "high":  # the default: every module when only a change is asked about
        args.modules = "all"
    for part in args.modules.split(","):
        part = part.strip()
        if part in GROUPS:
            keys += GROUPS[part]
        elif part in MODULES:
            keys.append(part)
        else:
            ap.error(f"unknown module {part!r}; valid modules are {', '.join(MODULES)} or a group: "
                     f"{', '.join(GROUPS)}")
    try:
        import mutmut  # noqa: F401
    except ImportError:
        ap.error(f"mutmut is not installed; pip install {MUTMUT} (the version this script reads)")
    equivalent = json.loads(EQUIVALENT.read_text()) if EQUIVALENT.exists() else {}
    results = {}
    if args.json and args.json.exists():
        results = json.loads(args.json.read_text()).get("modules", {})
    workdir = args.workdir or Path(tempfile.mkdtemp(prefix="judge-mutation-"))
    if args.changed:
        t0 = time.perf_counter()
        try:
            new, seen = run_changed(args.repo.resolve(), args.changed, list(dict.fromkeys(keys)), workdir=workdir,
                                    children=args.max_children, max_mutants=args.max_mutants, seed=args.seed,
                                    equivalent=equivalent, log=lambda s: print(s, flush=True))
        finally:
            if args.workdir is None:
                shutil.rmtree(workdir, ignore_errors=True)
        minutes = (time.perf_counter() - t0) / 60
        if not seen:
            print(f"no line of the modules of --list changed since {args.changed}; nothing to run ({minutes:.1f} min)")
            return 0
        for k, r in new.items():
            for row in r["survivors"]:
                print(f"\n{k}: {row['name']} {row['status']}\n{row.get('diff', '')}")
        if new:
            print(table(new))
        n_run, n_on = sum(v["run"] for v in seen.values()), sum(v["on_lines"] for v in seen.values())
        print(f"--changed {args.changed}: {n_run} of the {n_on} mutants on the touched lines run, {minutes:.1f} min")
        if args.json and new:
            results.update(new)
            _write(args.json, results, args.repo.resolve())
        return 1 if any(r["survivors"] for r in new.values()) else 0
    failed = []
    try:
        for k in dict.fromkeys(keys):
            mod = MODULES[k]
            if args.tests:
                mod = Module(mod.path, args.tests.split(","), mod.target, mod.env)
            only = None
            if args.rerun_survivors:
                if k not in results:
                    ap.error(f"--rerun-survivors: {args.json} has no entry for {k}; run it once without the flag")
                listed = equivalent.get(k, {})
                # a survivor listed as equivalent (its changed lines as listed) is not run again
                same = {r["name"] for r in results[k]["survivors"] if r["name"] in listed
                        and changed_lines(r.get("diff", "")) == (listed[r["name"]]["old"], listed[r["name"]]["new"])}
                only = [r["name"] for r in results[k]["survivors"] if r["name"] not in same]
                for r in results[k]["survivors"]:
                    if r["name"] in same:
                        r["status"], r["reason"] = "equivalent", listed[r["name"]]["reason"]
                for r in results[k]["rows"]:
                    if r["name"] in same:
                        r["status"] = "equivalent"
            try:
                new = run_module(args.repo.resolve(), k, mod, workdir=workdir, children=args.max_children,
                                 sample=args.sample, seed=args.seed, equivalent=equivalent, only=only,
                                 log=lambda s: print(s, flush=True))
            except RuntimeError as e:  # mutmut refused (e.g. a test that fails without any mutant): go on
                print(e, flush=True)
                failed.append(k)
                continue
            results[k] = merge(results[k], new) if only is not None else new
            if args.json:
                _write(args.json, results, args.repo.resolve())
    finally:
        if args.workdir is None:
            shutil.rmtree(workdir, ignore_errors=True)
    print(table({k: results[k] for k in dict.fromkeys(keys) if k in results}))
    if failed:
        print(f"not run (mutmut failed, see above): {', '.join(failed)}")
    return 1 if failed else 0


def _write(path: Path, results: dict, repo: Path) -> None:
    import mutmut

    doc = {"tool": f"mutmut {getattr(mutmut, '__version__', '?')}", "commit": _git_head(repo),
           "python": sys.version.split()[0], "modules": results}
    path.write_text(json.dumps(doc, indent=1, ensure_ascii=False) + "\n")


if __name__ == "__main__":
    sys.exit(main())
