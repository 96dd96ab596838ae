# Buffers, close() and threads: no use of a Region, Pool, ZramStore or
# Compressor can crash the interpreter.  A memoryview or numpy array of a Region keeps
# close() (and a with block's end) from unmapping it: BufferError, as mmap.mmap does;
# where nothing can raise (a with block left by an exception, a Region dropped while
# views exist) the views keep the memory valid until they go.  Every use after close()
# raises ValueError.  Each scenario that could crash runs in a child interpreter, so a
# crash fails its test instead of killing pytest.
import os
import subprocess
import sys
import textwrap

import pytest

import libzs

PAGE = 4096
ok, why = libzs.region_available()
needs_uffd = pytest.mark.skipif(not ok, reason=f"userfaultfd unavailable: {why}")


def _run(code, timeout=60):
    """Run code in a child interpreter; fail on a crash (a signal) or a non-zero exit."""
    pre = "import gc, os, sys\nimport libzs\n"
    p = subprocess.run([sys.executable, "-c", pre + textwrap.dedent(code)],
                       capture_output=True, text=True, timeout=timeout)
    assert p.returncode >= 0, f"child died of signal {-p.returncode}:\n{p.stdout}\n{p.stderr}"
    assert p.returncode == 0, f"child exit {p.returncode}:\n{p.stdout}\n{p.stderr}"
    return p.stdout


def _have_numpy():
    try:
        import numpy  # noqa: F401
        return True
    except ImportError:
        return False


# -- a Region's buffers used after close() or after its with block: view, with, numpy --

@needs_uffd
def test_view_close_raises_buffererror_and_view_stays_valid():
    out = _run("""
        r = libzs.Region(1 << 20)
        v = r.view()
        v[4096] = 9
        s = v[4000:5000]              # a slice shares the view's buffer
        c = v.cast("B", (256, 4096))  # so does a cast
        try:
            r.close()
        except BufferError as e:
            print("BufferError", e)
        assert not r.closed
        assert v[4096] == 9 and s[96] == 9 and c[1, 0] == 9
        assert r.pageout() >= 1 and v[4096] == 9        # still fully usable
        del v, c
        try:
            r.close()                 # the slice still points into the region
        except BufferError:
            print("slice holds it")
        assert bytes(s[96:97]) == b"\\x09"
        s.release()
        r.close()                     # nothing left: closes
        assert r.closed
        r.close()                     # a second close does nothing
        print("closed")
    """)
    assert "BufferError" in out and "slice holds it" in out and "closed" in out


@needs_uffd
def test_view_release_lets_close_go():
    _run("""
        r = libzs.Region(1 << 20)
        v = r.view()
        v[0] = 1
        b = bytes(v[:16])             # a copy: does not hold the region
        v.release()
        r.close()
        assert b[0] == 1
    """)


@needs_uffd
def test_with_block_end_raises_buffererror_while_a_view_escapes():
    out = _run("""
        try:
            with libzs.Region(1 << 20) as r:
                v = r.view()
                v[0] = 1
        except BufferError:
            print("BufferError at the end of the block")
        print(v[0])                   # the region was not unmapped
        assert not r.closed
        del v
        r.close()
        assert r.closed
        with libzs.Region(1 << 20) as r:
            v = r.view()
            v[0] = 2
            del v                     # the documented way: views go before the block ends
        assert r.closed
    """)
    assert "BufferError at the end of the block" in out and out.split()[-1] == "1"


@needs_uffd
def test_with_block_left_by_an_exception_keeps_views_valid():
    _run("""
        def tasks():
            return len(os.listdir("/proc/self/task"))
        gc.disable()
        n0 = tasks()
        try:
            with libzs.Region(1 << 20) as r:
                v = r.view()
                v[0] = 5
                raise KeyError("mine")
        except KeyError as e:         # the block's own exception, not a BufferError
            assert e.args == ("mine",)
        assert r.closed
        try:
            r.pageout()
            raise SystemExit("pageout after close did not raise")
        except ValueError:
            pass
        assert v[0] == 5              # the mapping stays while the view does
        assert tasks() > n0           # (its fault-handler threads too)
        del v                         # the last view: the region is destroyed now
        assert tasks() == n0, (tasks(), n0)
    """)


@needs_uffd
@pytest.mark.skipif(not _have_numpy(), reason="numpy not installed")
def test_numpy_arrays_hold_the_region():
    out = _run("""
        import numpy as np
        r = libzs.Region(1 << 20)
        a = r.numpy("uint8")
        a[:] = 7
        try:
            r.close()
        except BufferError:
            print("BufferError")
        assert int(a.sum()) == 7 * (1 << 20)
        b = a[4096:8192]              # a numpy view of the array
        del a
        try:
            r.close()
        except BufferError:
            print("slice holds it")
        assert int(b.sum()) == 7 * 4096
        del b
        f = np.frombuffer(r.view(), dtype="float64")   # an array built on a view
        try:
            r.close()
        except BufferError:
            print("frombuffer holds it")
        f2 = r.numpy("float32", shape=(256, 1024))
        del f
        try:
            r.close()
        except BufferError:
            print("reshaped holds it")
        del f2
        r.close()
        assert r.closed
        print("closed")
    """)
    assert out.split() == ["BufferError", "slice", "holds", "it", "frombuffer", "holds", "it",
                           "reshaped", "holds", "it", "closed"]


@needs_uffd
def test_dropped_regions_are_freed_threads_flat():
    _run("""
        def tasks():
            return len(os.listdir("/proc/self/task"))
        gc.disable()                  # freed by reference counting, not by a gc pass
        n0 = tasks()
        for i in range(200):
            r = libzs.Region(1 << 20)
            v = r.view(); v[0] = 1
            del v, r
            assert tasks() == n0, (i, tasks(), n0)
        # a Region dropped while a view exists: the view keeps the memory, then frees it
        r = libzs.Region(1 << 20)
        v = r.view(); v[7] = 3
        del r
        assert v[7] == 3 and tasks() > n0
        del v
        assert tasks() == n0, (tasks(), n0)
    """)


@needs_uffd
def test_region_close_while_another_thread_calls():
    _run("""
        import threading
        errs = []
        for _ in range(20):
            r = libzs.Region(64 * 4096)
            v = r.view(); v[:] = b"\\x01" * len(v); del v
            def worker():
                try:
                    while True:
                        r.pageout(); r.stats(); r.release(0, 4096)
                except ValueError:
                    pass                  # closed under us: the only allowed outcome
                except Exception as e:
                    errs.append(repr(e))
            t = threading.Thread(target=worker); t.start()
            r.close()
            t.join()
        assert not errs, errs
    """)


# -- use after close: ValueError, never a crash --

def _all_raise_value_error(calls):
    for name, fn in calls:
        with pytest.raises(ValueError):
            fn()
            pytest.fail(f"{name} after close did not raise")


def test_pool_use_after_close():
    p = libzs.Pool()
    h = p.store(b"abc")
    p.close()
    p.close()
    _all_raise_value_error([
        ("malloc", lambda: p.malloc(8)), ("free", lambda: p.free(h)),
        ("read", lambda: p.read(h)), ("write", lambda: p.write(h, b"x")),
        ("store", lambda: p.store(b"x")), ("compact", p.compact),
        ("total_pages", p.total_pages), ("trim", p.trim), ("stats", p.stats),
        ("class_count", p.class_count), ("class_info", p.class_info),
        ("class_stats", p.class_stats), ("page_size", lambda: p.page_size),
        ("flush", p.flush), ("huge_class_size", p.huge_class_size),
        ("class_index", lambda: p.class_index(8)),
    ])
    assert p.handles() == [] and len(p) == 0


def test_zram_use_after_close():
    z = libzs.ZramStore(slots=4)
    z.write(0, b"\x01" * PAGE)
    z.close()
    z.close()
    _all_raise_value_error([
        ("write", lambda: z.write(0, b"\x01" * PAGE)), ("read", lambda: z.read(0)),
        ("discard", lambda: z.discard(0)), ("reset", z.reset), ("flush", z.flush),
        ("compact", z.compact), ("mark_idle", z.mark_idle), ("recompress", z.recompress),
        ("slot_info", lambda: z.slot_info(0)), ("stats", z.stats), ("mm_stat", z.mm_stat),
        ("reset_mem_used_max", z.reset_mem_used_max),
    ])


def test_compressor_use_after_close():
    c = libzs.Compressor("lz4")
    blob = c.compress(b"a" * 1000)
    c.close()
    c.close()
    _all_raise_value_error([
        ("compress", lambda: c.compress(b"a")),
        ("compressed_size", lambda: c.compressed_size(b"a")),
        ("decompress", lambda: c.decompress(blob, 1000)),
    ])


@needs_uffd
def test_region_use_after_close():
    r = libzs.Region(8 * PAGE)
    r.close()
    r.close()
    assert r.closed
    calls = [("view", r.view), ("pageout", r.pageout), ("release", r.release),
             ("advise", lambda: r.advise("cold")), ("reclaim", lambda: r.reclaim(0)),
             ("stats", r.stats)]
    if _have_numpy():
        calls.append(("numpy", r.numpy))
    _all_raise_value_error(calls)


# -- threads --

def test_pool_threads_no_errors():
    # threads storing and freeing on one Pool (Pool.free once updated its table after a
    # C call that releases the GIL), plus handles()/stats() walking the
    # handle table while other threads change it
    out = _run("""
        import threading, time
        sys.setswitchinterval(1e-6)
        pool = libzs.Pool()
        errors, ops = [], [0] * 4
        stop = time.monotonic() + 3
        def worker(k):
            n = 0
            while time.monotonic() < stop and not errors:
                data = f"{k}:{n}".encode() * 3
                try:
                    h = pool.store(data)
                    if pool.read(h) != data:
                        errors.append(f"thread {k}: read another object's bytes")
                    pool.free(h)
                    if k == 0 and n % 16 == 0:
                        pool.handles(); pool.stats(); len(pool)
                except Exception as e:
                    errors.append(f"thread {k} op {n}: {type(e).__name__}: {e}")
                n += 1
            ops[k] = n
        ts = [threading.Thread(target=worker, args=(k,)) for k in range(4)]
        for t in ts: t.start()
        for t in ts: t.join()
        print(f"ops {sum(ops)} errors {len(errors)}" + (f": {errors[0]}" if errors else ""))
        assert len(pool) == 0
    """)
    assert "errors 0" in out, out


def test_zram_threads_read_their_own_pages_and_close_waits():
    _run("""
        import threading, time
        sys.setswitchinterval(1e-6)
        z = libzs.ZramStore(slots=64)
        errors = []
        stop = time.monotonic() + 2
        def worker(k):
            n = 0
            while time.monotonic() < stop and not errors:
                i = k * 16 + n % 16
                page = bytes([k + 1, n % 251]) * (4096 // 2)
                z.write(i, page)
                if z.read(i) != page:
                    errors.append(f"thread {k}: slot {i} read other bytes")
                n += 1
        ts = [threading.Thread(target=worker, args=(k,)) for k in range(4)]
        for t in ts: t.start()
        for t in ts: t.join()
        assert not errors, errors[0]
        # close() while threads are inside calls: they see ValueError, nothing crashes
        for _ in range(10):
            z = libzs.ZramStore(slots=8)
            def user():
                try:
                    while True:
                        z.write(1, b"\\x02" * 4096); z.read(1); z.stats()
                except ValueError:
                    pass
                except Exception as e:
                    errors.append(repr(e))
            ts = [threading.Thread(target=user) for _ in range(2)]
            for t in ts: t.start()
            time.sleep(0.01)
            z.close()
            for t in ts: t.join()
        assert not errors, errors
    """)
