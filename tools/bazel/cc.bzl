"""cc_library, cc_test and cc_binary with LibTorch's precompiled header (tools/bazel/torch_pch.bzl).

Every BUILD file of the repository loads these instead of the native rules. A target that uses
LibTorch gets //tools/bazel:torch_types (LibTorch plus the .pch as inputs) and
$(TORCH_PCH_COPTS) in its copts. Whether a target uses LibTorch is read from its direct deps
(`_uses_torch`), or set with torch_pch = True / False. A wrong guess costs only time: a target
without the PCH parses the headers itself, and one with it that needs no LibTorch spends ~2 s
loading it (it links nothing more: unused declarations emit no code).
"""

_PCH = "//tools/bazel:torch_types"

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

def _with_pch(kwargs, torch_pch):
    deps = kwargs.get("deps", [])
    if torch_pch == None:
        torch_pch = _uses_torch(deps)
    if torch_pch:
        kwargs["deps"] = deps + [_PCH]
        kwargs["copts"] = kwargs.get("copts", []) + ["$(TORCH_PCH_COPTS)"]
        kwargs["toolchains"] = kwargs.get("toolchains", []) + [_PCH]
    return kwargs

def cc_library(name, torch_pch = None, **kwargs):
    native.cc_library(name = name, **_with_pch(kwargs, torch_pch))

def cc_test(name, torch_pch = None, **kwargs):
    native.cc_test(name = name, **_with_pch(kwargs, torch_pch))

def cc_binary(name, torch_pch = None, **kwargs):
    native.cc_binary(name = name, **_with_pch(kwargs, torch_pch))
