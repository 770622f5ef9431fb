#!/usr/bin/env bash
# Installs NVIDIA's PTX assembler for the test suite into `.tools/cuda`
# (git-ignored), without touching the system. The PyPI package
# `nvidia-cuda-nvcc` carries `nvidia/cu13/bin/ptxas`. The version is pinned to
# CUDA 13.0, the driver of the GPU machine, whose newest PTX ISA is 9.0.
# Tests find it at `.tools/cuda/nvidia/cu13/bin/ptxas` (or through
# `TILEFUSE_PTXAS`, or on `PATH`).
set -euo pipefail
cd "$(dirname "$0")/.."
VERSION="${NVCC_VERSION:-13.0.88}"
PTXAS=".tools/cuda/nvidia/cu13/bin/ptxas"
if [ ! -x "$PTXAS" ]; then
    python3 -m pip install --quiet --no-deps --target .tools/cuda "nvidia-cuda-nvcc==${VERSION}"
fi
chmod +x "$PTXAS"
"$PTXAS" --version | tail -n 1 >&2
echo "$(pwd)/$PTXAS"
