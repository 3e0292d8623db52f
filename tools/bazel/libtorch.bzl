"""Repository rule that locates LibTorch.

Default: Debian's libtorch-dev (headers under /usr/include, libraries in the multiarch dir).
Override: MULO_LIBTORCH=<dir> with <dir>/include and <dir>/lib, as laid out by the LibTorch
zip or by torch/ inside a PyTorch wheel. CUDA libraries found there are linked too, with
--no-as-needed so their kernels register even though nothing references them by symbol.
"""

_LIBS = ["torch", "torch_cpu", "c10"]
_CUDA_LIBS = ["torch_cuda", "c10_cuda"]

def _multiarch_libdir(ctx):
    result = ctx.execute(["gcc", "-print-multiarch"])
    arch = result.stdout.strip() if result.return_code == 0 else ""
    if arch:
        return "/usr/lib/" + arch
    return "/usr/lib"

def _libtorch_repository_impl(ctx):
    root = ctx.os.environ.get("MULO_LIBTORCH", "").strip()
    if root:
        include_dir = root + "/include"
        lib_dir = root + "/lib"
        if not ctx.path(include_dir + "/torch").exists:
            fail("MULO_LIBTORCH=%s has no include/torch: point it at a LibTorch directory" % root)
        ctx.symlink(include_dir, "include")

        # No precompiled header here: its dependency list would name headers outside the
        # compiler's builtin directories, which Bazel refuses (see tools/bazel/torch_pch.bzl).
        pch_includes = []
        hdrs = 'glob(["include/**/*.h", "include/**/*.hpp", "include/**/*.cuh"])'
        includes = '["include", "include/torch/csrc/api/include"]'
    else:
        lib_dir = _multiarch_libdir(ctx)
        api = "/usr/include/torch/csrc/api/include"
        if not ctx.path(api).exists:
            fail("LibTorch headers not found at %s: run tools/setup.sh (installs libtorch-dev)" % api)

        # /usr/include is a builtin include directory of the compiler, so only the C++ API
        # directory needs to be declared and put on the include path.
        ctx.symlink(api, "api")
        pch_includes = [api]
        hdrs = 'glob(["api/**/*.h"])'
        includes = '["api"]'

    for lib in _LIBS:
        if not ctx.path("%s/lib%s.so" % (lib_dir, lib)).exists:
            fail("lib%s.so not found in %s" % (lib, lib_dir))
    cuda = [lib for lib in _CUDA_LIBS if ctx.path("%s/lib%s.so" % (lib_dir, lib)).exists]

    linkopts = ["-L" + lib_dir, "-Wl,-rpath," + lib_dir]
    if cuda:
        linkopts += ["-Wl,--no-as-needed"] + ["-l" + lib for lib in cuda] + ["-Wl,--as-needed"]
    linkopts += ["-l" + lib for lib in _LIBS] + ["-lpthread"]
    defines = ["MULO_WITH_CUDA=1"] if cuda else []

    # Absolute include directories for tools/bazel/torch_pch.bzl ([] turns the PCH off).
    ctx.file("pch.bzl", "TORCH_PCH_INCLUDES = %s\n" % repr(pch_includes))
    ctx.file("BUILD", """
package(default_visibility = ["//visibility:public"])

cc_library(
    name = "libtorch",
    hdrs = {hdrs},
    includes = {includes},
    defines = {defines},
    linkopts = {linkopts},
)
""".format(hdrs = hdrs, includes = includes, defines = repr(defines), linkopts = repr(linkopts)))

libtorch_repository = repository_rule(
    implementation = _libtorch_repository_impl,
    environ = ["MULO_LIBTORCH"],
    local = True,
)
