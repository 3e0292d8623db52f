"""C++ code for a .proto file, generated with the system protoc and grpc_cpp_plugin.

Bazel 4's proto rules would need protobuf's own Bazel repository, which cannot be fetched
offline; Debian ships protoc and the gRPC plugin, so a genrule does the same job.
"""

def cc_grpc_proto(name, src, deps = []):
    """Generates <src>.pb.{h,cc} and <src>.grpc.pb.{h,cc}; `name` is the cc_library."""
    base = src[:-len(".proto")]
    outs = [base + ext for ext in [".pb.cc", ".pb.h", ".grpc.pb.cc", ".grpc.pb.h"]]
    native.genrule(
        name = name + "_gen",
        srcs = [src],
        outs = outs,
        cmd = "/usr/bin/protoc --proto_path=$$(dirname $(location %s) | sed 's|/%s$$||')" %
              (src, base.rsplit("/", 1)[0]) +
              " --cpp_out=$(RULEDIR) --grpc_out=$(RULEDIR)" +
              " --plugin=protoc-gen-grpc=/usr/bin/grpc_cpp_plugin $(location %s)" % src,
    )
    native.cc_library(
        name = name,
        srcs = [o for o in outs if o.endswith(".cc")],
        hdrs = [o for o in outs if o.endswith(".h")],
        includes = ["."],
        deps = deps + [
            "@system_libs//:grpc++",
            "@system_libs//:protobuf",
        ],
    )
