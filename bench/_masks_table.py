"""The tables bench/masks.py prints from its records: one line per (engine, family, K), then peer / ours ratios.

`fmt` formats a figure that may be missing (``None``: a dash of the same width); `print_table`
prints every record (``mem_src`` shortened by `SHORT_SOURCE`), `print_ratios` each peer's compile
and fill time over ours at the same family and K (a timeout gives a lower bound).

What it deliberately does not do: measure anything (bench/masks.py's workers do) or read a
results file (bench/report.py does).
"""

from __future__ import annotations

__all__ = ["SHORT_SOURCE", "fmt", "print_ratios", "print_table"]


def fmt(x, spec):
    if x is None:
        width = "".join(c for c in spec.split(".")[0] if c.isdigit())
        return "-".rjust(int(width or 0))
    return format(x, spec)


SHORT_SOURCE = {"TrieAutomaton.memory_bytes": "arrays", "CompiledGrammar.memory_size_bytes": "xgr",
                "rss_delta (psutil; max over repeats)": "rss"}


def print_table(records):
    head = (f"{'engine':<14}{'family':<7}{'K':>7}{'len':>6}{'setup_ms':>10}{'compile_ms':>12}"
            f"{'1st_mask_ms':>12}{'fill_us':>9}{'mem_MB':>10} {'mem_src':<8}{'agree':>6}{'rej':>5}  status")
    print(head)
    print("-" * len(head))
    for r in records:
        src = SHORT_SOURCE.get(r.get("memory_source"), "-")
        print(f"{r['engine']:<14}{r['family']:<7}{r['K']:>7}{fmt(r.get('mean_label_len'), '6.1f')}"
              f"{fmt(r.get('setup_ms'), '10.0f')}{fmt(r['compile_ms'], '12.2f')}"
              f"{fmt(r.get('first_mask_ms'), '12.3f')}{fmt(r['fill_us'], '9.2f')}"
              f"{fmt(r['memory_mb'], '10.3f')} {src:<8}{fmt(r.get('mask_agree'), '6.2f')}"
              f"{fmt(r.get('rejected_walks'), '5d')}  {r['status']}")


def print_ratios(records):
    ours = {(r["family"], r["K"]): r for r in records if r["engine"] == "ours" and r["status"] == "ok"}
    print("\nratios peer / ours (compile_ms, fill_us); '>' = lower bound from a timeout")
    print(f"{'engine':<14}{'family':<7}{'K':>7}{'compile':>12}{'fill':>10}")
    for r in records:
        o = ours.get((r["family"], r["K"]))
        if r["engine"] == "ours" or o is None:
            continue
        if r["status"] == "ok":
            c = f"{r['compile_ms'] / o['compile_ms']:.1f}x"
            f = f"{r['fill_us'] / o['fill_us']:.1f}x"
        elif r["status"] == "timeout":
            c, f = f">{r['timeout_s'] * 1e3 / o['compile_ms']:.0f}x", "-"
        else:
            c, f = "-", "-"
        print(f"{r['engine']:<14}{r['family']:<7}{r['K']:>7}{c:>12}{f:>10}")
