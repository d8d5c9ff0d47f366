"""Sphinx configuration of the nescal-sklearn documentation site.

Build from the repository root (``pip install -e ".[docs]"`` first)::

    python -m sphinx -W --keep-going -b html docs docs/_build/html

* The user guide and the study pages are the markdown files of this folder, read by
  myst-parser; ``index.md`` is the root page.
* The API reference (``api.rst``) is generated from the docstrings by autosummary
  (templates in ``_templates/autosummary``) and numpydoc. At start-up the build checks
  that ``api.rst`` lists every public name (``nescal_sklearn._EXPORTS`` and each public
  subpackage's ``__all__``), so a name added to the package cannot be left out silently.
* The gallery is built by sphinx-gallery from ``../examples``: ``plot_*.py`` files are
  run and their output and figures shown; the other scripts are shown without being run.
  ``NESCAL_EXAMPLE_EPOCHS`` (e.g. ``3``) caps the examples' training budget for a quick
  build; CI sets it, and the numbers are meaningful only without it.
* Nothing is fetched at build time: no intersphinx inventories, no downloads.
"""

from __future__ import annotations

import importlib
import inspect
import os
import re
import sys
from pathlib import Path

from sphinx.errors import PycodeError
from sphinx.pycode import ModuleAnalyzer

import nescal_sklearn

HERE = Path(__file__).resolve().parent

project = "nescal-sklearn"
author = "the nescal-sklearn developers"
copyright = "the nescal-sklearn developers"
release = nescal_sklearn.__version__
version = release

extensions = [
    "sphinx.ext.autodoc",
    "sphinx.ext.autosummary",
    "sphinx.ext.viewcode",
    "numpydoc",
    "myst_parser",
    "sphinx_gallery.gen_gallery",
]

root_doc = "index"
source_suffix = {".rst": "restructuredtext", ".md": "markdown"}
templates_path = ["_templates"]
# figures/ holds generated reports that pages include ({include}), not pages of their own.
exclude_patterns = ["_build", "Thumbs.db", ".DS_Store", "**.ipynb_checkpoints", "figures/**"]
# Unresolvable cross-references (to torch, skorch or scikit-learn objects: there are no
# intersphinx inventories offline) stay plain text instead of failing the build.
nitpicky = False
default_role = "literal"

# -- myst: the markdown pages -------------------------------------------------------
myst_heading_anchors = 4  # "[at the end](#verdict-against-the-bar)" style links

# -- autodoc / autosummary / numpydoc ------------------------------------------------
autosummary_generate = True
autosummary_imported_members = False
autodoc_typehints = "none"  # the numpydoc Parameters sections carry the types
autodoc_member_order = "bysource"
autodoc_inherit_docstrings = False  # no scikit-learn / torch docstrings on our pages
numpydoc_show_class_members = False  # the class template lists the members
numpydoc_class_members_toctree = False
numpydoc_attributes_as_param_list = True
numpydoc_xref_param_type = False

# -- sphinx-gallery ------------------------------------------------------------------
sphinx_gallery_conf = {
    "examples_dirs": "../examples",
    "gallery_dirs": "auto_examples",
    # Run plot_*.py; show the other scripts (command-line tools, needs local data) as is.
    "filename_pattern": re.escape(os.sep) + "plot_",
    "ignore_pattern": r"__init__\.py",
    "within_subsection_order": "FileNameSortKey",
    "download_all_examples": False,
    "image_scrapers": ("matplotlib",),
    "reset_modules": ("matplotlib",),
    "remove_config_comments": True,
    "show_memory": False,
    "write_computation_times": False,
}

# -- HTML --------------------------------------------------------------------------
html_theme = "pydata_sphinx_theme"
html_title = f"nescal-sklearn {release}"
html_theme_options = {
    "navigation_with_keys": False,
    "show_toc_level": 2,
    "header_links_before_dropdown": 6,
}
html_show_sourcelink = False

# -- the API page lists every public name -------------------------------------------
PUBLIC_SUBPACKAGES = (
    "ensemble",
    "estimator",
    "nn",
    "preprocessing",
    "losses",
    "losses.experimental",
    "penalties",
    "graph",
    "model_selection",
    "calibration",
    "metrics",
    "scorers",
    "plotting",
    "diagnostics",
    "exceptions",
)


def public_names() -> set[str]:
    """``nescal_sklearn.<sub>.<name>`` for every top-level export and subpackage name, and
    ``nescal_bench.<name>`` for every name of the lab."""
    names = {f"nescal_sklearn.{sub}.{name}" for name, sub in nescal_sklearn._EXPORTS.items()}
    names.update(f"nescal_bench.{name}" for name in importlib.import_module("nescal_bench").__all__)
    for sub in PUBLIC_SUBPACKAGES:
        module = importlib.import_module(f"nescal_sklearn.{sub}")
        names.update(f"nescal_sklearn.{sub}.{name}" for name in getattr(module, "__all__", ()))
    return names


def check_api_page(app) -> None:
    """Warn (an error under ``-W``) about every public name that ``api.rst`` misses."""
    from sphinx.util import logging

    text = (HERE / "api.rst").read_text(encoding="utf-8")
    listed, module = set(), None
    for line in text.splitlines():
        match = re.match(r"\.\. currentmodule:: (\S+)", line)
        if match:
            module = match.group(1)
        elif module and re.match(r"   ~?[A-Za-z_][\w.]*$", line):
            name = line.strip().lstrip("~")
            listed.add(name if name.startswith("nescal_sklearn.") else f"{module}.{name}")
    missing = sorted(public_names() - listed)
    if missing:
        logging.getLogger(__name__).warning(
            "docs/api.rst does not list these public names: %s", ", ".join(missing)
        )


def skip_metadata_request_methods(app, what, name, obj, skip, options):
    """Leave out scikit-learn's generated ``set_{method}_request`` metadata-routing methods.

    scikit-learn adds them to every estimator class that takes ``sample_weight``; their
    docstrings belong to scikit-learn (and refer to its glossary), not to this package.
    """
    if re.fullmatch(r"set_\w+_request", name):
        return True
    return skip


def note_reexports(app, what, name, obj, options, lines) -> None:
    """Replace the docstring of a scikit-learn object re-exported here with a pointer to it.

    ``nescal_sklearn.metrics.log_loss``, ``brier_score_loss`` and
    ``nescal_sklearn.exceptions.NotFittedError`` are scikit-learn's own objects; their
    docstrings refer to scikit-learn's user guide, which this site does not have.
    """
    module = getattr(obj, "__module__", None) or ""
    if what in ("function", "class", "exception") and module.split(".")[0] == "sklearn":
        public = module.split("._")[0]
        lines[:] = [
            f"scikit-learn's ``{public}.{obj.__qualname__}``, re-exported unchanged:",
            "see scikit-learn's documentation.",
        ]


def document_constants(app, what, name, obj, options, lines) -> None:
    """Give a re-exported constant the ``#:`` comment written where it is defined.

    Autodoc reads ``#:`` comments only in the module a name is documented under
    (``nescal_sklearn.graph``), not in the private module that defines it
    (``nescal_sklearn.graph._from_model``), and otherwise shows the docstring of the
    value's type (``tuple``, ``PosixPath``), which says nothing about the constant.
    """
    if what != "data":
        return
    package, _, attr = name.rpartition(".")
    for modname, module in sorted(sys.modules.items()):
        if not modname.startswith(package + "._") or getattr(module, attr, None) is not obj:
            continue
        try:
            comment = ModuleAnalyzer.for_module(modname).find_attr_docs().get(("", attr))
        except PycodeError:
            continue
        if comment:
            lines[:] = [line.rstrip("\n") for line in comment]
            return
    if lines and lines[0].strip() == (inspect.getdoc(type(obj)) or "").split("\n")[0].strip():
        lines[:] = []


def setup(app) -> None:
    app.connect("builder-inited", check_api_page)
    app.connect("autodoc-skip-member", skip_metadata_request_methods)
    app.connect("autodoc-process-docstring", note_reexports)
    app.connect("autodoc-process-docstring", document_constants)
