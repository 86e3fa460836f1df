"""Sphinx configuration of the trie-judge documentation site.

Build (warnings are errors, as in CI)::

    python -m sphinx -W --keep-going -b html docs site

The guide pages are the Markdown files beside this one (MyST); the API reference is generated
from the numpydoc docstrings (autosummary, ``_ext/api_reference.py``); the command-line
reference from the parsers (``_ext/cli_reference.py``); the gallery from ``examples/``.
"""

from __future__ import annotations

import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
sys.path.insert(0, str(ROOT))  # the judge of this checkout, not an installed one
sys.path.insert(0, str(HERE / "_ext"))

import judge  # noqa: E402

project = "trie-judge"
author = "trie-judge contributors"
copyright = "trie-judge contributors"
version = release = judge.__version__

extensions = [
    "myst_parser",
    "sphinx.ext.autodoc",
    "sphinx.ext.autosummary",
    "numpydoc",
    "sphinx_design",
    "sphinx_gallery.gen_gallery",
    "api_reference",
    "cli_reference",
]
# No sphinx.ext.intersphinx: the site is built offline, and it would fetch inventories.

source_suffix = {".rst": "restructuredtext", ".md": "markdown"}
root_doc = "index"
exclude_patterns = ["_build", "_templates", "_ext", "auto_examples/*.ipynb", "auto_examples/*.py",
                    "**/*.md5", "**/*.zip", "**.ipynb_checkpoints"]
templates_path = ["_templates"]
suppress_warnings = [
    # the guide pages go from '#' to '###' (MkDocs numbered nothing); kept as they are
    "myst.header",
]

# -- MyST: the Markdown guide pages as they are ---------------------------------------------
myst_enable_extensions = ["colon_fence", "deflist", "substitution"]
myst_substitutions = {"release": release}  # {{ release }} on a page: the package's version
myst_heading_anchors = 3  # '#accuracy-calibration-...' links between the pages keep working

# -- the API reference -----------------------------------------------------------------------
autosummary_generate = True
autosummary_imported_members = True  # judge.X is defined in judge.x.y; document it as exported
autosummary_ignore_module_all = False
autodoc_typehints = "none"  # numpydoc's Parameters section carries the types
autodoc_member_order = "bysource"
autodoc_preserve_defaults = True
numpydoc_show_class_members = False  # the class template lists methods and attributes
numpydoc_class_members_toctree = False
numpydoc_validation_checks: set[str] = set()

# -- the gallery: examples/plot_*.py, run at build time ----------------------------------------
# Five draw the benchmarks' results files (a second each); three run the packaged model on
# docs/tickets.csv or a ticket (30 s to 2 min each on 2 cores). The order is a story:
# _ext/gallery_order.py.
sphinx_gallery_conf = {
    "examples_dirs": str(ROOT / "examples"),
    "gallery_dirs": "auto_examples",
    "filename_pattern": r"/plot_",
    "within_subsection_order": "gallery_order.GalleryOrder",
    "download_all_examples": False,
    "remove_config_comments": True,
    "write_computation_times": False,
    "show_memory": False,
    "backreferences_dir": None,
    "doc_module": (),
    "image_scrapers": ("matplotlib",),
}

# -- HTML --------------------------------------------------------------------------------------
html_theme = "pydata_sphinx_theme"
html_title = f"trie-judge {release}"
html_theme_options = {
    "logo": {"text": f"trie-judge {release}"},  # the version beside the name on every page
    "navbar_align": "left",
    "header_links_before_dropdown": 6,
    "show_toc_level": 2,
    "secondary_sidebar_items": ["page-toc"],
    "footer_start": ["copyright"],
    "footer_end": ["sphinx-version"],
}
# The theme's light/dark mode before a reader picks one: unset, the theme logs "Got invalid theme
# mode" as a console error on every first visit (tests/test_docs_browser.py found it).
html_context = {"default_mode": "auto"}
# [project.urls] in pyproject.toml names no repository, so the navbar has no repository link.
html_show_sourcelink = False
html_copy_source = False
