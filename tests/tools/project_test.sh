#!/usr/bin/env bash
# tools/gpu/project.py's arithmetic on a hand-priced trace (plain Python 3).
set -euo pipefail
cd "${TEST_SRCDIR}/${TEST_WORKSPACE}"
exec /usr/bin/python3 tests/tools/project_test.py
