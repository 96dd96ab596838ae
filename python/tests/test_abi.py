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
             "#include \"zs/compress.h\"",
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


def test_profile_functions_and_constants(tmp_path):
    # The profile inits and the getters the bindings declare, with the C types _PROTOS
    # gives them, and the option constants _lib mirrors (zsmalloc.h, pages.h).
    cc = shutil.which("cc") or shutil.which("gcc") or shutil.which("clang")
    inc = os.path.join(REPO, "include")
    if not cc or not os.path.isdir(inc):
        pytest.skip("no C compiler or headers")
    head = ["#include <stdio.h>", "#include \"zs/zsmalloc.h\"", "#include \"zs/backend.h\"",
            "#include \"zs/zram.h\"", "#include \"zs/region.h\"", "#include \"zs/pages.h\"",
            "#include \"zs/compress.h\""]
    protos = [
        "void (*p1)(struct zs_pool_config *) = zs_pool_config_init_app;",
        "void (*p2)(struct zs_pool_config *) = zs_pool_config_init;",
        "void (*z1)(struct zs_zram_config *) = zs_zram_config_init_app;",
        "void (*z2)(struct zs_zram_config *) = zs_zram_config_init;",
        "void (*r1)(struct zs_region_config *) = zs_region_config_init_app;",
        "void (*r2)(struct zs_region_config *) = zs_region_config_init;",
        "const struct zs_pool_config *(*g1)(const struct zs_pool *) = zs_pool_get_config;",
        "unsigned (*g2)(const struct zs_pool *) = zs_pool_class_shards;",
        "struct zs_backend *(*g3)(struct zs_zram *) = zs_zram_backend;",
        "struct zs_pool *(*g4)(struct zs_backend *) = zs_backend_zspool;",
        "int (*c1)(const struct zs_zram_config *, struct zs_zram **, char *, size_t)"
        " = zs_zram_create;",
        "int (*c2)(const struct zs_pool_config *, struct zs_pool **, char *, size_t)"
        " = zs_pool_create;",
        "int (*c3)(const struct zs_comp_config *, struct zs_comp **, char *, size_t)"
        " = zs_comp_create;",
        "int (*s1)(const struct zs_pool *, struct zs_pool_stats *, size_t) = zs_pool_stats;"]
    main = ["int main(void) {",
            'printf("%u %zu %u\\n", ZS_CLASS_SHARDS_AUTO, (size_t)ZS_PAGES_NO_CACHE,'
            " ZS_PAGES_DECAY_NEVER);",
            "return 0; }"]
    # the prototypes: compiled only (a type mismatch is an error); the constants: run
    src = tmp_path / "protos.c"
    src.write_text("\n".join(head + protos))
    subprocess.run([cc, "-std=c11", "-Werror=incompatible-pointer-types", "-I", inc,
                    "-c", str(src), "-o", str(tmp_path / "protos.o")], check=True)
    src2 = tmp_path / "consts.c"
    src2.write_text("\n".join(head + main))
    exe = tmp_path / "consts"
    subprocess.run([cc, "-std=c11", "-I", inc, str(src2), "-o", str(exe)], check=True)
    out = subprocess.run([str(exe)], check=True, stdout=subprocess.PIPE, text=True).stdout
    auto, no_cache, never = map(int, out.split())
    assert (auto, no_cache, never) == (_lib.ZS_CLASS_SHARDS_AUTO, _lib.ZS_PAGES_NO_CACHE,
                                       _lib.ZS_PAGES_DECAY_NEVER)
    for name in ("zs_pool_config_init_app", "zs_zram_config_init_app",
                 "zs_region_config_init_app", "zs_pool_get_config", "zs_pool_class_shards",
                 "zs_zram_backend", "zs_backend_zspool", "zs_zram_create", "zs_pool_create",
                 "zs_comp_create", "zs_pool_stats"):
        assert name in _lib._PROTOS
        _lib.need(name)          # exported by the library the bindings load
