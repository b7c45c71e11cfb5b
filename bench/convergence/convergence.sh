#!/usr/bin/env bash
# Convergence evidence (make bench-convergence): every compression setting,
# with momentum and with plain SGD, over several seeds, through
# `gradwire local`; tables, JSON and plots. The benchmark is
# bench/convergence/convergence.py (see its --help); this wrapper runs it
# with Debian's Python (matplotlib from python3-matplotlib), or
# $GRADWIRE_PYTHON.
set -euo pipefail
exec "${GRADWIRE_PYTHON:-/usr/bin/python3}" "$(dirname "$0")/convergence.py" \
  "$@"
