"""A conversion's output appears whole or not at all.

Everything is written into a temporary sibling of the output directory
(`.<name>.converting-XXXX`, on the same file system) and moved into place only once every
check has passed: a new directory by one rename; an existing one (a family being updated, a
component converted again) entry by entry, each directory swapped by renames and family.json
last, so a server reading it meanwhile sees the old family or the new one. A failed or
interrupted conversion removes the temporary directory and leaves the output as it was: no
partial folder (which the server would skip), and an existing family not destroyed.

  with staging.staged(out) as tmp:
      ... write into tmp ...
"""
import contextlib
import os
import shutil
import tempfile

import upstream

_SHOWN = {}  # staging directory -> the output directory it becomes


def shown(path):
    """`path` as it will be once moved into place (for messages)."""
    for tmp, out in _SHOWN.items():
        if path == tmp or path.startswith(tmp + os.sep):
            return out + path[len(tmp):]
    return path


def _commit(tmp, out):
    if not os.path.lexists(out):
        os.rename(tmp, out)
        return
    # family.json last: it names the components, which are all in place by then.
    for name in sorted(os.listdir(tmp), key=lambda n: (n == "family.json", n)):
        src, dst = os.path.join(tmp, name), os.path.join(out, name)
        if os.path.isdir(src) or os.path.isdir(dst):
            if os.path.lexists(dst):
                os.rename(dst, os.path.join(tmp, f".replaced-{name}"))
            os.rename(src, dst)
        else:
            os.replace(src, dst)
    shutil.rmtree(tmp)


@contextlib.contextmanager
def staged(out):
    """Yields a temporary directory to write `out`'s contents into; moves them into `out` when
    the block finishes, removes them when it raises (and re-raises)."""
    if os.path.lexists(out) and not os.path.isdir(out):
        raise upstream.ConversionError(f"{out}: exists and is not a directory (--out names the "
                                       f"directory to write)")
    parent = os.path.dirname(os.path.abspath(out))
    created = []
    while not os.path.isdir(parent):
        created.append(parent)
        parent = os.path.dirname(parent)
    try:
        for d in reversed(created):
            os.mkdir(d)
        tmp = tempfile.mkdtemp(prefix=f".{os.path.basename(os.path.abspath(out))}.converting-",
                               dir=os.path.dirname(os.path.abspath(out)))
    except OSError as e:
        raise upstream.ConversionError(f"{out}: cannot write beside it ({e}); --out names a "
                                       f"directory in a writable place")
    umask = os.umask(0)
    os.umask(umask)
    os.chmod(tmp, 0o777 & ~umask)  # as os.mkdir would make it (mkdtemp's is private)
    _SHOWN[tmp] = out.rstrip(os.sep) or out
    try:
        try:
            yield tmp
        except BaseException:
            shutil.rmtree(tmp, ignore_errors=True)
            for d in created:  # the parents this call made, innermost first, if still empty
                with contextlib.suppress(OSError):
                    os.rmdir(d)
            raise
        try:
            _commit(tmp, out)
        except OSError as e:  # left in place: it may hold originals moved aside
            raise upstream.ConversionError(
                f"{out}: moving the converted files into place failed ({e}); what was not "
                f"moved, and any original it replaced (.replaced-*), is in {tmp}")
    finally:
        _SHOWN.pop(tmp, None)
