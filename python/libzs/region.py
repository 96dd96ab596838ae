"""
Region: compressed memory for Python programs (zs_region, include/zs/region.h).

A Region is an anonymous mapping whose pages can be paged out into a libzs
zram store (compressed) and come back on touch through userfaultfd.  Use it
to keep a large array compressed while it is cold:

    with libzs.Region(1 << 30) as r:
        a = r.numpy("float32")          # or r.view() for a writable memoryview
        a[:] = ...
        r.pageout()                     # RSS falls; a is still valid
        a.sum()                         # pages fault back in as touched
        del a                           # before the block ends: see below

Needs userfaultfd permission (root, /dev/userfaultfd access or
vm.unprivileged_userfaultfd=1); libzs.region_available() says whether it works here.

Views, arrays and close() (no use of a Region can crash the interpreter):

  - close(), and the end of a with block, raise BufferError while a memoryview
    (r.view(), any slice or cast of it), a numpy array (r.numpy(), or
    np.frombuffer of a view) or anything else holding the region's memory
    exists, as mmap.mmap does; the region stays open and usable.  Delete them
    (del v, a; or v.release() on memoryviews that nothing was built on) first.
  - Where nothing can raise, the exported buffers keep the memory valid instead:
    a with block left by an exception, and a Region dropped (garbage
    collected) while views of it exist, mark the Region closed and leave the
    mapping, its store and its fault-handler threads to the views: they are
    destroyed when the last view or array goes.
  - After close(), every Region method raises ValueError.
  - bytes(v), v.tobytes(), a.copy() are copies: they never point into the region.

How: the memory is exported through one ctypes array owned by the Region; every
memoryview or array of the region holds a reference to it (directly, or through
the memoryview's shared buffer), so its reference count says whether any exist
(CPython's exact reference counts), and the array holds the C region, whose
finalizer destroys it when the Region and the last export are gone.
"""
from __future__ import annotations

import ctypes
import sys
import threading
from typing import Any, Dict, List, Optional, Tuple, Union, cast

from . import _lib as _L
from . import (_Closable, _Gate, _check, _choice, _c_int_arg, _create_error, _dict_arg,
               _filter_arg, _profile_init, _set_pool_options, _zspool_config)

ADVICE = {"cold": _L.const("ZS_REGION_COLD"), "hot": _L.const("ZS_REGION_HOT"),
          "pageout": _L.const("ZS_REGION_PAGEOUT")}


def available() -> Tuple[bool, str]:
    """(True, "") if regions can be created in this process, else (False, reason)."""
    err = ctypes.create_string_buffer(512)
    ok = _L.need("zs_region_available")(err, len(err))
    return bool(ok), err.value.decode(errors="replace")


class _Mapping(_Gate):
    """The C region: destroyed by destroy() or when the last reference goes (the Region's,
    or an exported buffer's).  Calls into C hold it (with m.hold(): r = m.ptr()), so
    destroy() waits for calls in flight on other threads (_Gate says why a hold is a
    memoryview, not a counter: KeyboardInterrupt)."""
    __slots__ = ("_destroy",)

    def __init__(self, ptr: Any) -> None:
        super().__init__(ptr, lambda: ValueError("region is closed"))
        self._destroy = _L.need("zs_region_destroy")

    def destroy(self) -> None:
        self.close_with(self._destroy)

    def __del__(self) -> None:
        self.destroy()


class Region(_Closable):
    """
    size bytes of compressible memory.  comp/backend/deferred_free configure the store;
    handlers is the number of fault-handler threads, fault_around the pages installed per
    sequential fault, spin_us how long handlers spin before sleeping, resident_limit bytes
    kept resident by automatic reclaim (0: off); None leaves the profile's value (struct
    zs_region_config in include/zs/region.h has each default and range).

    profile: "app" (default, zs_region_config_init_app: the store's pool in the
    application profile) | "kernel" (zs_region_config_init: the kernel's pool layout).
    The pool options are Pool's (chain, delta, chain_policy, free_mode, class_shards,
    deferred_capacity, deferred_worker, page_cache_pages, page_cache_decay_ms, name,
    max_object_size, fit_zspages, autocompact_*; None: the profile's); max_pages and checked are the backend's, mem_limit, streams,
    comp_level, comp_dict and filter (e.g. "shuffle:4" for int32 data) the store's (as
    ZramStore).  A value outside its range is the
    C library's to refuse: ZsArgumentError (errno EINVAL) with zs_region_create's reason.
    pool_config() is the store's zsmalloc pool config as C holds it.

    close() and the end of a with block raise BufferError while a memoryview or
    numpy array of the region exists (mmap.mmap's rule); a with block left by an
    exception, or a Region garbage-collected with views left, is closed for its
    methods and its memory stays valid until the last view goes (module docstring).
    Methods of a closed Region raise ValueError.  Calls may come from several threads;
    close() waits for those in flight.
    """

    def __init__(self, size: int, comp: str = "lz4", backend: str = "zsmalloc",
                 free_mode: Optional[str] = None, deferred_free: bool = False,
                 handlers: Optional[int] = None, fault_around: Optional[int] = None,
                 spin_us: Optional[int] = None, resident_limit: Optional[int] = None, *,
                 profile: str = "app", chain: Optional[int] = None,
                 delta: Optional[int] = None, chain_policy: Optional[str] = None,
                 class_shards: Union[int, str, None] = None,
                 deferred_capacity: Optional[int] = None,
                 deferred_worker: Optional[bool] = None,
                 page_cache_pages: Union[int, str, None] = None,
                 page_cache_decay_ms: Union[int, str, None] = None, name: Optional[str] = None,
                 max_pages: Optional[int] = None, checked: Optional[bool] = None,
                 mem_limit: int = 0, streams: int = 0, comp_level: int = 0,
                 comp_dict: Any = None, filter: Optional[str] = None,
                 max_object_size: Optional[int] = None,
                 fit_zspages: Optional[bool] = None, autocompact_ms: Optional[int] = None,
                 autocompact_pct: Optional[int] = None,
                 autocompact_min_bytes: Optional[int] = None) -> None:
        # Only types and C field widths are checked here; the ranges (size 0 included)
        # are zs_region_create's to refuse, with its reason.
        if not isinstance(comp, str) or not isinstance(backend, str):
            raise TypeError("comp and backend must be str")
        cfg = _profile_init("region", profile, _L.RegionConfig())
        self._keep: List[Any] = [comp.encode(), backend.encode()]
        cfg.size = _c_int_arg("size", size, ctypes.c_size_t)
        cfg.store.comp = self._keep[0]
        cfg.store.backend.kind = self._keep[1]
        if max_pages is not None:      # the backend's limit (the pool's field is not read)
            cfg.store.backend.max_pages = _c_int_arg("max_pages", max_pages, ctypes.c_size_t)
        if checked is not None:
            cfg.store.backend.checked = 1 if checked else 0
        pool_opts = {"chain": chain, "delta": delta, "chain_policy": chain_policy,
                     "free_mode": free_mode, "class_shards": class_shards,
                     "deferred_capacity": deferred_capacity,
                     "deferred_worker": deferred_worker, "page_cache_pages": page_cache_pages,
                     "page_cache_decay_ms": page_cache_decay_ms, "name": name,
                     "max_object_size": max_object_size, "fit_zspages": fit_zspages,
                     "autocompact_ms": autocompact_ms, "autocompact_pct": autocompact_pct,
                     "autocompact_min_bytes": autocompact_min_bytes}
        _set_pool_options(cfg.store.backend.zs, pool_opts, self._keep)
        cfg.store.deferred_free = 1 if deferred_free else 0
        cfg.store.mem_limit = _c_int_arg("mem_limit", mem_limit, ctypes.c_uint64)
        cfg.store.streams = _c_int_arg("streams", streams, ctypes.c_uint)
        cfg.store.comp_level = _c_int_arg("comp_level", comp_level, ctypes.c_int)
        cfg.store.comp_dict, cfg.store.comp_dict_len, cfg.store.comp_dict_path = _dict_arg(
            "comp_dict", comp_dict, self._keep)
        cfg.store.filter = _filter_arg(filter, self._keep)
        for opt, field, v, ctype in (("handlers", "handler_threads", handlers, ctypes.c_uint),
                                     ("fault_around", "fault_around", fault_around,
                                      ctypes.c_uint),
                                     ("spin_us", "spin_us", spin_us, ctypes.c_uint),
                                     ("resident_limit", "resident_limit", resident_limit,
                                      ctypes.c_size_t)):
            if v is not None:
                setattr(cfg, field, _c_int_arg(opt, v, ctype))
        out = ctypes.c_void_p()
        err = ctypes.create_string_buffer(512)
        rc = _L.need("zs_region_create")(ctypes.byref(cfg), ctypes.byref(out), err, len(err))
        if rc < 0:
            given = dict(profile=profile, max_pages=max_pages, checked=checked, **pool_opts)
            for k, v, dflt in (("mem_limit", mem_limit, 0), ("streams", streams, 0),
                               ("comp_level", comp_level, 0), ("handlers", handlers, None),
                               ("fault_around", fault_around, None), ("spin_us", spin_us, None),
                               ("resident_limit", resident_limit, None)):
                if v != dflt:
                    given[k] = v
            if filter is not None:
                given["filter"] = filter
            raise _create_error(rc, "zs_region_create", err.value.decode(errors="replace"),
                                given)
        self._lock = threading.Lock()   # view()/numpy() against close() on another thread
        self._m: Optional[_Mapping] = _Mapping(out.value)
        self._arr: Any = None           # the exporter: made by the first view()/numpy()
        self.size: int = _L.need("zs_region_size")(out.value)
        self.addr: int = _L.need("zs_region_addr")(out.value)
        self.page_size: int = _L.need("zs_zram_page_size")(_L.need("zs_region_store")(out.value))
        self.profile = profile

    def pool_config(self) -> Optional[Dict[str, Any]]:
        """The store's zsmalloc pool config as C holds it (Pool.config's names, and
        "shards": the copies of each size class), or None when the backend is not zsmalloc."""
        m = self._mapping()
        with m.hold():
            r = m.ptr()
            return _zspool_config(_L.need("zs_region_store")(r))

    @property
    def closed(self) -> bool:
        return getattr(self, "_m", None) is None

    def _exported(self) -> bool:
        """True while a memoryview or array of the region exists: anything but self._arr
        (and getrefcount's own argument) refers to the exporter."""
        return self._arr is not None and sys.getrefcount(self._arr) > 2

    def close(self) -> None:
        """Destroy the region now.  BufferError (and the region stays open) while a view or
        array of it exists; a second close() does nothing."""
        lock = getattr(self, "_lock", None)
        if lock is None:
            return
        with lock:
            m = self._m
            if m is None:
                return
            if self._exported():
                raise BufferError("cannot close a Region while memoryviews or numpy arrays of "
                                  "it exist: del them (or release() the memoryviews) first")
            self._arr = None
            self._m = None
        m.destroy()                     # waits for C calls in flight on other threads

    def _detach(self) -> None:
        """Closed for its own methods; the views left keep the memory until they go."""
        with self._lock:
            self._arr = None
            self._m = None

    def __exit__(self, *exc: Any) -> None:
        if not exc or exc[0] is None:
            self.close()
            return
        try:                            # do not hide the block's exception behind a BufferError
            self.close()
        except BufferError:
            self._detach()

    def __del__(self) -> None:
        try:
            self.close()
        except Exception:
            pass                        # views left: the mapping goes with the last of them

    def _mapping(self) -> _Mapping:
        m = getattr(self, "_m", None)
        if m is None:
            raise ValueError("region is closed")
        return cast(_Mapping, m)

    def _exporter(self) -> Any:
        with self._lock:
            self._mapping()
            if self._arr is None:
                arr: Any = (ctypes.c_ubyte * self.size).from_address(self.addr)
                arr._mapping = self._m  # an export keeps the C region alive
                self._arr = arr
            return self._arr

    def _range(self, offset: int, length: Optional[int]) -> Tuple[int, int]:
        """The C call's (address, length); whether the range is inside the region and
        page-aligned is C's to decide (EINVAL, raised as ZsArgumentError)."""
        _c_int_arg("offset", offset, ctypes.c_size_t)
        if length is None:
            length = max(self.size - offset, 0)
        return self.addr + offset, _c_int_arg("length", length, ctypes.c_size_t)

    def view(self) -> memoryview:
        """A writable memoryview (format 'B') over the whole region (close() raises
        BufferError while it, or anything made from it, exists)."""
        return memoryview(self._exporter()).cast("B")

    def numpy(self, dtype: Any = "uint8", shape: Any = None) -> Any:
        """A numpy array over the region (needs numpy; close() raises BufferError while it,
        or a view of it, exists)."""
        import numpy as np
        a = np.frombuffer(self._exporter(), dtype=dtype)   # its base is the exporter
        return a.reshape(shape) if shape is not None else a

    def pageout(self, offset: int = 0, length: Optional[int] = None) -> int:
        """Compress and drop the resident pages of a range; returns pages stored.  One C
        call: a KeyboardInterrupt during it is raised when it returns (as for release()
        and reclaim()); page out a large region in parts to see one sooner."""
        a, n = self._range(offset, length)
        m = self._mapping()
        with m.hold():
            r = m.ptr()
            return _check(_L.need("zs_region_pageout")(r, a, n), "zs_region_pageout")

    def release(self, offset: int = 0, length: Optional[int] = None) -> None:
        """Forget a range: stored objects freed, pages read as zeros afterwards (one C
        call, as pageout())."""
        a, n = self._range(offset, length)
        m = self._mapping()
        with m.hold():
            r = m.ptr()
            _check(_L.need("zs_region_release")(r, a, n), "zs_region_release")

    def advise(self, advice: str, offset: int = 0, length: Optional[int] = None) -> None:
        """advice: "cold" | "hot" | "pageout" (hints for automatic reclaim)."""
        a, n = self._range(offset, length)
        adv = _choice(advice, ADVICE, "advice")
        m = self._mapping()
        with m.hold():
            r = m.ptr()
            _check(_L.need("zs_region_advise")(r, a, n, adv), "zs_region_advise")

    def reclaim(self, target: int) -> int:
        """Page out cold pages until at most target bytes are resident; pages stored (one
        C call, as pageout())."""
        _c_int_arg("target", target, ctypes.c_size_t)   # 2**64 + n must not become n
        m = self._mapping()
        with m.hold():
            r = m.ptr()
            return _check(_L.need("zs_region_reclaim")(r, target), "zs_region_reclaim")

    def stats(self) -> Dict[str, Any]:
        st = _L.RegionStatsC()
        m = self._mapping()
        with m.hold():
            r = m.ptr()
            _L.need("zs_region_get_stats")(r, ctypes.byref(st), ctypes.sizeof(st))
        d: Dict[str, Any] = {n: getattr(st, n) for n in _L.REGION_STAT_FIELDS}
        d["store"] = {n: getattr(st.store, n) for n in _L.ZRAM_STAT_FIELDS}
        d["lat_hist"] = list(st.lat_hist)
        pct = _L.need("zs_region_lat_percentile")
        d["fault_p50_ns"] = pct(st.lat_hist, 50.0)
        d["fault_p99_ns"] = pct(st.lat_hist, 99.0)
        d["uffd_move"] = bool(st.uffd_move)
        d["broken"] = bool(st.broken)
        for n in ("removed", "unmapped", "sigbus_pages", "read_errors"):
            d[n] = getattr(st, n)
        return d
