"""Benchmark: trie-judge decisions vs the letter readout with option-order averaging (anyjev), same model, same items.

    python -m bench.serve_peers                          # writes bench/results/serve_peers.json
    python -m bench.serve_peers --n 3 --generators support_tickets --json /tmp/p.json   # smoke test
    python -m bench.serve_peers --model tiny --n 1 --generators support_tickets --calibration-n 0 --json /tmp/p.json
        # trie-judge only, on a random-weight model: the harness in seconds, numbers mean nothing

Items: sys1bench's generated, policy-labelled items (canonical framing f0,
canonical option order), ``--n`` per generator. Both sides run in this
process on the same SmolLM2 weights (the packaged model's converted folder),
float32 on CPU:

``trie-judge``
    ``Decider().ask(state, questions)``: exact log-probabilities of every
    option's full name, all questions of an item in one scoring call.
``anyjev (L0)`` / ``anyjev (raw)``
    anyjev 0.3's ``Decider(HFBackend(...))``: options shown as letters, the
    next-token distribution over the letters read out, averaged over option
    permutations; ``L0`` adds its zero-label (batch prior) debiasing. Option
    descriptions are written into the question text (anyjev's options are
    labels only); score questions pass their level descriptions as ``levels``.

``trie-judge (calibrated)``
    the same, with a `judge.decisions.DecisionCalibration` (temperature per
    question type, yes/no and score biases) fitted by ``calibrate_decisions``
    on ``--calibration-n`` other generated items per generator (seed 7; the
    evaluation items use seed 42).

Reported per question key and side: accuracy (argmax vs the generator's
label), top-label ECE (15 bins; n is small, so read it with its n), and
mean latency per item (all its questions).

What it deliberately does not do: tune either side, or call the server
(the HTTP overhead is measured by ``bench/serve.py``).
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import numpy as np

from bench._decisions_data import judge_questions, labelled_jsonl, task_items, truth_index

REPO = Path(__file__).resolve().parents[1]


def _items(generators, n, seed=42):
    """(generator, item) pairs: bench._decisions_data's items, the benchmarks' one copy."""
    return [(it.metadata["generator"], it) for it in task_items(generators, n, seed)]


def _anyjev_questions(item):
    from anyjev import Question

    out = []
    for k, q in item.questions.items():
        instr = q.instructions if isinstance(q.instructions, str) else json.dumps(q.instructions)
        if q.type == "choice":
            desc = "\n".join(f"- {c.key}: {c.description}" for c in q.criteria if c.description)
            out.append((k, Question.choice(instr + ("\n" + desc if desc else ""), [c.key for c in q.criteria], name=k)))
        elif q.type == "noul":
            out.append((k, Question.noul(instr, name=k)))
        else:
            out.append((k, Question.score(instr, levels=[c.description or f"level {c.level}" for c in q.criteria], name=k)))
    return out


def _metrics(rows):
    from judge.calibration.metrics import expected_calibration_error

    out = {}
    for key in sorted({r["key"] for r in rows}):
        rs = [r for r in rows if r["key"] == key]
        k = max(len(r["p"]) for r in rs)
        P = np.array([np.pad(r["p"], (0, k - len(r["p"]))) for r in rs])
        y = np.array([r["y"] for r in rs])
        out[key] = {"n": len(rs), "accuracy": float(np.mean(P.argmax(1) == y)),
                    "ece": float(expected_calibration_error(y, P, n_bins=15))}
    return out


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--generators", default="support_tickets,log_triage")
    p.add_argument("--n", type=int, default=20)
    p.add_argument("--engine", default="auto")
    p.add_argument("--model", default=None, help="default: the packaged SmolLM2 (both sides); 'tiny': a "
                                                 "random-weight model for trie-judge only (anyjev is skipped)")
    p.add_argument("--calibration-n", type=int, default=10,
                   help="items per generator (seed 7, disjoint from the evaluation seed 42) to fit a decision "
                        "calibration profile on; 0 to skip")
    p.add_argument("--json", default=str(REPO / "bench" / "results" / "serve_peers.json"))
    a = p.parse_args(argv)

    from bench._common import load_bench_model
    from judge.decisions import Decider
    from judge.models import packaged_model_dir

    model, tok = load_bench_model(a.model, device="cpu")
    items = _items(a.generators.split(","), a.n)
    results = {}

    d = Decider(model, tok, engine=a.engine)
    d.ask("warm up", {"q": judge_questions(items[0][1])[next(iter(items[0][1].questions))]})
    rows, times = [], []
    for g, it in items:
        qs = judge_questions(it)
        t0 = time.perf_counter()
        ans = d.ask(it.state, qs)
        times.append(time.perf_counter() - t0)
        for k, q in it.questions.items():
            rows.append({"key": f"{g}/{k}", "p": np.array(list(ans[k].probabilities.values())), "y": truth_index(q)})
    results["trie-judge"] = {"per_question": _metrics(rows), "ms_per_item": 1000 * float(np.mean(times)),
                             "engine": type(d.scorer_).__name__}
    print(f"  trie-judge done: {results['trie-judge']['ms_per_item']:.0f} ms/item", file=sys.stderr, flush=True)

    if a.calibration_n:
        # held out: fitted on other generated items (another seed), evaluated on the same items as above
        from judge.decisions import calibrate_decisions
        from judge.server.wire import read_labelled

        fit_items = _items(a.generators.split(","), a.calibration_n, seed=7)
        path = labelled_jsonl(fit_items, Path(a.json).with_suffix(".calibration.jsonl"))
        cal = calibrate_decisions(read_labelled(path), d, min_per_level_set=a.calibration_n)
        dc = Decider(model, tok, engine=a.engine, calibration=cal)
        rows, times = [], []
        for g, it in items:
            t0 = time.perf_counter()
            ans = dc.ask(it.state, judge_questions(it))
            times.append(time.perf_counter() - t0)
            for k, q in it.questions.items():
                rows.append({"key": f"{g}/{k}", "p": np.array(list(ans[k].probabilities.values())), "y": truth_index(q)})
        results["trie-judge (calibrated)"] = {"per_question": _metrics(rows), "ms_per_item": 1000 * float(np.mean(times)),
                                              "calibration": cal.to_dict(), "fit_items": len(fit_items)}
        print("  trie-judge calibrated done", file=sys.stderr, flush=True)

    try:
        if a.model is not None:
            raise RuntimeError(f"anyjev runs on the packaged model only, not --model {a.model!r}")
        from anyjev import Decider as AJDecider
        from anyjev.backends.hf import HFBackend

        backend = HFBackend(str(packaged_model_dir()), device="cpu", dtype="float32", batch_size=8)
        for level in ("L0", "raw"):
            aj = AJDecider(backend, level=level)
            rows, times = [], []
            for g, it in items:
                qs = _anyjev_questions(it)
                t0 = time.perf_counter()
                ds = aj.decide(it.state, [q for _, q in qs])
                times.append(time.perf_counter() - t0)
                for (k, _), dec in zip(qs, ds):
                    rows.append({"key": f"{g}/{k}", "p": np.asarray(dec.probs, dtype=float),
                                 "y": truth_index(it.questions[k])})
            results[f"anyjev ({level})"] = {"per_question": _metrics(rows), "ms_per_item": 1000 * float(np.mean(times))}
            print(f"  anyjev {level} done", file=sys.stderr, flush=True)
    except Exception as e:  # noqa: BLE001 - record why the peer could not run
        results["anyjev"] = {"error": f"{type(e).__name__}: {e}"}

    keys = sorted({k for r in results.values() for k in r.get("per_question", {})})
    sides = [s for s in results if "per_question" in results[s]]
    print(f"\n{'question':<32} " + " ".join(f"{s + ' acc':>18} {'ECE':>6}" for s in sides))
    for k in keys:
        cells = []
        for s in sides:
            m = results[s]["per_question"].get(k)
            cells.append(f"{m['accuracy']:>18.3f} {m['ece']:>6.3f}" if m else f"{'-':>18} {'-':>6}")
        print(f"{k:<32} " + " ".join(cells))
    print("ms per item: " + ", ".join(f"{s} {results[s]['ms_per_item']:.0f}" for s in sides))
    if "anyjev" in results:
        print("anyjev:", results["anyjev"]["error"])
    rec = {"benchmark": "serve_peers", "n_per_generator": a.n, "generators": a.generators.split(","),
           "model": a.model or "smollm2-135m-instruct (packaged, float32, CPU)", "results": results}
    Path(a.json).write_text(json.dumps(rec, indent=1) + "\n")
    print(f"wrote {a.json}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
