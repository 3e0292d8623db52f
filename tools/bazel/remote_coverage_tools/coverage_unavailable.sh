#!/bin/sh
echo "bazel coverage is not available in this offline build" >&2
exit 1
