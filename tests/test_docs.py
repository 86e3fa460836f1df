"""The documentation: the site builds with warnings as errors, documents every exported name,
renders every Sphinx role, links only to pages and anchors that exist, and every code block on a
page either runs here or says why not.

A fenced block is run when it is Python and carries no mark; any block may be followed by one
line ``<!-- not run: REASON -->`` or ``<!-- runs in CI: WHERE -->`` (WHERE names the test or the
CI step that runs it). Blocks in other languages must carry one of the two; a MyST directive
(```` ```{eval-rst} ````) is not a code block. Python blocks run from the repository root in a
fresh interpreter, one subprocess each (identical blocks once).

The site (``python -m sphinx -W --keep-going -b html docs site``) is built once per test
session, into a temporary folder: 1.5-2.5 minutes on 2 cores from a clean checkout (docs/development.md
has the measurements), most of it the gallery's three examples that run the packaged model (less on
later builds, which rerun only the examples whose source changed).
"""

from __future__ import annotations

import hashlib
import importlib
import pkgutil
import re
import subprocess
import sys
from html.parser import HTMLParser
from pathlib import Path
from urllib.parse import unquote, urlsplit

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
            if lang.startswith("{"):
                continue  # a MyST directive, not a code block
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


# The guide pages (docs/index.md's toctrees "Getting started" and "Guides"), each of which shows what
# one of its examples prints; the explanation pages beside them are listed apart.
GUIDES = ("index", "your_own_labels", "concepts", "guide", "fit", "label_sets", "multilabel", "sklearn", "decisions",
          "serving", "ray", "vllm", "gpu")
EXPLANATIONS = ("decisions_design",)
CODE, OUTPUT = ("python", "bash"), ("text", "json")


def toctree_pages(caption: str) -> list[str]:
    """The entries of docs/index.md's toctree with this caption."""
    text = (ROOT / "docs" / "index.md").read_text()
    m = re.search(r":::\{toctree\}\n(?::[^\n]*\n)*?:caption: " + re.escape(caption) + r"\n(?::[^\n]*\n)*(.*?)\n:::",
                  text, re.S)
    assert m, f"no toctree with the caption {caption!r} in docs/index.md"
    return ["index" if e == "self" else e for e in m.group(1).split() if e]


def test_the_guide_list_is_the_toctrees_guides():
    pages = toctree_pages("Getting started") + toctree_pages("Guides")
    assert sorted(set(pages) - set(EXPLANATIONS)) == sorted(GUIDES), pages


@pytest.mark.parametrize("page", GUIDES)
def test_every_guide_page_shows_what_an_example_prints(page):
    """A code block (Python or shell) whose next block is its output (text or JSON, marked as not run)."""
    found = blocks(ROOT / "docs" / f"{page}.md")
    pairs = [(a[0], b[0]) for a, b in zip(found, found[1:])
             if a[1] in CODE and b[1] in OUTPUT and b[3] is not None and b[3].group(1).startswith("not run")]
    assert pairs, f"docs/{page}.md: no {'/'.join(CODE)} block followed by its output ({'/'.join(OUTPUT)}, marked 'not run')"


@pytest.mark.model
@pytest.mark.parametrize("code", runnable())
def test_python_block_runs(code, datasets_dir):
    code = code.replace('"../shared/datasets"', repr(str(datasets_dir)))  # where JUDGE_SHARED_DIR points
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=600)
    assert out.returncode == 0, out.stderr[-4000:]


_BUILT: dict = {}


def built_site(tmp_path_factory):
    """``(CompletedProcess, html folder)`` of ``python -m sphinx -W --keep-going -b html docs SITE``, built
    once per session: this module and tests/test_docs_browser.py read the same build."""
    pytest.importorskip("sphinx", reason="the docs toolchain (the docs extra; Sphinx 9 needs Python 3.11)")
    if "site" not in _BUILT:
        out = tmp_path_factory.mktemp("site")
        build = subprocess.run([sys.executable, "-m", "sphinx", "-W", "--keep-going", "-q", "-b", "html",
                                "-d", str(out / ".doctrees"), "docs", str(out / "html")],
                               cwd=ROOT, capture_output=True, text=True, timeout=900)
        _BUILT["site"] = (build, out / "html")
    return _BUILT["site"]


@pytest.fixture(scope="module")
def site(tmp_path_factory):
    """The site, built once per session (:func:`built_site`)."""
    return built_site(tmp_path_factory)


def test_the_site_builds_with_warnings_as_errors(site):
    build, html = site
    assert build.returncode == 0, build.stdout[-3000:] + build.stderr[-6000:]
    cli = (html / "reference" / "cli.html").read_text()
    for command in ("judge predict", "judge serve", "judge fit-decisions", "--labels"):
        assert command in cli  # generated from the parsers
    api = (html / "reference" / "api.html").read_text()
    for name in ("judge.Classifier", "judge.Decider", "judge.engine.Scorer", "judge.backends.vllm.VLLMScorer",
                 "judge.distributed.classify_dataset"):
        assert name in api  # generated from the docstrings
    assert list((html / "auto_examples").glob("plot_*.html"))  # the gallery ran


def test_the_gallery_has_eight_stories_each_with_its_figure(site):
    _, html = site
    pages = sorted((html / "auto_examples").glob("plot_*.html"))
    assert len(pages) >= 8, [p.name for p in pages]
    without = [p.name for p in pages if not re.search(r"sphx-glr-(single|multi)-img", p.read_text())]
    assert not without, f"no figure drawn on {without}"


def exported_names() -> list[str]:
    """judge.__all__ and the __all__ of every public subpackage, fully qualified."""
    import judge

    names = [f"judge.{n}" for n in judge.__all__]
    for sub in pkgutil.iter_modules(judge.__path__):
        if sub.ispkg and not sub.name.startswith("_"):
            module = importlib.import_module(f"judge.{sub.name}")
            names += [f"judge.{sub.name}.{n}" for n in module.__all__]
    return names


def test_every_exported_name_has_its_page(site):
    _, html = site
    names = exported_names()
    assert len(names) > 150 and "judge.calibration.ConformalPredictor" in names
    missing = [n for n in names if not (html / "reference" / "generated" / f"{n}.html").is_file()]
    assert not missing, f"no page for {missing}"


def test_a_class_page_lists_the_members_it_inherits_from_the_library(site):
    _, html = site
    page = (html / "reference" / "generated" / "judge.Classifier.html").read_text()
    for member in ("predict_proba", "calibrate", "predict_set", "predict_records", "is_calibrated",
                   "threshold_", "temperature_", "calibration_report_"):
        assert f'id="judge.Classifier.{member}"' in page, member
    for foreign in ("get_metadata_routing", "set_fit_request"):  # scikit-learn's own, not documented here
        assert f'id="judge.Classifier.{foreign}"' not in page, foreign


LITERAL_ROLE = re.compile(r":(?:class|meth|func|data|mod|attr|exc):(?:`|&#96;|&#x60;|<)")


def test_no_role_is_left_as_literal_text(site):
    _, html = site
    found = {str(p.relative_to(html)): LITERAL_ROLE.findall(p.read_text()) for p in html.rglob("*.html")}
    found = {page: roles for page, roles in found.items() if roles}
    assert not found, found


class Links(HTMLParser):
    def __init__(self):
        super().__init__()
        self.hrefs, self.ids = [], set()

    def handle_starttag(self, tag, attrs):
        attrs = dict(attrs)
        if attrs.get("id"):
            self.ids.add(attrs["id"])
        if tag == "a" and attrs.get("name"):
            self.ids.add(attrs["name"])
        if tag in ("a", "link") and attrs.get("href"):
            self.hrefs.append(attrs["href"])


def test_every_internal_link_resolves(site):
    _, html = site
    parsed = {}

    def parse(page):
        if page not in parsed:
            parser = Links()
            parser.feed(page.read_text(errors="replace"))
            parsed[page] = parser
        return parsed[page]

    broken = []
    for page in sorted(html.rglob("*.html")):
        if page.relative_to(html).parts[0] == "_static":
            continue  # the theme's own files (a template among them), not pages
        for href in parse(page).hrefs:
            url = urlsplit(href)
            if url.scheme or url.netloc:
                continue  # external: not checked offline
            target = (page.parent / unquote(url.path)).resolve() if url.path else page
            if target.is_dir():
                target = target / "index.html"
            where = f"{page.relative_to(html)} -> {href}"
            if not target.is_file():
                broken.append(where)
            elif url.fragment and target.suffix == ".html" and unquote(url.fragment) not in parse(target).ids:
                broken.append(where + " (no such anchor)")
    assert not broken, "\n".join(broken[:50])
