#!/usr/bin/env bash
# The converter's unit tests with Debian's interpreter, which has python3-torch.
set -euo pipefail
cd "${TEST_SRCDIR}/${TEST_WORKSPACE}"
exec /usr/bin/python3 tests/tools/convert_test.py
