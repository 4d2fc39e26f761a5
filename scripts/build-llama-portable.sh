#!/usr/bin/env bash
# Build (once) and print the path of a portable llama-cpp-python wheel.
#
# llama-cpp-python compiles llama.cpp from source with -march=native by default: a wheel
# built on a CPU with AVX-512/AMX dies with SIGILL ("Illegal instruction") on a CPU, or
# a virtual machine, that lacks or refuses them. pip's wheel cache keys wheels by
# version, not by compiler flags, so a cached native wheel would be reused silently.
# This script builds with a fixed x86-64-v3 baseline (AVX, AVX2, FMA, F16C; no AVX-512,
# no AMX) into a folder named after the version and the flags, and checks the result
# with scripts/check_isa.py before printing it.
#
# Usage: scripts/build-llama-portable.sh PYTHON   -> prints the wheel's path
# Env:   LLAMA_CPP_VERSION (default below), THREADWISE_WHEEL_DIR (default ~/.cache/threadwise/wheels)
set -euo pipefail
PYTHON=${1:-python3}
VERSION=${LLAMA_CPP_VERSION:-0.3.36}
FLAGS="-DGGML_NATIVE=OFF -DGGML_AVX=ON -DGGML_AVX2=ON -DGGML_FMA=ON -DGGML_F16C=ON -DGGML_BMI2=ON -DGGML_AVX512=OFF -DGGML_AVX512_VBMI=OFF -DGGML_AVX512_VNNI=OFF -DGGML_AVX512_BF16=OFF -DGGML_AMX_TILE=OFF -DGGML_AMX_INT8=OFF -DGGML_AMX_BF16=OFF -DGGML_AVX_VNNI=OFF -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=OFF"
KEY=$(printf '%s %s' "$VERSION" "$FLAGS" | sha256sum | cut -c1-12)
DIR=${THREADWISE_WHEEL_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/threadwise/wheels}/llama-cpp-python-$VERSION-portable-$KEY
HERE=$(cd "$(dirname "$0")" && pwd)
if ! ls "$DIR"/llama_cpp_python-*.whl >/dev/null 2>&1; then
  echo "building llama-cpp-python $VERSION for any x86-64-v3 CPU (a few minutes, once)" >&2
  rm -rf "$DIR.tmp" && mkdir -p "$DIR.tmp"
  CMAKE_ARGS="$FLAGS" FORCE_CMAKE=1 "$PYTHON" -m pip wheel --no-deps --no-cache-dir \
    --no-binary llama-cpp-python "llama-cpp-python==$VERSION" -w "$DIR.tmp" >&2
  "$PYTHON" "$HERE/check_isa.py" "$DIR.tmp"/llama_cpp_python-*.whl >&2
  rm -rf "$DIR" && mv "$DIR.tmp" "$DIR"
fi
ls "$DIR"/llama_cpp_python-*.whl | head -1
