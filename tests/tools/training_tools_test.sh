#!/usr/bin/env bash
# Runs the training tools' unit tests with Debian's interpreter, which has python3-torch.
set -euo pipefail
cd "${TEST_SRCDIR}/${TEST_WORKSPACE}"
# The scripts keep their state under MULO_TRAIN_DIR / MULO_MODELS_DIR; never the repository's.
export MULO_TRAIN_DIR="${TEST_TMPDIR}/train" MULO_MODELS_DIR="${TEST_TMPDIR}/models"
exec /usr/bin/python3 tests/tools/training_tools_test.py
