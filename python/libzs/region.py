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

Needs userfaultfd permission (root, /dev/userfaultfd access or
vm.unprivileged_userfaultfd=1); Region.available() says whether it works here.
Views and arrays point into the mapping: do not use them after close().
Views keep the Region alive (it is not closed by garbage collection while a
view or array exists).
"""
import ctypes

from . import _lib as _L
from . import ZsError, _Closable, _check, _choice, FREE_MODES

ADVICE = {"cold": 1, "hot": 2, "pageout": 3}


def available():
    """(True, "") if regions can be created in this process, else (False, reason)."""
    err = ctypes.create_string_buffer(512)
    ok = _L.need("zs_region_available")(err, len(err))
    return bool(ok), err.value.decode(errors="replace")


class Region(_Closable):
    """
    size bytes of compressible memory.  comp/backend/free_mode/deferred_free
    configure the store; handlers is the number of fault-handler threads,
    fault_around the pages installed per sequential fault, spin_us how long
    handlers spin before sleeping (0: library default), resident_limit bytes
    kept resident by automatic reclaim (0: off).
    """

    def __init__(self, size, comp="lz4", backend="zsmalloc", free_mode="pool",
                 deferred_free=False, handlers=1, fault_around=16, spin_us=0,
                 resident_limit=0):
        if not isinstance(size, int) or isinstance(size, bool) or size <= 0:
            raise ValueError("size must be a positive int")
        cfg = _L.RegionConfig()
        _L.need("zs_region_config_init")(ctypes.byref(cfg))
        self._keep = [comp.encode(), backend.encode()]
        cfg.size = size
        cfg.store.comp = self._keep[0]
        cfg.store.backend.kind = self._keep[1]
        cfg.store.backend.zs.free_mode = _choice(free_mode, FREE_MODES, "free_mode")
        cfg.store.deferred_free = 1 if deferred_free else 0
        cfg.handler_threads = handlers
        cfg.fault_around = fault_around
        cfg.spin_us = spin_us
        cfg.resident_limit = resident_limit
        out = ctypes.c_void_p()
        err = ctypes.create_string_buffer(512)
        rc = _L.need("zs_region_create")(ctypes.byref(cfg), ctypes.byref(out), err, len(err))
        if rc < 0:
            msg = err.value.decode(errors="replace")
            raise ZsError(rc, f"zs_region_create: {msg}" if msg else "zs_region_create")
        self._r = out.value
        self.size = _L.need("zs_region_size")(self._r)
        self.addr = _L.need("zs_region_addr")(self._r)
        self._arr = None

    def close(self):
        if getattr(self, "_r", None):
            _L.need("zs_region_destroy")(self._r)
            self._r = None

    def _reg(self):
        if not getattr(self, "_r", None):
            raise ValueError("region is closed")
        return self._r

    def _range(self, offset, length):
        if length is None:
            length = self.size - offset
        if offset < 0 or length < 0 or offset + length > self.size:
            raise ValueError("range outside the region")
        if offset % 4096 or length % 4096:
            raise ValueError("offset and length must be multiples of the page size")
        return self.addr + offset, length

    def view(self):
        """A writable memoryview (format 'B') over the whole region."""
        self._reg()
        if self._arr is None:
            arr = (ctypes.c_ubyte * self.size).from_address(self.addr)
            arr._region = self   # views keep the region alive
            self._arr = arr
        return memoryview(self._arr).cast("B")

    def numpy(self, dtype="uint8", shape=None):
        """A numpy array over the region (needs numpy)."""
        import numpy as np
        a = np.frombuffer(self.view(), dtype=dtype)
        return a.reshape(shape) if shape is not None else a

    def pageout(self, offset=0, length=None):
        """Compress and drop the resident pages of a range; returns pages stored."""
        a, n = self._range(offset, length)
        return _check(_L.need("zs_region_pageout")(self._reg(), a, n), "zs_region_pageout")

    def release(self, offset=0, length=None):
        """Forget a range: stored objects freed, pages read as zeros afterwards."""
        a, n = self._range(offset, length)
        _check(_L.need("zs_region_release")(self._reg(), a, n), "zs_region_release")

    def advise(self, advice, offset=0, length=None):
        """advice: "cold" | "hot" | "pageout" (hints for automatic reclaim)."""
        a, n = self._range(offset, length)
        _check(_L.need("zs_region_advise")(self._reg(), a, n,
                                             _choice(advice, ADVICE, "advice")),
               "zs_region_advise")

    def reclaim(self, target):
        """Page out cold pages until at most target bytes are resident; pages stored."""
        return _check(_L.need("zs_region_reclaim")(self._reg(), target), "zs_region_reclaim")

    def stats(self):
        st = _L.RegionStatsC()
        _L.need("zs_region_get_stats")(self._reg(), ctypes.byref(st))
        d = {n: getattr(st, n) for n in _L.REGION_STAT_FIELDS}
        d["store"] = {n: getattr(st.store, n) for n in _L.ZRAM_STAT_FIELDS}
        d["lat_hist"] = list(st.lat_hist)
        pct = _L.need("zs_region_lat_percentile")
        d["fault_p50_ns"] = pct(st.lat_hist, 50.0)
        d["fault_p99_ns"] = pct(st.lat_hist, 99.0)
        d["uffd_move"] = bool(st.uffd_move)
        d["broken"] = bool(st.broken)
        return d
