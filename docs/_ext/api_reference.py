"""Sphinx extension: the Python API reference of ``judge``.

* **Completeness.** ``reference/api.md`` lists every name of ``judge.__all__`` and of the
  ``__all__`` of each public subpackage in its autosummary blocks; a name missing there is a
  build warning (an error under ``-W``), so a new export cannot go undocumented.
* **One page per name, one target per object.** Several names reach one object
  (``judge.Decider`` is ``judge.decisions.Decider``). The first name listed is the canonical
  one; the others are aliases, whose pages repeat the documentation with ``:no-index:``
  (``aliases`` in the autosummary templates' context). A cross-reference that Sphinx cannot
  resolve by name (``judge.automaton.trie.TrieAutomaton``, the module an object is defined in,
  or a short name in a docstring of a re-exported object) is resolved through the object
  itself to its canonical page.
* **Inherited members from the library only.** Classes are documented with their inherited
  members (``Classifier`` gets ``calibrate``, ``predict_set``, ``threshold_`` ... from its
  mixins) but not those of scikit-learn, torch or the builtins.
* **Constants.** A constant re-exported by a package has no docstring where it is exported;
  its ``#:`` comment is taken from the module that defines it, and the generic docstring of
  its type (``tuple``, ``str``) is never shown.
"""

from __future__ import annotations

import functools
import importlib
import inspect
import pkgutil
import re
import sys
from pathlib import Path

from sphinx.ext.autosummary import ImportExceptionGroup, import_by_name
from sphinx.pycode import ModuleAnalyzer
from sphinx.util import logging
from sphinx.util.nodes import make_refnode

logger = logging.getLogger(__name__)

API_PAGE = "reference/api.md"
ENTRY = re.compile(r"^ {3}(judge(?:\.\w+)*)\s*$", re.M)
CANONICAL: Canonical | None = None  # set when the configuration is read


def api_entries(srcdir) -> list[str]:
    """The fully qualified names the API page's autosummary blocks list, in order."""
    return ENTRY.findall((Path(srcdir) / API_PAGE).read_text())


def public_subpackages() -> list[str]:
    import judge

    return sorted(f"judge.{m.name}" for m in pkgutil.iter_modules(judge.__path__)
                  if m.ispkg and not m.name.startswith("_"))


def exported_names() -> list[str]:
    """Every ``judge.NAME`` of ``judge.__all__`` and ``judge.SUB.NAME`` of a public subpackage."""
    import judge

    names = [f"judge.{n}" for n in judge.__all__]
    for pkg in public_subpackages():
        module = importlib.import_module(pkg)
        names += [f"{pkg}.{n}" for n in getattr(module, "__all__", ())]
    return names


def _has_identity(obj) -> bool:
    # constants (small ints, interned strings, tuples) can share an id without being one export
    return inspect.isclass(obj) or inspect.isroutine(obj) or inspect.ismodule(obj)


@functools.cache
def _import(name: str):
    try:
        return import_by_name(name)[1]
    except (ImportError, ImportExceptionGroup):
        return None


class Canonical:
    """Object identity -> the first name the API page documents it under."""

    def __init__(self, entries):
        self.by_id, self.keep, self.aliases = {}, [], {}
        for name in entries:
            obj = _import(name)
            if obj is None or not _has_identity(obj):
                continue
            self.keep.append(obj)  # the ids stay valid while the objects live
            first = self.by_id.setdefault(id(obj), name)
            if first != name:
                self.aliases[name] = first

    def of(self, name: str) -> str | None:
        """The canonical name of ``name`` or of its longest prefix, with the rest appended."""
        if not (name == "judge" or name.startswith("judge.")):
            return None
        parts = name.split(".")
        for i in range(len(parts), 0, -1):
            obj = _import(".".join(parts[:i]))
            if obj is not None and id(obj) in self.by_id:
                return ".".join([self.by_id[id(obj)], *parts[i:]])
        return None


def on_config_inited(app, config):
    sys.path.insert(0, str(Path(app.srcdir).parent))
    canonical = Canonical(api_entries(app.srcdir))
    global CANONICAL
    CANONICAL = canonical
    config.autosummary_context = {**(config.autosummary_context or {}), "aliases": canonical.aliases}


def on_builder_inited(app):
    listed = set(api_entries(app.srcdir))
    for name in exported_names():
        if name not in listed:
            logger.warning("%s is exported but not listed on %s", name, API_PAGE,
                           type="judge", subtype="api")


def on_missing_reference(app, env, node, contnode):
    if node.get("refdomain") != "py":
        return None
    canonical = CANONICAL
    target, mod, cls = node.get("reftarget", ""), node.get("py:module"), node.get("py:class")
    candidates = [target]
    if mod:
        if cls:
            candidates.append(f"{mod}.{cls}.{target}")
        candidates.append(f"{mod}.{target}")
        # the module the documented object comes from: short names in its docstring live there
        documented = _import(f"{mod}.{cls}" if cls else mod)
        home = getattr(documented, "__module__", None) if not inspect.ismodule(documented) else None
        if home:
            candidates.append(f"{home}.{target}")
    domain = env.get_domain("py")
    for candidate in candidates:
        name = canonical.of(candidate)
        if name is None:
            continue
        for reftype in dict.fromkeys((node.get("reftype"), "obj")):
            found = domain.resolve_xref(env, node["refdoc"], app.builder, reftype, name, node, contnode)
            if found is not None:
                return found
    # a short name in a summary line of the API page, where no module is current: the one
    # documented object whose name ends with it (never a guess among several)
    if "." not in target.lstrip("~") or not target.startswith("judge"):
        matches = domain.find_obj(env, mod, cls, target, node.get("reftype"), 1)
        names = {canonical.of(name) or name for name, _ in matches}
        if len(names) == 1:
            name, entry = matches[0]
            return make_refnode(app.builder, node["refdoc"], entry.docname, entry.node_id, contnode, name)
    return None


def _owner_module(obj) -> str | None:
    """The module that defines a class member (a method, property or descriptor), if it says."""
    if isinstance(obj, property):
        obj = obj.fget
    elif isinstance(obj, (classmethod, staticmethod)):
        obj = obj.__func__
    elif isinstance(obj, functools.cached_property):
        obj = obj.func
    owner = getattr(obj, "__objclass__", None)
    if isinstance(owner, type):
        return owner.__module__
    if inspect.isroutine(obj) or inspect.isdatadescriptor(obj):
        return getattr(inspect.unwrap(obj), "__module__", None)
    return None


def on_skip_member(app, what, name, obj, skip, options):
    # 'class'/'exception': autodoc documenting a class's members; the rest: autosummary's tables
    if what in ("class", "exception", "method", "attribute", "property"):
        module = _owner_module(obj)
        if module is not None and module != "judge" and not module.startswith("judge."):
            return True  # inherited from scikit-learn, torch, the builtins...
    return None


def _comment_doc(name: str, obj) -> list[str] | None:
    attr = name.rpartition(".")[2]
    for modname, module in sorted(sys.modules.items()):
        if not modname.startswith("judge") or vars(module).get(attr, None) is not obj:
            continue
        try:
            docs = ModuleAnalyzer.for_module(modname).find_attr_docs()
        except Exception:  # no source to read: no comment to take
            continue
        if ("", attr) in docs:
            return list(docs[("", attr)])
    return None


BORDER = re.compile(r"^( *)(=+)( +=+)+ *$")


def widen_first_column(lines: list[str]) -> list[str]:
    """Widen the first column of a simple table whose first-column text runs into the margin.

    docutils rejects such a table ("Text in column margin"); a docstring should be fixed, and
    until it is, the site still builds. Only tables whose first column holds one word per row:
    every row is cut into cells by the border's columns and laid out again.
    """
    out, i = list(lines), 0
    while i < len(out):
        m = BORDER.match(out[i])
        if not m:
            i += 1
            continue
        end = i
        while end < len(out) and out[end].strip():
            end += 1
        indent = len(m.group(1))
        spans = [(r.start(), r.end()) for r in re.finditer(r"=+", out[i])]
        rows = [k for k in range(i, end) if not BORDER.match(out[k])]
        first = {k: out[k][indent:].split(" ", 1)[0] for k in rows}
        extra = max((len(w) - (spans[0][1] - indent) for w in first.values()), default=0)
        if extra > 0 and len(spans) > 1:
            widths = [spans[0][1] - spans[0][0] + extra] + [b - a for a, b in spans[1:]]
            for k in range(i, end):
                if BORDER.match(out[k]):
                    out[k] = " " * indent + " ".join("=" * w for w in widths)
                    continue
                line, cells = out[k], [first[k]]
                for j, (a, _) in enumerate(spans[1:], 1):
                    a = max(a, indent + len(first[k]))
                    b = spans[j + 1][0] if j + 1 < len(spans) else len(line)
                    cells.append(line[a:b].strip())
                padded = [c.ljust(w) for c, w in zip(cells[:-1], widths)] + [cells[-1]]
                out[k] = (" " * indent + " ".join(padded)).rstrip()
        i = end
    return out


def on_process_docstring(app, what, name, obj, options, lines):
    fixed = widen_first_column(lines)
    if fixed != lines:
        logger.info("%s: widened a table's first column (fix the docstring)", name)
        lines[:] = fixed
    if what not in ("data", "attribute"):
        return
    generic = type(obj).__doc__
    generic = inspect.cleandoc(generic) if isinstance(generic, str) else ""
    if generic and "\n".join(lines).strip() == generic.strip():
        lines[:] = []
    if not lines and what == "data":
        lines[:] = _comment_doc(name, obj) or []


def setup(app):
    app.connect("config-inited", on_config_inited)
    app.connect("builder-inited", on_builder_inited)
    app.connect("missing-reference", on_missing_reference)
    app.connect("autodoc-skip-member", on_skip_member)
    app.connect("autodoc-process-docstring", on_process_docstring, priority=400)
    return {"version": "1", "parallel_read_safe": True, "parallel_write_safe": True}
