"""``judge batch``: classify parquet / CSV / JSONL files on a Ray cluster and write parquet.

Every input is checked first (files exist and have a known suffix, the output
folder is new or empty, the labels or the saved classifier are usable), then
Ray is started (a local cluster unless ``--address``) and
`judge.distributed.classify_files` does the work.

What it deliberately does not do: any Ray work itself (`judge.distributed`
does), or overwrite an output folder.
"""

from __future__ import annotations

import argparse
import os
from pathlib import Path

from judge.cli._common import exit_on_input_error

__all__ = ["add_parser", "run"]


def add_parser(subparsers) -> argparse.ArgumentParser:
    """Add ``judge batch`` to the ``judge`` command's subparsers (sets ``func=run``).

    ``judge batch INPUT... (--labels FILE|a,b,c | --classifier DIR) [--model M]
    [--text-column text] [--actors N] [--batch-size B] [--top-k K] [--abstain]
    --output DIR``

    Parameters
    ----------
    subparsers : argparse._SubParsersAction
        From ``parser.add_subparsers()``.

    Returns
    -------
    argparse.ArgumentParser
        The ``batch`` parser.

    Examples
    --------
    >>> p = argparse.ArgumentParser(prog="judge")
    >>> _ = add_parser(p.add_subparsers(dest="command"))
    >>> a = p.parse_args(["batch", "in.csv", "--labels", "a,b", "--output", "out"])
    >>> a.inputs, a.labels, a.actors
    (['in.csv'], 'a,b', 1)
    """
    b = subparsers.add_parser("batch", help="classify parquet/CSV/JSONL files on a Ray cluster; writes parquet",
                              description="Classify parquet, CSV or JSONL files (or folders of them) with a pool "
                                          "of Ray actors and write parquet: the input columns plus label, "
                                          "confidence, abstained and probabilities.")
    b.add_argument("inputs", nargs="+", metavar="INPUT", help="parquet, .csv or .jsonl files, or folders of them")
    src = b.add_mutually_exclusive_group(required=True)
    src.add_argument("--labels", help="file (one label per line, or a JSON list) or comma-separated labels")
    src.add_argument("--classifier", help="directory of a saved (calibrated) classifier")
    b.add_argument("--model", default=None, help="hub id, folder, or smollm2-135m-instruct (default)")
    b.add_argument("--text-column", default="text", help="column holding the texts (default text)")
    b.add_argument("--actors", type=int, default=1, help="Ray actors, each holding one model")
    b.add_argument("--batch-size", type=int, default=16, help="texts per forward pass (default 16)")
    b.add_argument("--num-cpus-per-actor", type=float, default=1, help="CPUs reserved per actor (default 1)")
    b.add_argument("--num-gpus-per-actor", type=float, default=0, help="GPUs reserved per actor (default 0)")
    b.add_argument("--top-k", type=int, default=None, help="write the k most probable labels instead of all K")
    b.add_argument("--abstain", action="store_true", help="null label below the calibrated threshold (--classifier)")
    b.add_argument("--batch-invariant", action="store_true", help="bit-identical scores whatever the batches")
    b.add_argument("--backend", choices=("transformers", "vllm"), default="transformers",
                   help="who scores in each actor: the transformers engine (default) or one vLLM engine per actor "
                        "(its own environment: scripts/setup_vllm.sh; give GPUs with --num-gpus-per-actor)")
    b.add_argument("--address", default=None, help="Ray cluster address (default: a local cluster)")
    b.add_argument("--output", "-o", required=True, help="output folder for the parquet files (new or empty)")
    b.set_defaults(func=run)
    return b


def _init_ray(args) -> None:
    """Connect to ``--address``, or start a local cluster with a CPU for every actor plus one for the files."""
    import math

    try:
        import ray
    except ImportError:
        raise ImportError("judge batch needs Ray Data: pip install 'trie-judge[ray]' "
                          "(or pip install 'ray[data,serve]').") from None
    if ray.is_initialized():
        return
    local = None
    if args.address is None:  # a local cluster: the actors' CPUs plus one for reading and writing files
        need = args.actors * args.num_cpus_per_actor + 1
        local = max(os.cpu_count() or 1, math.ceil(need))
    ray.init(address=args.address, num_cpus=local, include_dashboard=False, log_to_driver=False)


def run(args) -> int:
    """Run ``judge batch`` (see `add_parser`); every input is checked before Ray starts.

    Examples
    --------
    Not run as a doctest (+SKIP): it starts a Ray cluster (tests/distributed/test_data.py runs it).

    >>> from judge.cli import main
    >>> main(["batch", "in.parquet", "--labels", "a,b", "--output", "out/"])  # doctest: +SKIP
    0

    Returns
    -------
    int
        0 on success (errors exit with a message naming the input and the fix).
    """
    from judge.io import expand_inputs, read_labels

    try:
        groups = expand_inputs(args.inputs)
    except (FileNotFoundError, ValueError) as e:
        raise SystemExit(f"judge batch: {e}") from None
    out = Path(args.output).expanduser()
    if out.exists() and (not out.is_dir() or any(out.iterdir())):
        raise SystemExit(f"judge batch: --output {args.output!r} exists and is not an empty folder; pass a new "
                         f"or empty folder (nothing is overwritten).")
    labels = None
    if args.labels is not None:
        with exit_on_input_error():
            labels = read_labels(args.labels)
    elif not (Path(args.classifier) / "classifier.json").is_file():
        raise SystemExit(f"judge batch: --classifier {args.classifier!r} has no classifier.json; pass the folder "
                         f"written by Classifier.save() (e.g. OUT/classifier of judge evaluate).")
    if args.abstain and args.classifier is None:
        raise SystemExit("judge batch: --abstain needs a calibrated --classifier DIR (its threshold); "
                         "drop --abstain or pass --classifier.")
    from judge.distributed import classify_files

    _init_ray(args)
    files = [f for fs in groups.values() for f in fs]
    try:
        classify_files(files, out, labels=labels, model=args.model, classifier_dir=args.classifier,
                       text_column=args.text_column, batch_size=args.batch_size, actors=args.actors,
                       num_cpus_per_actor=args.num_cpus_per_actor, num_gpus_per_actor=args.num_gpus_per_actor,
                       top_k=args.top_k, abstain=args.abstain, batch_invariant=args.batch_invariant,
                       backend=args.backend)
    except (ValueError, TypeError) as e:
        raise SystemExit(f"judge batch: {e}") from None
    n = sum(1 for _ in out.glob("*.parquet"))
    print(f"judge batch: wrote {n} parquet file(s) to {str(out)!r}")
    return 0
