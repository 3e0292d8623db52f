"""cc_library, cc_test and cc_binary with LibTorch's precompiled header (tools/bazel/torch_pch.bzl).

Every BUILD file of the repository loads these instead of the native rules. A target that uses
LibTorch gets //tools/bazel:torch_types (LibTorch plus the .pch as inputs) and
$(TORCH_PCH_COPTS) in its copts. Whether a target uses LibTorch is read from its direct deps
(`_uses_torch`), or set with torch_pch = True / False. A wrong guess costs only time: a target
without the PCH parses the headers itself, and one with it that needs no LibTorch spends ~2 s
loading it (it links nothing more: unused declarations emit no code).
"""

_PCH = "//tools/bazel:torch_types"

_FUZZ_PCH = "//tools/bazel:torch_types_fuzz"

# What the fuzz build (--config=fuzz, tools/fuzz.sh) instruments with AddressSanitizer and
# libFuzzer's coverage: the code the fuzzers feed. Everything else compiles with the ordinary
# build's command line and inputs, so that the fuzz build, in its own output base, takes those
# objects from the shared disk cache.
#
# The edge: packages nothing in the engine depends on. Their targets use a PCH built with the
# sanitizers (torch_types_fuzz; clang refuses a PCH whose sanitizers differ from the file's).
_FUZZED_PACKAGES = [
    "engine/api",
    "server",
    "synth",
    "tests/fuzz",
    "tests/server",
]

# Engine targets the fuzzers feed (option, config and safetensors parsers). They parse
# LibTorch's headers themselves in the fuzz build: a target's CcInfo carries its PCH to every
# target above it, so an instrumented PCH here would change the inputs of most of the engine
# and none of its objects would match the ordinary build's.
_FUZZED_TARGETS = [
    "engine/decode:method_registry",
    "engine/decode:option_spec",
    "engine/decode:option_text",
    "engine/model:safetensors",
    "engine/model:transformer_config",
    "engine/model:vq_config",
]
FUZZ_COPTS = [
    "-fsanitize=fuzzer-no-link",
    "-fsanitize=address",
    "-fno-omit-frame-pointer",
]
_FUZZED_COPTS = select({
    "//tools/bazel:libfuzzer": FUZZ_COPTS,
    "//conditions:default": [],
})
_NO_PCH_WHEN_FUZZED = select({
    "//tools/bazel:libfuzzer": [],
    "//conditions:default": ["$(TORCH_PCH_COPTS)"],
})

# Packages whose libraries (nearly) all include LibTorch's headers, directly or through an engine
# header: a dependency on one of them, or on a sibling target inside one of them, means the
# target's sources include LibTorch. server/ is here because most of its files reach an engine
# header; its few that do not pay the ~2 s load.
_TORCH_PACKAGES = [
    "engine",
    "bench",
    "server",
    "tests/client",
    "tests/deploy",
    "tests/engine",
    "tests/gpu",
    "tests/models",
    "tests/server",
]

def _in_torch_package(package):
    return any([(package + "/").startswith(p + "/") for p in _TORCH_PACKAGES])

def _uses_torch(deps):
    if type(deps) != "list":
        return False
    package = native.package_name()
    for dep in deps:
        if dep.startswith("@libtorch"):
            return True
        if dep.startswith("//"):
            if _in_torch_package(dep[2:].split(":")[0]):
                return True
        elif _in_torch_package(package):
            return True
    return False

def _with_pch(name, kwargs, torch_pch):
    package = native.package_name()
    edge = any([(package + "/").startswith(p + "/") for p in _FUZZED_PACKAGES])
    fuzzed_engine = (package + ":" + name) in _FUZZED_TARGETS
    deps = kwargs.get("deps", [])
    copts = kwargs.get("copts", [])
    if torch_pch == None:
        torch_pch = _uses_torch(deps)
    if torch_pch:
        pch = _FUZZ_PCH if edge else _PCH
        kwargs["deps"] = deps + [pch]
        copts = copts + (_NO_PCH_WHEN_FUZZED if fuzzed_engine else ["$(TORCH_PCH_COPTS)"])
        kwargs["toolchains"] = kwargs.get("toolchains", []) + [pch]
    if edge or fuzzed_engine:
        copts = copts + _FUZZED_COPTS
    kwargs["copts"] = copts
    return kwargs

def cc_library(name, torch_pch = None, **kwargs):
    native.cc_library(name = name, **_with_pch(name, kwargs, torch_pch))

def cc_test(name, torch_pch = None, **kwargs):
    native.cc_test(name = name, **_with_pch(name, kwargs, torch_pch))

def cc_binary(name, torch_pch = None, **kwargs):
    native.cc_binary(name = name, **_with_pch(name, kwargs, torch_pch))
