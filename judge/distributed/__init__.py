"""Ray integration: classify a Ray Dataset on a pool of actors, and serve the decisions API on Ray Serve.

An integration at the edge (the ``[ray]`` extra: ``ray[data,serve]``): it
imports `judge.classifier`, `judge.decisions` and `judge.server`, and nothing
in the engine imports it. Ray is imported inside the functions that use it,
so ``import judge.distributed`` is light.

- `classify_dataset`: ``Dataset.map_batches`` with a callable class; each actor
  builds (or loads) its `judge.Classifier` once, in ``__init__``, and scores
  the batches Ray gives it. Output rows keep every input column and add
  ``label``, ``confidence``, ``abstained``, ``abstain_reason`` and ``probabilities``.
- `classify_files` / `read_inputs`: the same over parquet / CSV / JSONL files
  or folders (found by `judge.io.expand_inputs`), written as parquet.
- `decide_dataset`: typed questions (`judge.decisions`) about a state column.
- `serve_app` / `build_app` / `app_builder`: the FastAPI app of
  `judge.server.create_app` as a Ray Serve deployment with N replicas, each
  loading the model once (``serve run judge.distributed:app_builder``).

Output columns (they round-trip through parquet unchanged):

===================== ================= ==================================================================
column                arrow type        meaning
===================== ================= ==================================================================
``label``             string (nullable) the most probable label; null when abstained
``confidence``        float64           the top probability
``abstained``         bool              below the calibrated ``threshold_``
``abstain_reason``    string (nullable) why (confidence, threshold, what it certifies); null when answered
``probabilities``     list<float64>     length K, in ``classes_`` order (no top_k)
``top_labels``        list<string>      with ``top_k``: the k most probable labels
``top_probabilities`` list<float64>     with ``top_k``: their probabilities
===================== ================= ==================================================================

Rows are scored exactly as `judge.Classifier.predict_proba` scores them in one
process: with ``batch_invariant=True`` bit for bit, otherwise up to float
rounding of the batch composition (about 1e-6).

What it deliberately does not do: parse command lines (``judge batch`` is
`judge.cli.batch`), start or configure a Ray cluster (``ray.init`` is the
caller's, or Ray's default local cluster), pass loaded model objects to actors
(give a hub id, a folder or None), or retry work itself (Ray restarts a dead
actor and resubmits its batch; ``max_retries`` bounds that).
"""

from judge.distributed.data import (
    OUTPUT_COLUMNS,
    classify_dataset,
    classify_files,
    decide_dataset,
    read_inputs,
)
from judge.distributed.serve import app_builder, build_app, serve_app

__all__ = [
    "classify_dataset",
    "classify_files",
    "read_inputs",
    "decide_dataset",
    "serve_app",
    "build_app",
    "app_builder",
    "OUTPUT_COLUMNS",
]
