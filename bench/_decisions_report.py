"""Figures of bench/decisions_quality.py's report, from sys1bench prediction rows (no scoring here).

Per question (generator and question key), from the rows the server answered:

* ``accuracy``: sys1bench's headline, the median over its friendly framings (canonical
  option order); ``accuracy_f0``: the canonical framing alone;
* ``majority``: the majority-class baseline, the share of the most frequent gold answer
  (the gold's top share); ``answer_top_share``: the share of the most frequent answer,
  both over the items at the canonical framing and option order;
* ``ece_over_floor``: sys1bench's ECE (15 equal-width bins) over its resampled noise floor
  at the canonical framing; ``framing_flip_rate`` (how often an item's answer changes
  between framings) and ``permutation_flip_rate`` (between option orders, choice only).

Targets (the issue's): no question answers one option on more than its gold top share +
20 points of items; median over questions of accuracy - majority >= +15 points
(uncalibrated); ECE / floor <= 2 with a profile; the ``dmguard audit --no-guard``
option-order change rate (model alone) <= 10% with its accuracy > 50%; Banking77 as one
choice question through ``/v1/systemone`` within 1 point of ``Classifier`` with the same
prompt and the same (content-free) correction. A target whose inputs are absent is
reported as ``"not measured"`` (``met: None``), never estimated.

What it deliberately does not do: score, or choose anything.
"""

from __future__ import annotations

from collections import Counter, defaultdict

import numpy as np


def question_cards(path) -> dict:
    """{generator.question: figures} for one prediction file."""
    from sys1bench.report.scorecard import scorecard
    from sys1bench.runners.benchmark_runner import load_predictions

    rows = [r for r in load_predictions(path) if r.arm in (None, "main")]
    by_q = defaultdict(list)
    for r in rows:
        by_q[(r.domain, r.question_key)].append(r)
    out = {}
    for (domain, key), rs in sorted(by_q.items()):
        card = scorecard(rs, floor_resamples=200)
        canon = {r.task_id: r for r in rs if r.framing_id == "f0" and r.permutation_id == "p0"}
        gold = Counter(r.ground_truth for r in canon.values())
        answers = Counter(r.argmax for r in canon.values())
        n = len(canon)
        cal = card.get("calibration", {})
        out[f"{domain}.{key}"] = {
            "type": rs[0].primitive, "n_items": n, "n_rows": card["n_rows"],
            "accuracy": card["accuracy"], "accuracy_range": card["accuracy_range"],
            "accuracy_f0": float(np.mean([r.correct for r in canon.values()])),
            "majority": gold.most_common(1)[0][1] / n,
            "answer_top_share": answers.most_common(1)[0][1] / n, "answer_top": answers.most_common(1)[0][0],
            "ece": cal.get("ece_width_15"), "ece_floor": cal.get("ece_floor_mean"),
            "ece_over_floor": cal.get("ece_over_floor"),
            "framing_flip_rate": card["framing"].get("argmax_flip_rate"),
            "permutation_flip_rate": card.get("permutation", {}).get("argmax_flip_rate"),
            "schema_failure_rate": card["schema_failure_rate"],
        }
    return out


def _not_measured(why: str) -> dict:
    return {"value": f"not measured: {why}", "met": None}


def targets(cards: dict | None, calibrated: dict | None = None, *, audit: dict | None = None,
            banking77: dict | None = None, tag: str = "after") -> dict:
    """The issue's targets, measured: each with its value and met (True / False), or ``met: None``, "not measured".

    Parameters
    ----------
    cards, calibrated : dict or None
        `question_cards` of the uncalibrated and the profile arm (sys1bench test rows).
    audit : dict or None
        ``dmguard audit --no-guard --out`` JSON (`AuditReport.to_dict`) for this code (``tag``).
    banking77 : dict or None
        ``decisions_quality.py banking77`` JSON (measured on this tree only: pass None for "before").
    tag : str
        Which code ("before" / "after"): named where an input is absent.
    """
    out = {}
    if cards:
        over = {k: c["answer_top_share"] - c["majority"] for k, c in cards.items()}
        worst = max(over, key=over.get)
        gain = [c["accuracy"] - c["majority"] for c in cards.values()]
        out["top_share_within_gold_plus_20"] = {
            "value": f"worst {worst}: answers one option on {cards[worst]['answer_top_share']:.0%} of items, gold's top "
                     f"share {cards[worst]['majority']:.0%} (+{over[worst] * 100:.0f} points); "
                     f"{sum(v > 0.20 + 1e-9 for v in over.values())} of {len(over)} questions over",
            "met": all(v <= 0.20 + 1e-9 for v in over.values())}
        out["median_accuracy_minus_majority_at_least_15_points"] = {
            "value": f"{np.median(gain) * 100:+.1f} points (median over {len(gain)} questions; accuracy median over "
                     f"framings vs the majority baseline)",
            "met": bool(np.median(gain) >= 0.15)}
    else:
        why = f"no sys1bench test prediction rows for {tag!r} (decisions_quality.py run --split test --tag {tag})"
        out["top_share_within_gold_plus_20"] = _not_measured(why)
        out["median_accuracy_minus_majority_at_least_15_points"] = _not_measured(why)
    ratios = {k: c["ece_over_floor"] for k, c in (calibrated or {}).items() if c["ece_over_floor"] is not None}
    if ratios:
        bad = {k: round(v, 2) for k, v in ratios.items() if v > 2}
        out["ece_over_floor_at_most_2_with_profile"] = {
            "value": f"max {max(ratios.values()):.2f}, median {np.median(list(ratios.values())):.2f} over "
                     f"{len(ratios)} questions; over 2: {bad or 'none'}",
            "met": not bad}
    else:
        out["ece_over_floor_at_most_2_with_profile"] = _not_measured(
            f"no calibrated sys1bench test rows with an ECE for {tag!r} (decisions_quality.py run --calibrated)")
    out["audit_option_order_at_most_10_percent_with_accuracy_over_50"] = _audit_target(audit, tag)
    out["banking77_within_1_point_of_classifier"] = _banking77_target(banking77, tag)
    return out


def _audit_target(audit: dict | None, tag: str) -> dict:
    """dmguard's option_order check, model alone (``--no-guard``): answers changed by reversing the options."""
    if not audit:
        return _not_measured(f"no dmguard audit result for {tag!r} (decisions_quality.py audit --tag {tag} writes "
                             f"bench/results/decisions_audit_{tag}.json)")
    fam = (audit.get("families") or {}).get("option_order") or {}
    rate, acc = fam.get("raw_rate"), audit.get("accuracy_raw")
    if not fam.get("n") or rate is None or acc is None:
        return _not_measured("the audit result has no option_order check with cases, or no accuracy")
    return {"value": f"option order changed {rate:.0%} of {fam['n']} answers (model alone); accuracy {acc:.0%} over "
                     f"{audit.get('cases')} cases",
            "met": bool(rate <= 0.10 + 1e-9 and acc > 0.50)}


def _banking77_target(b77: dict | None, tag: str) -> dict:
    """The server's default answers (bias "contextual") vs Classifier, same engine and prompt, same correction."""
    if b77 is None:
        why = "the banking77 run measures this tree only" if tag != "after" else \
            "no Banking77 result (decisions_quality.py banking77 writes bench/results/decisions_banking77.json)"
        return _not_measured(why)
    served, clf = b77.get("decisions_through_server") or {}, b77.get("same prompt") or {}
    if served.get("contextual") is None or clf.get("contextual") is None:
        return _not_measured("the Banking77 result lacks the server's contextual accuracy or the Classifier's "
                             "same-prompt contextual accuracy")
    diff = served["contextual"] - clf["contextual"]
    also = ""
    if served.get("None") is not None and clf.get("none") is not None:
        also = f"; uncorrected: {served['None']:.1%} vs {clf['none']:.1%}"
    return {"value": f"{served['contextual']:.1%} through /v1/systemone vs {clf['contextual']:.1%} Classifier (same "
                     f"prompt, content-free correction), {diff * 100:+.1f} points over {b77.get('n')} test texts{also}",
            "met": bool(abs(diff) <= 0.01 + 1e-9)}


def markdown(cards_by_arm: dict) -> str:
    """One table: per question, each arm's accuracy, majority, top share, ECE/floor, flip rates."""
    arms = list(cards_by_arm)
    keys = sorted({k for c in cards_by_arm.values() for k in c})
    head = ["question", "type", "n", "majority %"]
    for a in arms:
        head += [f"{a}: acc % (f0)", f"{a}: top answer %", f"{a}: ECE/floor", f"{a}: flips framing / order"]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for k in keys:
        first = next(c[k] for c in cards_by_arm.values() if k in c)
        row = [k, first["type"], str(first["n_items"]), f"{first['majority'] * 100:.0f}"]
        for a in arms:
            c = cards_by_arm[a].get(k)
            if c is None:
                row += ["-"] * 4
                continue
            pf = "-" if c["permutation_flip_rate"] is None else f"{c['permutation_flip_rate']:.2f}"
            row += [f"{c['accuracy'] * 100:.0f} ({c['accuracy_f0'] * 100:.0f})", f"{c['answer_top_share'] * 100:.0f}",
                    "-" if c["ece_over_floor"] is None else f"{c['ece_over_floor']:.2f}",
                    f"{c['framing_flip_rate']:.2f} / {pf}"]
        lines.append("| " + " | ".join(row) + " |")
    return "\n".join(lines)
