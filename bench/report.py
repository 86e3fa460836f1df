"""Markdown tables from the JSON reports in bench/results (pasted into the README).

    python -m bench.report [--results bench/results]

Nothing is typed in by hand: every figure comes from a JSON file written by
bench/masks.py, bench/throughput.py, bench/huge_k.py or `judge evaluate`.

What it deliberately does not do: run a benchmark, or edit the README (paste
the tables by hand).
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path


def _fmt(v, spec):
    return "-" if v is None else format(v, spec)


def masks_table(records) -> str:
    engines = ["ours", "xgrammar", "llguidance", "outlines-core"]
    out = ["| family | K | " + " | ".join(f"{e} compile ms" for e in engines) + " | "
           + " | ".join(f"{e} fill µs" for e in engines) + " | ours MB |",
           "|---|---:|" + "---:|" * (2 * len(engines) + 1)]
    keys = sorted({(r["family"], r["K"]) for r in records}, key=lambda x: (x[0] != "tools", x[1]))
    by = {(r["engine"], r["family"], r["K"]): r for r in records}
    for fam, k in keys:
        comp, fill = [], []
        for e in engines:
            r = by.get((e, fam, k))
            if r is None:
                comp.append("-")
                fill.append("-")
            elif r["status"] != "ok":
                comp.append(r["status"].split(":")[0])
                fill.append("-")
            else:
                comp.append(_fmt(r["compile_ms"], ".1f"))
                fill.append(_fmt(r["fill_us"], ".2f"))
        ours = by.get(("ours", fam, k), {})
        out.append(f"| {fam} | {k:,} | " + " | ".join(comp) + " | " + " | ".join(fill)
                   + f" | {_fmt(ours.get('memory_mb'), '.1f')} |")
    setups = {}
    for r in records:
        if r.get("setup_ms") is not None:
            setups.setdefault(r["engine"], []).append(r["setup_ms"])
    med = {e: sorted(v)[len(v) // 2] for e, v in setups.items()}
    out.append("")
    out.append("Per-tokenizer setup (median ms): " + ", ".join(f"{e} {med[e]:.0f}" for e in engines if e in med))
    return "\n".join(out)


def throughput_table(records) -> str:
    out = ["| engine | texts | texts/s | ours faster (x) | argmax agreement with per-label | accuracy | valid | status |",
           "|---|---:|---:|---:|---:|---:|---:|---|"]
    for r in records:
        out.append(f"| {r['engine']} | {r['n_texts']} | {_fmt(r.get('texts_per_s'), '.3f')} | "
                   f"{_fmt(r.get('ratio_vs_ours'), '.1f')} | {_fmt(r.get('agreement_with_per_label'), '.3f')} | "
                   f"{_fmt(r.get('accuracy'), '.3f')} | {_fmt(r.get('valid_fraction'), '.3f')} | {r['status']} |")
    return "\n".join(out)


def evaluate_table(reports) -> str:
    out = ["| dataset | n (test) | K | method | accuracy | macro-F1 | validity | generate: accuracy | generate: validity | ECE before | ECE after | sel. acc. @50% | texts/s |",
           "|---|---:|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|"]
    for name, m in reports:
        g = m.get("baseline_generate", {})
        c = m.get("calibrated", {})
        out.append(
            f"| {name} | {m['n']} | {m['n_labels']} | {m['method']} | {m['accuracy']:.3f} | {m['macro_f1']:.3f} | "
            f"{m['validity']:.3f} | {_fmt(g.get('accuracy'), '.3f')} | {_fmt(g.get('validity'), '.3f')} | "
            f"{m['uncalibrated']['ece']:.3f} | {_fmt(c.get('ece'), '.3f')} | "
            f"{_fmt(c.get('selective_accuracy_at_50'), '.3f')} | {m['texts_per_s']:.2f} |")
    return "\n".join(out)


def engine_exactness_table(rep) -> str:
    out = ["| model | path | prompt tokens | exact | exact + end token | first_token | decode (labels found) | silent mismatch |",
           "|---|---|---:|---:|---:|---:|---:|---|"]
    for r in rep["records"]:
        dec = "-" if r["decode_max_abs_diff"] is None else f"{r['decode_max_abs_diff']:.1e}"
        out.append(f"| {r['arch']} | {r['path']} | {r['prompt_tokens']} | {r['exact_max_abs_diff']:.1e} | "
                   f"{r['exact_end_max_abs_diff']:.1e} | {r['first_token_max_abs_diff']:.1e} | {dec} ({r['decode_found']}) | "
                   f"{'yes' if r['silent_mismatch'] else 'no'} |")
    out.append(f"\nsilent mismatches: {rep['silent_mismatches']} of {len(rep['records'])}")
    return "\n".join(out)


def engine_throughput_table(rep) -> str:
    v = rep["variants"]
    before = v.get("before (two-pass)", {}).get("texts_per_s")
    bare = v.get("bare forward", {}).get("texts_per_s")
    out = [f"{rep['dataset']}: {rep['n']} seeded test texts, K = {rep['K']}, {rep['threads']} thread(s), "
           f"batch {rep['batch_size']}, median of {rep['repeats']}\n",
           "| variant | texts/s | x before (two-pass) | / bare forward | tokens fed | check |",
           "|---|---:|---:|---:|---:|---|"]
    for name, r in v.items():
        if "texts_per_s" not in r:
            out.append(f"| {name} | failed | | | | {r.get('error', '')[:80]} |")
            continue
        check = ""
        if "argmax_identical" in r:
            check = f"argmax identical to exact on {r['argmax_identical']}/{rep['n']}"
        elif "max_total_variation" in r:
            check = f"max TV vs exact {r['max_total_variation']:.1e}"
        elif "argmax_agreement_with_exact" in r:
            check = f"argmax agreement {r['argmax_agreement_with_exact']:.3f}, max diff {r['max_abs_diff_vs_exact']:.1e}"
        elif "max_abs_diff_vs_exact" in r:
            check = f"max diff vs exact {r['max_abs_diff_vs_exact']:.1e}"
        out.append(f"| {name} | {r['texts_per_s']:.3f} | {_fmt(before and r['texts_per_s'] / before, '.2f')} | "
                   f"{_fmt(bare and r['texts_per_s'] / bare, '.2f')} | {_fmt(r.get('input_tokens'), 'd')} | {check} |")
    return "\n".join(out)


def _pct(v):
    return "-" if v is None else f"{100 * v:.1f}"


def _ci(ci):
    return f"[{100 * ci[0]:.1f}, {100 * ci[1]:.1f}]"


PROMPT_NAMES = {
    "default": "chat template, labels listed (the old default)",
    "lower": "chat, listed, lower-cased names",
    "lower+nolist": "chat, not listed", "lower+intent": "chat, listed, other wording",
    "lower+rot": "chat, list rotated K/2", "lower+completion": "completion, listed",
    "lower+completion+nolist": "completion, not listed", "lower+completion+intent": "completion, listed, other wording",
    "lower+completion+rot": "completion, list rotated K/2", "rotavg(chat)": "chat, mean of 2 rotations (2 passes)",
    "rotavg(completion)": "completion, mean of 2 rotations (2 passes)",
    "ensemble(completion)": "completion: listed + other wording + rotated (3 passes)",
}


def select_table(sel) -> str:
    """Validation accuracy (%): mean over the datasets per prompt x bias, then per dataset for the key rows."""
    rows = sel["rows"]
    datasets = list(dict.fromkeys(r["dataset"] for r in rows))
    n = {r["dataset"]: r["n"] for r in rows}
    by = {(r["prompt"], r["bias"], r["dataset"]): r for r in rows}
    prompts = [p for p in PROMPT_NAMES if all((p, "none", d) in by for d in datasets)]
    biases = ["none", "contextual", "batch", "contextual+fit(l2=1)", "batch+fit(l2=1)", "batch+fit(l2=10)"]
    mean = {(p, b): sum(by[(p, b, d)]["accuracy"] for d in datasets) / len(datasets) for p in prompts for b in biases}
    out = [f"Mean validation accuracy (%) over {', '.join(f'{d} (n={n[d]})' for d in datasets)}; "
           "biases fitted with labels are out-of-fold (5-fold):", "",
           "| prompt | " + " | ".join(biases) + " |", "|---|" + "---:|" * len(biases)]
    for p in prompts:
        cells = []
        for b in biases:
            v = _pct(mean[(p, b)])
            cells.append(f"**{v}**" if (p, b) == (sel["best"]["prompt"], sel["best"]["bias"]) else v)
        out.append(f"| {PROMPT_NAMES[p]} | " + " | ".join(cells) + " |")
    key = [("default", "contextual", "old default"), (sel["best"]["prompt"], sel["best"]["bias"], "chosen")]
    if sel.get("best_averaged"):
        key.append((sel["best_averaged"]["prompt"], sel["best_averaged"]["bias"], "best with several passes"))
    out += ["", "| | prompt | bias | " + " | ".join(datasets) + " | mean |", "|---|---|---|" + "---:|" * (len(datasets) + 1)]
    for p, b, what in key:
        accs = [by[(p, b, d)]["accuracy"] for d in datasets]
        out.append(f"| {what} | {PROMPT_NAMES.get(p, p)} | {b} | " + " | ".join(_pct(a) for a in accs)
                   + f" | {_pct(sum(accs) / len(accs))} |")
    return "\n".join(out)


def accuracy_table(rep) -> str:
    out = ["| dataset | n test | K | accuracy % [95% CI] | macro-F1 | majority % | uniform % | ECE raw | ECE calibrated [CI] "
           "| noise floor | ECE / floor | coverage at acc. >= 0.5 | at >= 0.7 | threshold from validation for 0.7: coverage, accuracy |",
           "|---|---:|---:|---|---:|---:|---:|---:|---|---:|---:|---:|---:|---|"]
    for d, r in rep["datasets"].items():
        c, u = r["calibrated"], r["uncalibrated"]
        tp = [t for t in r["threshold_points"] if t["target"] == 0.7][0]
        cov = c["coverage_at_accuracy"]
        out.append(f"| {d} | {r['n_test']} | {r['K']} | {_pct(c['accuracy'])} {_ci(c['accuracy_ci'])} | {c['macro_f1']:.3f} | "
                   f"{_pct(c['majority']['accuracy'])} | {_pct(c['uniform'])} | {u['ece']:.3f} | "
                   f"{c['ece']:.3f} [{c['ece_ci'][0]:.3f}, {c['ece_ci'][1]:.3f}] | {c['ece_floor']:.3f} | "
                   f"{c['ece_over_floor']:.2f} | {_pct(cov['0.5'])} | {_pct(cov['0.7'])} | "
                   f"{_pct(tp['coverage'])}%, {_pct(tp['selective_accuracy'])}% |")
    return "\n".join(out)


def cascade_table(rep) -> str:
    out = ["| dataset | n | SmolLM2 % (s/text) | Gemma-3-270M % (s/text) | order | accuracy % at routed 0 / 20 / 40 / 60 / 80 / 100 % "
           "| threshold for 0.7 (from validation): routed, accuracy %, s/text |",
           "|---|---:|---|---|---|---|---|"]
    for d, r in rep["cascade"].items():
        for order in ("smollm2->gemma3", "gemma3->smollm2"):
            c = r[order]["curve"]
            pt = [x for x in r[order]["threshold_points"] if x["target"] == 0.7][0]
            out.append(f"| {d} | {r['n']} | {_pct(r['smollm2']['accuracy'])} ({r['smollm2']['seconds_per_text']:.2f}) | "
                       f"{_pct(r['gemma3']['accuracy'])} ({r['gemma3']['seconds_per_text']:.2f}) | {order} | "
                       + " / ".join(_pct(x["accuracy"]) for x in c[::2])
                       + f" | {_pct(pt['routed'])}%, {_pct(pt['accuracy'])}, {pt['seconds_per_text']:.2f} |")
    return "\n".join(out)


def letters_table(rep) -> str:
    out = ["| dataset | n test | K | majority % | readout | accuracy % [95% CI] | macro-F1 | ECE | noise floor | s/text |",
           "|---|---:|---:|---:|---|---|---:|---:|---:|---:|"]
    names = {"ours": "ours (label names, exact)", "letters_rotavg": "letters, averaged over K rotations",
             "letters_single": "letters, one order, uncalibrated"}
    for d, r in rep["letters"].items():
        for key in ("ours", "letters_rotavg", "letters_single"):
            if key in r:
                v = r[key]
                out.append(f"| {d} | {r['n_test']} | {r['K']} | {_pct(r.get('majority'))} | {names[key]} | {_pct(v['accuracy'])} {_ci(v['accuracy_ci'])} | "
                           f"{v['macro_f1']:.3f} | {v['ece']:.3f} | {v['ece_floor']:.3f} | {_fmt(v.get('seconds_per_text'), '.2f')} |")
    return "\n".join(out)


def main(argv=None) -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--results", default=str(Path(__file__).parent / "results"))
    args = p.parse_args(argv)
    res = Path(args.results)
    if (res / "accuracy_select.json").exists():
        print("### Choosing the default on validation (accuracy %, SmolLM2-135M)\n")
        print(select_table(json.loads((res / "accuracy_select.json").read_text())))
    if (res / "accuracy.json").exists():
        rep = json.loads((res / "accuracy.json").read_text())
        print(f"\n### Test, once: prompt {rep['prompt']}, bias {rep['bias']} (SmolLM2-135M)\n")
        print(accuracy_table(rep))
        if rep.get("cascade"):
            print("\n### Cascade SmolLM2-135M -> Gemma-3-270M (and the reverse), test\n")
            print(cascade_table(rep))
        if rep.get("letters"):
            print("\n### Letter readout (the peers' method) vs ours, same model, test\n")
            print(letters_table(rep))
    if (res / "engine_exactness.json").exists():
        rep = json.loads((res / "engine_exactness.json").read_text())
        extra = res / "engine_exactness_gemma_long.json"
        if extra.exists():  # the real Gemma-3-270M again, with a prompt longer than its 512-token window
            more = json.loads(extra.read_text())
            rep = {"records": rep["records"] + more["records"],
                   "silent_mismatches": rep["silent_mismatches"] + more["silent_mismatches"]}
        print("### Engine exactness: |engine - independent brute force| (nats), 2 texts x 6 labels\n")
        print(engine_exactness_table(rep))
    for name in ("banking77", "clinc150"):
        f = res / f"engine_{name}.json"
        if f.exists():
            print(f"\n### Engine throughput: {name}, SmolLM2-135M on CPU\n")
            print(engine_throughput_table(json.loads(f.read_text())))
    if (res / "masks_qwen3.json").exists():
        print("### Masks: Qwen3 tokenizer (151,669 tokens)\n")
        print(masks_table(json.loads((res / "masks_qwen3.json").read_text())))
    if (res / "throughput.json").exists():
        print("\n### Throughput: Banking77, 77 labels, SmolLM2-135M on CPU\n")
        print(throughput_table(json.loads((res / "throughput.json").read_text())))
    evals = [(f.stem.removeprefix("evaluate_"), json.loads(f.read_text())) for f in sorted(res.glob("evaluate_*.json"))]
    if evals:
        print("\n### Accuracy and calibration (SmolLM2-135M-Instruct, packaged Q4_1)\n")
        print(evaluate_table(evals))
    if (res / "calibration_variants.json").exists():
        print("\n### Label-bias variants (temperature refit on the same validation scores; bench/calibration_variants.py)\n")
        print("| dataset | bias | T | accuracy | ECE | ECE (equal-mass) | NLL |")
        print("|---|---|---:|---:|---:|---:|---:|")
        for r in json.loads((res / "calibration_variants.json").read_text()):
            print(f"| {r['dataset']} | {r['bias']} | {r['temperature']:.2f} | {r['accuracy']:.3f} | {r['ece']:.3f} | "
                  f"{r['ece_quantile']:.3f} | {r['nll']:.3f} |")
    if (res / "huge_k.json").exists():
        h = json.loads((res / "huge_k.json").read_text())
        print(f"\n### K = {h['K']:,} ICD-like codes end to end (decode path)\n")
        print(f"tokenizer setup {h.get('tokenizer_setup_ms', float('nan')):.0f} ms; "
              f"automaton build {h['automaton_build_ms']:.0f} ms, {h['automaton_mb']:.1f} MB; "
              f"{h['seconds_per_text']:.1f} s per text; all outputs valid: {h['valid']}; "
              f"peak RSS {h['peak_rss_mb']:.0f} MB (model loaded: {h['peak_rss_after_model_mb']:.0f} MB)")


if __name__ == "__main__":
    main()
