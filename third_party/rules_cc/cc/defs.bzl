"""Offline shim for rules_cc: re-exports Bazel's native C++ rules unchanged.

Bazel 4.2.3's embedded tools load @rules_cc//cc:defs.bzl; on a machine with no network we
cannot fetch the real repository, and for Bazel 4 the real one only wraps these rules too.
"""

def cc_binary(**attrs):
    native.cc_binary(**attrs)

def cc_library(**attrs):
    native.cc_library(**attrs)

def cc_test(**attrs):
    native.cc_test(**attrs)

def cc_import(**attrs):
    native.cc_import(**attrs)

def cc_proto_library(**attrs):
    native.cc_proto_library(**attrs)

def cc_toolchain(**attrs):
    native.cc_toolchain(**attrs)

def cc_toolchain_suite(**attrs):
    native.cc_toolchain_suite(**attrs)

def objc_library(**attrs):
    native.objc_library(**attrs)
