#!/usr/bin/env bash
# The CUDA kernels' check on a machine with an NVIDIA GPU.
#
# Configures a build with the kernels required (GRADWIRE_CUDA=ON) and without
# the libtorch worker, builds the kernel test and runs it. It fails when the
# build or a test fails, and also when the test skipped its device cases (no
# usable device), so a pass means the device results were compared with the
# CPU compressors.
#
#   scripts/device-check.sh              build in build-device/
#   BUILD=dir JOBS=n CUDA_ARCHS=90 scripts/device-check.sh
set -euo pipefail
cd "$(dirname "$0")/.."

BUILD=${BUILD:-build-device}
JOBS=${JOBS:-$(nproc)}

echo "== device"
if command -v nvidia-smi >/dev/null; then
  nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv
else
  echo "nvidia-smi not found"
fi
nvcc --version | tail -n 2 || echo "nvcc not on PATH (CMake looks in /usr/local/cuda)"

echo "== configure ($BUILD)"
cmake -S . -B "$BUILD" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo \
  -DGRADWIRE_CUDA=ON -DGRADWIRE_BUILD_WORKER=OFF \
  -DGRADWIRE_BUILD_BENCHMARKS=OFF -DGRADWIRE_BUILD_TESTS=ON \
  ${CUDA_ARCHS:+-DCMAKE_CUDA_ARCHITECTURES=$CUDA_ARCHS} | tail -n 5

echo "== build"
start=$(date +%s)
cmake --build "$BUILD" -j "$JOBS" --target common_cuda_device_compressor_test
echo "built in $(($(date +%s) - start)) s"

echo "== test"
log="$BUILD/device_compressor_test.log"
status=0
"$BUILD/tests/common_cuda_device_compressor_test" --gtest_brief=1 2>&1 | tee "$log" ||
  status=$?
grep -E '^\[  (PASSED|FAILED|SKIPPED) *\]|ran\.' "$log" || true
if [[ $status -ne 0 ]]; then
  echo "device check FAILED (exit $status)"
  exit "$status"
fi
if grep -q 'no CUDA device' "$log"; then
  echo "device check FAILED: the device cases skipped (no usable CUDA device)"
  exit 1
fi
echo "device check passed"
