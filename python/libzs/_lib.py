"""
Loading libzs.so and declaring the C API for ctypes.

This module owns the one place where Python meets the C ABI: the library
lookup (LIBZS_LIBRARY, then the libzs.so that `pip install` built into the
package, then build directories next to the package source, then the
system's loader path) and mirrors of the public structs in
include/zs/*.h.  The struct mirrors must follow the headers field by field;
tests/test_abi.py compiles a small C program against the headers and checks
every size and offset, so a header change that is not mirrored here fails CI
instead of corrupting memory.
"""
import ctypes
import ctypes.util
import glob
import os
from typing import Any, Dict, List, Optional, Tuple

c_size_t = ctypes.c_size_t
c_ulong = ctypes.c_ulong
c_uint = ctypes.c_uint
c_int = ctypes.c_int
c_u64 = ctypes.c_uint64
c_char_p = ctypes.c_char_p
c_void_p = ctypes.c_void_p

# Loading (before the struct mirrors: their array lengths are C's constants).  _handle()
# opens the library; lib() also declares the functions of _PROTOS, once.
def _candidates() -> List[str]:
    env = os.environ.get("LIBZS_LIBRARY")
    if env:
        return [env]
    here = os.path.dirname(os.path.abspath(__file__))
    out = []
    # Installed with pip: the library built and shipped with the package (setup.py).
    bundled = os.path.join(here, "libzs.so")
    if os.path.isfile(bundled):
        out.append(bundled)
    # Source checkout: python/libzs/_lib.py -> repo root is two levels up.
    for root in (os.path.join(here, "..", ".."), os.path.join(here, "..")):
        root = os.path.normpath(root)
        for d in ["build"] + sorted(glob.glob(os.path.join(root, "build*"))):
            p = os.path.join(root, d, "libzs.so")
            if os.path.isfile(p) and p not in out:
                out.append(p)
    found = ctypes.util.find_library("zs")
    if found:
        out.append(found)
    out.append("libzs.so")
    return out


class LibraryNotFound(ImportError):
    """No loadable libzs.so: set LIBZS_LIBRARY or build the library."""


_dll: Optional[ctypes.CDLL] = None
_lib: Optional[ctypes.CDLL] = None
_lib_path: Optional[str] = None


def _handle() -> ctypes.CDLL:
    global _dll, _lib_path
    if _dll is not None:
        return _dll
    errors = []
    for path in _candidates():
        try:
            _dll = ctypes.CDLL(path, use_errno=True)
        except OSError as e:
            errors.append(f"{path}: {e}")
            continue
        _lib_path = path
        return _dll
    raise LibraryNotFound("cannot load libzs.so (set LIBZS_LIBRARY to its path); tried:\n  "
                          + "\n  ".join(errors or ["nothing found"]))


def const(name: str) -> int:
    """A public constant of include/zs/*.h by its C name, as the loaded library has it
    (zs_const): flag bits, enum values and limits are never copied into Python."""
    fn = _handle().zs_const
    fn.restype, fn.argtypes = c_int, [c_char_p, ctypes.POINTER(ctypes.c_ulonglong)]
    v = ctypes.c_ulonglong()
    if fn(name.encode(), ctypes.byref(v)) < 0:
        raise KeyError(f"libzs has no constant {name}")
    return v.value


ZS_NR_FULLNESS_GROUPS = const("ZS_NR_FULLNESS_GROUPS")
ZS_MAX_CHAIN = const("ZS_MAX_CHAIN")
ZS_MIN_ALLOC_SIZE = const("ZS_MIN_ALLOC_SIZE")
ZS_CLASS_SHARDS_AUTO = const("ZS_CLASS_SHARDS_AUTO")      # zs_pool_config.class_shards
ZS_PAGES_NO_CACHE = const("ZS_PAGES_NO_CACHE")            # zs_pool_config.page_cache_pages
ZS_PAGES_DECAY_NEVER = const("ZS_PAGES_DECAY_NEVER")      # zs_pool_config.page_cache_decay_ms

# Every config's ABI head and tail (docs/abi.md "Growing a config"): set by the C inits,
# never options.
CONFIG_ABI_FIELDS = ("struct_size", "reserved")


class PoolConfig(ctypes.Structure):
    """struct zs_pool_config (include/zs/zsmalloc.h)."""
    _fields_ = [
        ("struct_size", c_size_t),
        ("name", c_char_p),
        ("page_size", c_size_t),
        ("max_chain", c_uint),
        ("class_delta", c_uint),
        ("chain_policy", c_int),
        ("free_mode", c_int),
        ("checked", c_int),
        ("max_pages", c_size_t),
        ("deferred_capacity", c_size_t),
        ("deferred_worker", c_int),
        ("page_cache_pages", c_size_t),
        ("page_cache_decay_ms", c_uint),
        ("class_shards", c_uint),
        ("max_object_size", c_size_t),
        ("fit_zspages", c_int),
        ("autocompact_ms", c_int),
        ("autocompact_pct", c_uint),
        ("autocompact_min_bytes", c_size_t),
        ("reserved", c_u64 * 2),
    ]


class PoolStats(ctypes.Structure):
    """struct zs_pool_stats."""
    _fields_ = [("pages_compacted", c_ulong)]


class ClassInfoC(ctypes.Structure):
    """struct zs_class_info."""
    _fields_ = [
        ("index", c_int),
        ("phys_index", c_int),
        ("size", c_uint),
        ("phys_size", c_uint),
        ("pages_per_zspage", c_uint),
        ("objs_per_zspage", c_uint),
        ("tail_waste", c_uint),
        ("spanning", c_uint),
        ("huge", c_int),
    ]


class ClassStatsC(ctypes.Structure):
    """struct zs_class_stats."""
    _fields_ = [
        ("index", c_int),
        ("size", c_uint),
        ("fullness", c_ulong * ZS_NR_FULLNESS_GROUPS),
        ("obj_allocated", c_ulong),
        ("obj_used", c_ulong),
        ("pages_used", c_ulong),
        ("pages_per_zspage", c_uint),
        ("objs_per_zspage", c_uint),
        ("freeable", c_ulong),
    ]


class BackendConfig(ctypes.Structure):
    """struct zs_backend_config (include/zs/backend.h)."""
    _fields_ = [
        ("struct_size", c_size_t),
        ("kind", c_char_p),
        ("page_size", c_size_t),
        ("max_pages", c_size_t),
        ("checked", c_int),
        ("zs", PoolConfig),
        ("reserved", c_u64 * 4),
    ]


class ZramConfig(ctypes.Structure):
    """struct zs_zram_config (include/zs/zram.h)."""
    _fields_ = [
        ("struct_size", c_size_t),
        ("page_size", c_size_t),
        ("disksize", c_u64),
        ("comp", c_char_p),
        ("recomp", c_char_p),
        ("backend", BackendConfig),
        ("mem_limit", c_u64),
        ("deferred_free", c_int),
        ("streams", c_uint),
        ("track_actime", c_int),
        ("comp_level", c_int),
        ("comp_dict", c_void_p),
        ("comp_dict_len", c_size_t),
        ("comp_dict_path", c_char_p),
        ("recomp_level", c_int),
        ("recomp_dict", c_void_p),
        ("recomp_dict_len", c_size_t),
        ("recomp_dict_path", c_char_p),
        ("backing_path", c_char_p),
        ("writeback_batch_size", c_uint),
        ("writeback_compressed", c_int),
        ("group_pages", c_uint),
        ("filter", c_char_p),
        ("reserved", c_u64 * 7),
    ]


ZRAM_STAT_FIELDS = [
    "orig_data_size", "compr_data_size", "mem_used_total", "mem_limit", "mem_used_max",
    "same_pages", "pages_compacted", "huge_pages", "huge_pages_since",
    "failed_reads", "failed_writes", "invalid_io", "notify_free",
    "miss_free", "num_reads", "num_writes", "pages_stored", "incompressible_pages",
    "bd_count", "bd_reads", "bd_writes",
    "bd_read_retries", "bd_read_errors", "bd_csum_errors",
]


class ZramStatsC(ctypes.Structure):
    """struct zs_zram_stats."""
    _fields_ = [(n, c_u64) for n in ZRAM_STAT_FIELDS]


class ZramRecompResult(ctypes.Structure):
    """struct zs_zram_recomp_result."""
    _fields_ = [("scanned", c_ulong), ("recompressed", c_ulong), ("incompressible", c_ulong)]


class RegionConfig(ctypes.Structure):
    """struct zs_region_config (include/zs/region.h)."""
    _fields_ = [
        ("struct_size", c_size_t),
        ("size", c_size_t),
        ("store", ZramConfig),
        ("handler_threads", c_uint),
        ("fault_around", c_uint),
        ("spin_us", c_uint),
        ("resident_limit", c_size_t),
        ("reserved", c_u64 * 8),
    ]


ZS_REGION_LAT_BUCKETS = const("ZS_REGION_LAT_BUCKETS")
REGION_STAT_FIELDS = [
    "pages", "resident", "stored", "faults", "faults_zero", "faults_wp", "pages_in",
    "fault_around_pages", "pageouts", "reclaimed", "releases",
]


class RegionStatsC(ctypes.Structure):
    """struct zs_region_stats."""
    _fields_ = [(n, c_u64) for n in REGION_STAT_FIELDS] + [
        ("lat_hist", c_u64 * ZS_REGION_LAT_BUCKETS),
        ("store", ZramStatsC),
        ("uffd_move", c_int),
        ("broken", c_int),
        ("removed", c_u64),
        ("unmapped", c_u64),
        ("sigbus_pages", c_u64),
        ("read_errors", c_u64),
    ]


class CompConfig(ctypes.Structure):
    """struct zs_comp_config (zs/compress.h)."""
    _fields_ = [
        ("struct_size", c_size_t),
        ("name", c_char_p),
        ("max_src", c_size_t),
        ("level", c_int),
        ("dict", c_void_p),
        ("dict_len", c_size_t),
        ("reserved", c_u64 * 2),
    ]


STRUCTS = {
    "zs_comp_config": CompConfig,
    "zs_pool_config": PoolConfig,
    "zs_pool_stats": PoolStats,
    "zs_class_info": ClassInfoC,
    "zs_class_stats": ClassStatsC,
    "zs_backend_config": BackendConfig,
    "zs_zram_config": ZramConfig,
    "zs_zram_stats": ZramStatsC,
    "zs_zram_recomp_result": ZramRecompResult,
    "zs_region_config": RegionConfig,
    "zs_region_stats": RegionStatsC,
}

# name: (restype, [argtypes])
_P = c_void_p
_STRS = ctypes.POINTER(c_char_p)
_PROTOS: Dict[str, Tuple[Any, List[Any]]] = {
    "zs_const": (c_int, [c_char_p, ctypes.POINTER(ctypes.c_ulonglong)]),
    "zs_const_names": (_STRS, []),
    "zs_free_mode_names": (_STRS, []),
    "zs_free_mode_parse": (c_int, [c_char_p, ctypes.POINTER(c_int)]),
    "zs_chain_policy_names": (_STRS, []),
    "zs_chain_policy_parse": (c_int, [c_char_p, ctypes.POINTER(c_int)]),
    "zs_pool_config_init": (None, [ctypes.POINTER(PoolConfig)]),
    "zs_pool_config_init_app": (None, [ctypes.POINTER(PoolConfig)]),
    "zs_pool_get_config": (ctypes.POINTER(PoolConfig), [_P]),
    "zs_pool_class_shards": (c_uint, [_P]),
    "zs_pool_create": (c_int, [ctypes.POINTER(PoolConfig), ctypes.POINTER(c_void_p), c_char_p,
                               c_size_t]),
    "zs_destroy_pool": (None, [_P]),
    "zs_malloc": (c_ulong, [_P, c_size_t]),
    "zs_free": (c_int, [_P, c_ulong]),
    "zs_free_deferred": (c_int, [_P, c_ulong]),
    "zs_free_deferred_flush": (None, [_P]),
    "zs_obj_read_begin": (_P, [_P, c_ulong, c_size_t, _P]),
    "zs_obj_read_end": (None, [_P, c_ulong, c_size_t, _P]),
    "zs_obj_write": (c_int, [_P, c_ulong, _P, c_size_t]),
    "zs_malloc_write": (c_ulong, [_P, _P, c_size_t]),
    "zs_huge_class_size": (c_size_t, [_P]),
    "zs_lookup_class_index": (c_int, [_P, c_size_t]),
    "zs_compact": (c_ulong, [_P]),
    "zs_get_total_pages": (c_ulong, [_P]),
    "zs_pool_stats": (c_int, [_P, ctypes.POINTER(PoolStats), c_size_t]),
    "zs_class_count": (c_int, [_P]),
    "zs_class_info": (c_int, [_P, c_int, ctypes.POINTER(ClassInfoC)]),
    "zs_class_stats": (c_int, [_P, c_int, ctypes.POINTER(ClassStatsC), c_size_t]),
    "zs_pool_page_size": (c_size_t, [_P]),
    "zs_page_size_valid": (c_int, [c_size_t]),
    "zs_pool_objects": (c_ulong, [_P]),
    "zs_pool_trim": (None, [_P]),
    "zs_backend_kinds": (ctypes.POINTER(c_char_p), []),
    "zs_backend_config_init": (None, [ctypes.POINTER(BackendConfig)]),
    "zs_backend_create": (c_int, [ctypes.POINTER(BackendConfig), ctypes.POINTER(c_void_p),
                                  c_char_p, c_size_t]),
    "zs_backend_destroy": (None, [_P]),
    "zs_backend_zspool": (_P, [_P]),
    "zs_comp_config_init": (None, [ctypes.POINTER(CompConfig)]),
    "zs_comp_create": (c_int, [ctypes.POINTER(CompConfig), ctypes.POINTER(c_void_p), c_char_p,
                               c_size_t]),
    "zs_comp_destroy": (None, [_P]),
    "zs_comp_check": (c_int, [c_char_p]),
    "zs_comp_name": (c_char_p, [_P]),
    "zs_comp_bound": (c_size_t, [_P, c_size_t]),
    "zs_compress": (c_int, [_P, _P, c_size_t, _P, c_size_t]),
    "zs_decompress": (c_int, [_P, _P, c_size_t, _P, c_size_t]),
    "zs_comp_names": (ctypes.POINTER(c_char_p), []),
    "zs_zram_config_init": (None, [ctypes.POINTER(ZramConfig)]),
    "zs_zram_config_init_app": (None, [ctypes.POINTER(ZramConfig)]),
    "zs_zram_create": (c_int, [ctypes.POINTER(ZramConfig), ctypes.POINTER(c_void_p),
                               c_char_p, c_size_t]),
    "zs_zram_backend": (_P, [_P]),
    "zs_zram_destroy": (None, [_P]),
    "zs_zram_slots": (c_u64, [_P]),
    "zs_zram_page_size": (c_size_t, [_P]),
    "zs_zram_comp_name": (c_char_p, [_P]),
    "zs_zram_write": (c_int, [_P, c_u64, _P]),
    "zs_zram_page_same_filled": (c_int, [_P, c_size_t, _P]),
    "zs_zram_read": (c_int, [_P, c_u64, _P, c_size_t]),
    "zs_zram_discard": (c_int, [_P, c_u64]),
    "zs_zram_reset": (None, [_P]),
    "zs_zram_flush": (None, [_P]),
    "zs_zram_compact": (c_ulong, [_P]),
    "zs_zram_mark_idle": (ctypes.c_long, [_P, c_uint]),
    "zs_zram_recompress": (c_int, [_P, c_int, c_size_t, c_ulong, ctypes.POINTER(ZramRecompResult)]),
    "zs_zram_get_stats": (c_int, [_P, ctypes.POINTER(ZramStatsC), c_size_t]),
    "zs_zram_reset_mem_used_max": (None, [_P]),
    "zs_region_config_init": (None, [ctypes.POINTER(RegionConfig)]),
    "zs_region_config_init_app": (None, [ctypes.POINTER(RegionConfig)]),
    "zs_region_create": (c_int, [ctypes.POINTER(RegionConfig), ctypes.POINTER(c_void_p),
                                 c_char_p, c_size_t]),
    "zs_region_destroy": (None, [_P]),
    "zs_region_addr": (_P, [_P]),
    "zs_region_size": (c_size_t, [_P]),
    "zs_region_store": (_P, [_P]),
    "zs_region_pageout": (ctypes.c_long, [_P, _P, c_size_t]),
    "zs_region_release": (c_int, [_P, _P, c_size_t]),
    "zs_region_advise": (c_int, [_P, _P, c_size_t, c_int]),
    "zs_region_reclaim": (ctypes.c_long, [_P, c_size_t]),
    "zs_region_get_stats": (c_int, [_P, ctypes.POINTER(RegionStatsC), c_size_t]),
    "zs_region_lat_percentile": (ctypes.c_double, [ctypes.POINTER(c_u64), ctypes.c_double]),
    "zs_region_available": (c_int, [c_char_p, c_size_t]),
    "zs_zram_slot_info": (c_int, [_P, c_u64, ctypes.POINTER(c_size_t), ctypes.POINTER(c_uint),
                                  ctypes.POINTER(c_uint)]),
}


def lib() -> ctypes.CDLL:
    """The loaded library, its functions declared (on first use)."""
    global _lib
    if _lib is not None:
        return _lib
    handle = _handle()
    for name, (res, args) in _PROTOS.items():
        fn = getattr(handle, name, None)
        if fn is None:
            continue  # declared lazily-missing: callers get NotImplementedError via need()
        fn.restype = res
        fn.argtypes = args
    _lib = handle
    return _lib


def library_path() -> str:
    lib()
    assert _lib_path is not None
    return _lib_path


def need(name: str) -> Any:
    """A C function by name, with a clear error if this build lacks it."""
    fn = getattr(lib(), name, None)
    if fn is None:
        raise NotImplementedError(f"{name} is not in {_lib_path}")
    return fn
