"""The classifiers bench/accuracy.py scores: its models, its prompt variants' wordings, and how each is built.

`build` turns a variant (``+``-joined flags: ``lower``, ``completion``, ``nolist``, ``intent``,
``desc``, ``rot``, ``think``; see bench/accuracy.py) into a `judge.Classifier` and the column order
that puts its scores in dataset label order; `build_letters` is the peers' letter readout (options
listed as ``A. name``, the answer a letter). `TREC_DESCRIPTIONS` (Li & Roth's six coarse classes)
is also the TREC question of bench/decisions_quality.py.

What it deliberately does not do: score, cache or read scores back (bench/accuracy.py and
bench/_accuracy_cache.py do).
"""

from __future__ import annotations

import numpy as np

__all__ = ["INTENT_COMPLETION", "INTENT_SYSTEM", "LETTERS", "LETTER_COMPLETION", "MODELS", "TREC_DESCRIPTIONS", "build",
           "build_letters"]

MODELS = {"smollm2": None, "gemma3": "gemma3-270m", "tiny": None}  # tiny: bench._common.load_bench_model

INTENT_SYSTEM = (
    "Read the user's message and decide which category it belongs to. Reply with the one category "
    "from this list that fits it best, written exactly as shown, and nothing else.\n\nCategories:\n{labels}"
)
INTENT_COMPLETION = (
    "Decide which category the text belongs to. Reply with the one category from this list that fits "
    "it best.\n\nCategories:\n{labels}\n\nText: {text}\nCategory:"
)
#: Li & Roth's definitions of the six coarse TREC classes (the dataset's documentation).
TREC_DESCRIPTIONS = {
    "abbreviation": "an abbreviation or what it stands for",
    "entity": "an entity: animal, colour, event, food, product, language, sport, term, other things",
    "description": "a definition, description, manner or reason",
    "human": "a person, group or organisation, or a description of one",
    "location": "a city, country, mountain, state or other place",
    "number": "a number: count, date, distance, money, percentage, period, size, speed, temperature",
}


LETTERS = "ABCDEFGHIJKLMNOPQRSTUVWXYZ"
LETTER_COMPLETION = (
    "Classify the text: reply with the letter of the one option that fits it best.\n\nOptions:\n{options}"
    "\n\nText: {text}\nAnswer:"
)


def build(dataset: str, labels, variant: str, model=None, tokenizer=None, model_key="smollm2"):
    """(Classifier, columns) for a variant: ``proba[:, columns]`` is in ``labels`` order."""
    from judge import Classifier
    from judge import datasets as ds
    from judge.labels import natural_label
    from judge.prompts import DEFAULT_COMPLETION, DEFAULT_SYSTEM, PromptTemplate

    if variant.startswith("letters@"):
        return build_letters(dataset, labels, int(variant.split("@")[1]), model, tokenizer, model_key)
    flags = set(variant.split("+")) - {"default"}
    unknown = flags - {"lower", "completion", "nolist", "intent", "desc", "rot", "think"}
    if unknown:
        raise SystemExit(f"unknown variant flag(s) {sorted(unknown)} in {variant!r}")
    shown = ds.display_names(dataset, labels) or {lab: natural_label(lab) for lab in labels}
    if "lower" in flags:
        shown = {k: v.lower() for k, v in shown.items()}
    kw = {}
    if "completion" in flags:
        kw["chat"] = False
    if "nolist" in flags:
        kw["max_listed_labels"] = 0
    if "intent" in flags:
        kw["system"], kw["completion"] = INTENT_SYSTEM, INTENT_COMPLETION
    if "desc" in flags:
        if set(shown.values()) - set(TREC_DESCRIPTIONS):
            raise SystemExit("variant 'desc' exists for TREC coarse only (the one dataset with class descriptions)")
        kw["label_line"] = "- {label}"
        listed = "\n".join(f"- {n}: {TREC_DESCRIPTIONS[n]}" for n in sorted(shown.values()))
        note = listed + "\n\nReply with the label only (the words before the colon)."
        kw["system"] = kw.get("system", DEFAULT_SYSTEM).replace("{labels}", note)
        kw["completion"] = kw.get("completion", DEFAULT_COMPLETION).replace("{labels}", note)
    order = sorted(labels, key=lambda lab: shown[lab])
    if "rot" in flags:
        half = len(order) // 2
        order = order[half:] + order[:half]
        kw["sort_labels"] = False
    if model_key == "gemma3":
        kw["chat"] = False  # a base model: completion prompt
    prompt = PromptTemplate(**kw) if kw else None
    clf = Classifier(order, model if model is not None else MODELS[model_key], tokenizer=tokenizer,
                     prompt=prompt, label_names={lab: shown[lab] for lab in order}, progress=False,
                     think="think" in flags, think_tokens=64)
    pos = {lab: i for i, lab in enumerate(order)}
    return clf, np.array([pos[lab] for lab in labels])


def build_letters(dataset, labels, rotation, model=None, tokenizer=None, model_key="smollm2"):
    """The peers' readout: options listed as ``A. name``, the answer is a letter; list rotated by ``rotation``.

    Returns (Classifier over the letters, columns): column ``columns[i]`` of its
    scores is the letter shown for ``labels[i]``.
    """
    from judge import Classifier
    from judge import datasets as ds
    from judge.labels import natural_label
    from judge.prompts import PromptTemplate

    k = len(labels)
    if k > len(LETTERS):
        raise SystemExit(f"the letter readout needs at most 26 options, got {k}")
    shown = ds.display_names(dataset, labels) or {lab: natural_label(lab) for lab in labels}
    shown = {a: b.lower() for a, b in shown.items()}
    order = sorted(labels, key=lambda lab: shown[lab])
    order = order[rotation % k:] + order[:rotation % k]
    listed = "\n".join(f"{LETTERS[j]}. {shown[lab]}" for j, lab in enumerate(order))
    # a completion prompt, like the chosen default (bench/results/accuracy_select.json)
    prompt = PromptTemplate(completion=LETTER_COMPLETION.replace("{options}", listed), chat=False, sort_labels=False)
    letters = list(LETTERS[:k])
    clf = Classifier(letters, model if model is not None else MODELS[model_key], tokenizer=tokenizer,
                     prompt=prompt, label_names="raw", progress=False)
    pos = {lab: j for j, lab in enumerate(order)}
    return clf, np.array([pos[lab] for lab in labels])
