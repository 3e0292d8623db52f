"""Repository rule exposing Debian's system libraries as cc_library targets.

Headers of these packages live under /usr/include, a builtin include directory of the
compiler, so each target only carries link flags. Flags come from pkg-config where the
package ships a .pc file ("pkg:<module>") or are given literally ("-l<lib>"); every library
is checked up front so a missing package fails the build with the command that installs it.
"""

def _libdirs(ctx):
    dirs = ["/usr/lib", "/lib"]
    result = ctx.execute(["gcc", "-print-multiarch"])
    if result.return_code == 0 and result.stdout.strip():
        arch = result.stdout.strip()
        dirs = ["/usr/lib/" + arch, "/lib/" + arch] + dirs
    return dirs

def _find_lib(ctx, dirs, name):
    for d in dirs:
        for ext in [".so", ".a"]:
            if ctx.path("%s/lib%s%s" % (d, name, ext)).exists:
                return True
    return False

def _system_libraries_impl(ctx):
    pkg_config = ctx.which("pkg-config")
    dirs = _libdirs(ctx)
    lines = ['package(default_visibility = ["//visibility:public"])', ""]
    for name, items in ctx.attr.libraries.items():
        flags = []
        for item in items:
            if item.startswith("pkg:"):
                module = item[4:]
                if not pkg_config:
                    fail("pkg-config not found: run tools/setup.sh")
                result = ctx.execute([pkg_config, "--libs", module])
                if result.return_code != 0:
                    fail("system library '%s': pkg-config cannot find %s; run tools/setup.sh\n%s" %
                         (name, module, result.stderr))
                flags += [f for f in result.stdout.strip().split(" ") if f]
            elif item.startswith("-l"):
                if not _find_lib(ctx, dirs, item[2:]):
                    fail("system library '%s': lib%s not found in %s; run tools/setup.sh" %
                         (name, item[2:], dirs))
                flags.append(item)
            else:
                flags.append(item)
        lines.append("cc_library(name = %s, linkopts = %s)" % (repr(name), repr(flags)))
    ctx.file("BUILD", "\n".join(lines) + "\n")

system_libraries = repository_rule(
    implementation = _system_libraries_impl,
    attrs = {"libraries": attr.string_list_dict(mandatory = True)},
    local = True,
)
