"""Collection rules for the doctests in ``judge/`` (``--doctest-modules``; the tests' own fixtures
are in tests/conftest.py).

An example that needs an environment this one lacks is collected and skipped, with the
reason and where it runs, rather than marking every line ``+SKIP``: the vLLM backend's examples
run in the vLLM environment (CI's second job, ``.ci/run``).
"""

from __future__ import annotations

import importlib.util
import os
import sys

import pytest

if importlib.util.find_spec("vllm") is not None:  # the vLLM environment: its suite and these doctests
    os.environ.setdefault("VLLM_CPU_KVCACHE_SPACE", "2")  # GiB of KV cache on CPU (vLLM's default wants most of RAM)
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    os.environ.setdefault("VLLM_LOGGING_LEVEL", "ERROR")  # its INFO and WARNING lines would be a doctest's output
    # lets a test read the logits processor's compile counts in vLLM's worker (collective_rpc of a function)
    os.environ.setdefault("VLLM_ALLOW_INSECURE_SERIALIZATION", "1")
    # numba's on-disk cache beside the sources is shared with the main environment's (another numba
    # version): keep this environment's apart, or each suite recompiles the automaton's kernels
    os.environ.setdefault("NUMBA_CACHE_DIR", os.path.join(sys.prefix, "numba-cache"))

_VLLM = ("vllm", "the vLLM environment: scripts/setup_vllm.sh, CI's second job")
#: doctest (its object's qualified name) -> (the import it needs, where its examples run)
NEEDS = {"judge.backends.vllm.VLLMScorer": _VLLM,
         "judge.backends.vllm.VLLMScorer.sampling_params": _VLLM,
         "judge.backends.vllm.logits_processor_class": _VLLM}


#: doctests that start a local Ray cluster and actors (1-2 minutes each on a loaded 2-core machine):
#: run with ``-m slow``; tests/distributed/test_data.py covers the same calls in the default run
SLOW = {"judge.distributed.data.classify_dataset", "judge.distributed.data.classify_files",
        "judge.distributed.data.decide_dataset", "judge.distributed.data.read_inputs"}


def pytest_collection_modifyitems(config, items):
    for item in items:
        if type(item).__name__ != "DoctestItem":
            continue
        if item.name in SLOW:
            item.add_marker(pytest.mark.slow)
        needs, where = NEEDS.get(item.name, (None, None))
        if needs is not None and importlib.util.find_spec(needs) is None:
            item.add_marker(pytest.mark.skip(reason=f"{item.name} needs {needs}: its examples run in {where}"))
