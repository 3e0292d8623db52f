#!/usr/bin/env bash
# tools/test_summary.py's tests with Debian's interpreter.
set -euo pipefail
cd "${TEST_SRCDIR}/${TEST_WORKSPACE}"
exec /usr/bin/python3 tests/tools/test_summary_test.py
