# libzs.so is the product only (docs/abi.md 3.0.0): the malloc baselines and the
# rest of the harness are the zs tool's, benchmarks' and tests', so through the shared
# library (and so from Python) they do not exist.
import ctypes
import errno

import libzs
from libzs import _lib


def test_backend_kinds_are_the_library_own():
    assert libzs.backend_kinds(all=True) == ["zsmalloc", "zblock"]


def test_malloc_baseline_is_not_supported_here():
    # docs/abi.md: zs_backend_create answers malloc, jemalloc and mimalloc with ENOTSUP
    # (not EINVAL, an unknown name's answer) through libzs.so.
    for kind in (b"malloc", b"jemalloc", b"mimalloc"):
        cfg = _lib.BackendConfig()
        _lib.need("zs_backend_config_init")(ctypes.byref(cfg))
        cfg.kind = kind
        ctypes.set_errno(0)
        out, err = ctypes.c_void_p(), ctypes.create_string_buffer(256)
        assert _lib.need("zs_backend_create")(ctypes.byref(cfg), ctypes.byref(out), err,
                                              len(err)) == -errno.ENOTSUP, kind
        assert not out.value and ctypes.get_errno() == errno.ENOTSUP, kind
        assert b"not available in this process" in err.value, err.value
    cfg.kind = b"nosuchkind"
    ctypes.set_errno(0)
    out, err = ctypes.c_void_p(), ctypes.create_string_buffer(256)
    assert _lib.need("zs_backend_create")(ctypes.byref(cfg), ctypes.byref(out), err,
                                          len(err)) == -errno.EINVAL
    assert not out.value and ctypes.get_errno() == errno.EINVAL
    assert b'kind "nosuchkind": unknown' in err.value, err.value


def test_no_harness_or_page_provider_symbols():
    so = _lib.lib()
    for name in ("zs_process_rss", "zs_pageset_load", "zs_kzram_run", "zs_pool_fail_pages",
                 "zs_zram_wb_inject", "zs_zswap_wb_inject", "pages_create",
                 "pages_fail_after", "backend_register", "zs_harness_register"):
        assert not hasattr(so, name), name
