"""fuzz_target: one fuzz target, two builds.

In ordinary builds it is a small test that replays its seed corpus (tests/fuzz/corpus/<name>)
through LLVMFuzzerTestOneInput with replay_main.cc, so every committed input, crash
reproducers included, stays a regression test. With --config=fuzz (clang-14, libFuzzer and
AddressSanitizer; tools/fuzz.sh) the same target links libFuzzer's driver instead.
"""

load("//tools/bazel:cc.bzl", "cc_test")

def fuzz_target(name, srcs, deps, data = []):
    cc_test(
        name = name,
        size = "small",
        srcs = srcs + select({
            ":libfuzzer": [],
            "//conditions:default": ["replay_main.cc"],
        }),
        args = ["tests/fuzz/corpus/" + name],
        data = native.glob(["corpus/" + name + "/**"]) + data,
        linkopts = select({
            ":libfuzzer": ["-fsanitize=fuzzer"],
            "//conditions:default": [],
        }),
        deps = deps,
    )
