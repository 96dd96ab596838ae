# Pool handles are the C library's handles: what a Python object costs
# beyond the C pool (RSS, measured from /proc/self/statm in a fresh interpreter), that the
# memory comes back, and that a freed or stale handle raises, refused by C's checked mode
# too, never reading another object.
import ctypes
import errno
import json
import subprocess
import sys
import textwrap

import pytest

import libzs
from libzs import _lib as L

ADDR = 0x0000_FFFF_FFFF_FFF8  # the slot address bits of a C handle (zsmalloc/internal.h)
N = 1_000_000


def _child(code, timeout=600):
    p = subprocess.run([sys.executable, "-c", textwrap.dedent(code)], capture_output=True,
                       text=True, timeout=timeout)
    assert p.returncode == 0, f"child exit {p.returncode}:\n{p.stdout}\n{p.stderr}"
    return json.loads(p.stdout.strip().splitlines()[-1])


def test_million_objects_cost_pool_pages_plus_72_bytes_and_come_back():
    # A fresh interpreter: this process's heap, reused by earlier tests, would hide growth.
    r = _child(f"""
        import gc, json, os
        import libzs
        page = os.sysconf("SC_PAGE_SIZE")
        def rss():
            with open("/proc/self/statm") as f:
                return int(f.read().split()[1]) * page
        pool = libzs.Pool()
        data = b"x" * 100
        gc.collect()
        r0 = rss()
        hs = [pool.store(data) for _ in range({N})]
        r1 = rss()
        pages = pool.total_pages() * pool.page_size
        n = len(pool)
        for h in hs[10:]:
            pool.free(h)
        hs = hs[:10]       # a new list: del hs[10:] would leave an 8 MB glibc block behind
        pool.compact()
        gc.collect()
        r2 = rss()
        ok = all(pool.read(h) == data for h in hs)
        print(json.dumps(dict(r0=r0, r1=r1, r2=r2, pages=pages, n=n, left=len(pool),
                              left_pages=pool.total_pages(), ok=ok)))
    """)
    assert r["n"] == N and r["left"] == 10 and r["ok"]
    beyond = (r["r1"] - r["r0"] - r["pages"]) / N
    print(f"{N} objects: RSS +{(r['r1'] - r['r0']) / 2**20:.1f} MiB, pool pages "
          f"{r['pages'] / 2**20:.1f} MiB, {beyond:.1f} B/object beyond them; after freeing "
          f"all but 10 and compacting {(r['r2'] - r['r0']) / 2**20:+.1f} MiB")
    # handle slot 8 + size table 8 + the caller's list (8 + a 32-byte int) = 56
    assert beyond <= 72
    assert r["left_pages"] <= 8
    assert r["r2"] - r["r0"] <= 16 << 20


def test_stale_handle_refused_by_c_and_raises():
    with libzs.Pool() as p:
        keep = p.store(b"neighbour")       # the zspage stays: only the slot is reused
        old = p.store(b"first-A!")
        p.free(old)
        new = p.store(b"other-B!")
        assert new & ADDR == old & ADDR    # the same C slot ...
        assert new != old                  # ... under another generation
        for call in (lambda: p.read(old), lambda: p.write(old, b"x"), lambda: p.free(old),
                     lambda: p.free(old, deferred=True), lambda: p.read(old, 1)):
            with pytest.raises(libzs.ZsArgumentError) as e:
                call()
            assert e.value.errno == errno.EINVAL and "stale" in str(e.value)
        # C itself refuses it (checked mode), whatever Python knows.
        buf = ctypes.create_string_buffer(8)
        assert not L.need("zs_obj_read_begin")(p._p, old, 8, buf)
        assert L.need("zs_obj_write")(p._p, old, b"xxxxxxxx", 8) == -errno.EINVAL
        assert L.need("zs_free")(p._p, old) == -errno.EINVAL
        assert L.need("zs_free_deferred")(p._p, old) == -errno.EINVAL
        assert p.read(new) == b"other-B!" and p.read(keep) == b"neighbour"
        assert sorted(p.handles()) == sorted([keep, new]) and len(p) == 2
        p.free(new)
        for h in (new, old):               # freed, slot not reused: not live
            with pytest.raises(libzs.ZsArgumentError):
                p.read(h)
            with pytest.raises(ValueError):
                p.free(h)
            assert L.need("zs_free")(p._p, h) == -errno.EINVAL
        p.free(keep)
        assert len(p) == 0 and p.total_pages() == 0


def test_deferred_free_then_reuse_is_stale():
    with libzs.Pool(deferred_worker=False) as p:
        keep = p.store(b"k" * 64)
        old = p.store(b"a" * 64)
        p.free(old, deferred=True)
        with pytest.raises(libzs.ZsArgumentError):   # queued: already not live
            p.read(old)
        p.flush()
        new = p.store(b"b" * 64)
        assert new & ADDR == old & ADDR and new != old
        with pytest.raises(libzs.ZsArgumentError, match="stale"):
            p.write(old, b"c" * 64)
        assert p.read(new) == b"b" * 64
        p.free(new)
        p.free(keep)


def test_handles_are_c_handles_with_the_documented_layout():
    # python/libzs keeps sizes by the C handle's slot: check the layout it assumes.
    with libzs.Pool() as p:
        hs = [p.malloc(1 + i % 300) for i in range(20000)]
        assert all(0 < h < 1 << 60 and not h & 1 for h in hs)
        slots = [h & ADDR for h in hs]
        assert len(set(slots)) == len(hs)
        assert all(s & 0xFFFF for s in slots)          # slot 0 of a chunk is never a handle
        # one thread carves its chunks in order: neighbours are 8 bytes apart
        assert sum(b - a == 8 for a, b in zip(slots, slots[1:])) >= len(hs) - 10
        assert sorted(p.handles()) == sorted(hs)
        assert p.stats()["object_bytes"] == sum(1 + i % 300 for i in range(20000))
        for i, h in enumerate(hs):
            if i % 2:
                p.free(h)
        assert len(p) == 10000 and sorted(p.handles()) == sorted(hs[::2])
        assert all(p.read(h, 0) == b"" for h in hs[::2])


def test_bad_handle_values_raise_before_ctypes():
    with libzs.Pool() as p:
        h = p.store(b"abc")
        for bad in (0, -1, 1 << 64, (1 << 64) + h, h | 1, h | (1 << 62), 12345):
            with pytest.raises(ValueError):
                p.read(bad)
            with pytest.raises(ValueError):
                p.free(bad)
        with pytest.raises(TypeError):
            p.read(float(h))
        assert p.read(h) == b"abc"


def test_checked_mode_cannot_be_turned_off():
    with pytest.raises(ValueError, match="checked"):
        libzs.Pool(checked=False)
    with libzs.Pool() as p:
        assert p.config["checked"] is True
