"""torch_pch: <torch/types.h> compiled once as a clang precompiled header (issue 62).

LibTorch's headers are most of every engine file's compile: clang spends 6.4 s of one core
parsing <torch/types.h> and about 1 s on the rest of a typical file; with this PCH the header
costs about 2 s. The PCH is built with the toolchain's own C++ compile command line (same
-O, -D, -f flags, so it matches every file of the configuration; torch_pch_fuzz adds the fuzz
build's sanitizers for the targets that build instruments) from standard input and with
absolute include paths, so that nothing in it names the sandbox it was built in: a PCH from
the disk cache works in any clone.

Consumers get it through tools/bazel/cc.bzl: the target depends on this rule (which brings
LibTorch and the .pch as inputs) and adds $(TORCH_PCH_COPTS) to its copts. With gcc, or with a
LibTorch outside /usr/include (MULO_LIBTORCH), TORCH_PCH_COPTS is empty and files include the
headers as usual: gcc's PCH of this header is 319 MB and takes 3.5 s to load, and the
dependency list of a PCH from another directory names headers Bazel cannot check.
"""

load("@bazel_tools//tools/build_defs/cc:action_names.bzl", "CPP_COMPILE_ACTION_NAME")
load("@bazel_tools//tools/cpp:toolchain_utils.bzl", "find_cpp_toolchain")
load("@libtorch//:pch.bzl", "TORCH_PCH_INCLUDES")

def _is_clang(cc_toolchain):
    return "clang" in cc_toolchain.compiler_executable.split("/")[-1]

def _torch_pch_impl(ctx, extra_flags = []):
    libtorch = ctx.attr.libtorch[CcInfo]
    cc_toolchain = find_cpp_toolchain(ctx)
    if not TORCH_PCH_INCLUDES or not _is_clang(cc_toolchain):
        return [libtorch, platform_common.TemplateVariableInfo({"TORCH_PCH_COPTS": ""})]

    features = cc_common.configure_features(
        ctx = ctx,
        cc_toolchain = cc_toolchain,
        requested_features = ctx.features,
        unsupported_features = ctx.disabled_features,
    )
    pch = ctx.actions.declare_file(ctx.label.name + ".pch")
    flags = ctx.fragments.cpp.copts + ctx.fragments.cpp.cxxopts + extra_flags
    flags += ["-isystem" + path for path in TORCH_PCH_INCLUDES]

    # -fno-pch-timestamp: the PCH does not record its inputs' times, so that one from the
    # disk cache is accepted on a machine whose headers were installed at another time.
    flags += ["-Xclang", "-fno-pch-timestamp", "-x", "c++-header"]
    variables = cc_common.create_compile_variables(
        cc_toolchain = cc_toolchain,
        feature_configuration = features,
        source_file = "-",
        output_file = pch.path,
        user_compile_flags = flags,
        preprocessor_defines = libtorch.compilation_context.defines,
        use_pic = True,
    )
    command = cc_common.get_memory_inefficient_command_line(
        feature_configuration = features,
        action_name = CPP_COMPILE_ACTION_NAME,
        variables = variables,
    )
    compiler = cc_common.get_tool_for_action(
        feature_configuration = features,
        action_name = CPP_COMPILE_ACTION_NAME,
    )
    env = cc_common.get_environment_variables(
        feature_configuration = features,
        action_name = CPP_COMPILE_ACTION_NAME,
        variables = variables,
    )
    ctx.actions.run_shell(
        # From standard input: a PCH names its main file by absolute path.
        command = "echo '#include <torch/types.h>' | \"$@\"",
        arguments = [compiler] + command,
        inputs = depset(transitive = [
            libtorch.compilation_context.headers,
            cc_toolchain.all_files,
        ]),
        outputs = [pch],
        env = env,
        mnemonic = "TorchPch",
        progress_message = "Precompiling <torch/types.h>",
    )
    pch_context = cc_common.create_compilation_context(headers = depset([pch]))
    copts = "-include-pch " + pch.path
    return [
        DefaultInfo(files = depset([pch])),
        cc_common.merge_cc_infos(cc_infos = [libtorch, CcInfo(compilation_context = pch_context)]),
        platform_common.TemplateVariableInfo({"TORCH_PCH_COPTS": copts}),
    ]

def _torch_pch_fuzz_impl(ctx):
    plain = ctx.attr.plain
    if not ctx.attr.sanitize:
        # Ordinary builds: exactly the plain PCH (same file, same copts), so a target that may
        # be fuzzed compiles with the same command line as every other.
        return [plain[DefaultInfo], plain[CcInfo], plain[platform_common.TemplateVariableInfo]]
    return _torch_pch_impl(ctx, ctx.attr.sanitize)

# The PCH of the targets tools/bazel/cc.bzl instruments in the fuzz build (--config=fuzz): built
# with their sanitizer flags there (clang refuses a PCH whose sanitizers differ from its
# translation unit's), the plain one otherwise.
torch_pch_fuzz = rule(
    implementation = _torch_pch_fuzz_impl,
    attrs = {
        "libtorch": attr.label(providers = [CcInfo]),
        "plain": attr.label(providers = [CcInfo]),
        "sanitize": attr.string_list(),
        "_cc_toolchain": attr.label(default = "@bazel_tools//tools/cpp:current_cc_toolchain"),
    },
    fragments = ["cpp"],
    toolchains = ["@bazel_tools//tools/cpp:toolchain_type"],
    incompatible_use_toolchain_transition = True,
)

torch_pch = rule(
    implementation = _torch_pch_impl,
    attrs = {
        "libtorch": attr.label(providers = [CcInfo]),
        "_cc_toolchain": attr.label(default = "@bazel_tools//tools/cpp:current_cc_toolchain"),
    },
    fragments = ["cpp"],
    toolchains = ["@bazel_tools//tools/cpp:toolchain_type"],
    incompatible_use_toolchain_transition = True,
)
