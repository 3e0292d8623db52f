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

# What the fuzz build (--config=fuzz) instruments with AddressSanitizer and libFuzzer's
# coverage: the code the fuzzers feed (parsers, the server's edge, request options), whole
# targets (a target shares one PCH, and its sanitizer flags must be the PCH's). The rest of the
# engine compiles as in the ordinary build, so its objects come from the disk cache.
_FUZZED_PACKAGES = [
    "engine/api",
    "engine/decode/specs",
    "server",
    "synth",
    "tests/fuzz",
    "tests/server",
]
_FUZZED_TARGETS = [
    "engine/decode:method_registry",
    "engine/decode:option_spec",
    "engine/decode:option_text",
    "engine/model:safetensors",
    "engine/model:transformer_config",
    "engine/model:vq_config",
]
_FUZZ_COPTS = select({
    "//tools/bazel:libfuzzer": ["-fsanitize=fuzzer-no-link", "-fsanitize=address"],
    "//conditions:default": [],
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

def _fuzzed(name):
    package = native.package_name()
    return (any([(package + "/").startswith(p + "/") for p in _FUZZED_PACKAGES]) or
            (package + ":" + name) in _FUZZED_TARGETS)

def _with_pch(name, kwargs, torch_pch):
    deps = kwargs.get("deps", [])
    if torch_pch == None:
        torch_pch = _uses_torch(deps)
    fuzzed = _fuzzed(name)
    pch = _FUZZ_PCH if fuzzed else _PCH
    copts = kwargs.get("copts", [])
    if torch_pch:
        kwargs["deps"] = deps + [pch]
        copts = copts + ["$(TORCH_PCH_COPTS)"]
        kwargs["toolchains"] = kwargs.get("toolchains", []) + [pch]
    if fuzzed:
        copts = copts + _FUZZ_COPTS
    kwargs["copts"] = copts
    return kwargs

def cc_library(name, torch_pch = None, **kwargs):
    native.cc_library(name = name, **_with_pch(name, kwargs, torch_pch))

def cc_test(name, torch_pch = None, **kwargs):
    native.cc_test(name = name, **_with_pch(name, kwargs, torch_pch))

def cc_binary(name, torch_pch = None, **kwargs):
    native.cc_binary(name = name, **_with_pch(name, kwargs, torch_pch))
