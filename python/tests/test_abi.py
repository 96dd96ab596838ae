# The ctypes struct mirrors in libzs/_lib.py must match include/zs/*.h: compile
# a tiny C program that prints sizeof/offsetof for every mirrored struct and
# compare.  Skipped when no C compiler is available.
import os
import shutil
import subprocess

import pytest

from libzs import _lib
from conftest import REPO


def test_struct_layout(tmp_path):
    cc = shutil.which("cc") or shutil.which("gcc") or shutil.which("clang")
    inc = os.path.join(REPO, "include")
    if not cc or not os.path.isdir(inc):
        pytest.skip("no C compiler or headers")
    lines = ["#include <stdio.h>", "#include <stddef.h>", "#include \"zs/zsmalloc.h\"",
             "#include \"zs/backend.h\"", "#include \"zs/zram.h\"", "#include \"zs/region.h\"",
             "int main(void) {"]
    for cname, py in _lib.STRUCTS.items():
        lines.append(f'printf("{cname} %zu\\n", sizeof(struct {cname}));')
        for f, _t in py._fields_:
            lines.append(f'printf("{cname}.{f} %zu\\n", offsetof(struct {cname}, {f}));')
    lines += ["return 0; }"]
    src = tmp_path / "abi.c"
    src.write_text("\n".join(lines))
    exe = tmp_path / "abi"
    subprocess.run([cc, "-std=c11", "-I", inc, str(src), "-o", str(exe)], check=True)
    out = subprocess.run([str(exe)], check=True, stdout=subprocess.PIPE, text=True).stdout
    want = dict(line.rsplit(" ", 1) for line in out.splitlines())
    for cname, py in _lib.STRUCTS.items():
        assert int(want[cname]) == __import__("ctypes").sizeof(py), cname
        for f, _t in py._fields_:
            assert int(want[f"{cname}.{f}"]) == getattr(py, f).offset, f"{cname}.{f}"
