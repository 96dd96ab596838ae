# Region bindings: a writable memoryview over compressible memory that
# survives pageout byte for byte, RSS accounting through stats, release,
# numpy arrays where numpy is installed, and clean errors.  Skipped where
# userfaultfd is not permitted (the reason is printed).
import os
import random

import pytest

import libzs

PAGE = 4096
ok, why = libzs.region_available()
pytestmark = pytest.mark.skipif(not ok, reason=f"userfaultfd unavailable: {why}")


def _pages(n, seed):
    rnd = random.Random(seed)
    out = []
    for i in range(n):
        kind = i % 4
        if kind == 0:
            out.append(bytes([i % 251]) * PAGE)                      # same-filled
        elif kind == 1:
            out.append(rnd.randbytes(PAGE))                          # incompressible
        else:
            words = [rnd.choice([b"alpha ", b"beta ", b"gamma\n", b"0123 "]) for _ in range(900)]
            out.append((b"".join(words) * 2)[:PAGE])                 # text-like
    return out


def test_memoryview_roundtrip_through_pageout():
    n = 256
    pages = _pages(n, seed=11)
    with libzs.Region(n * PAGE, fault_around=8) as r:
        mv = r.view()
        assert mv.readonly is False and len(mv) == n * PAGE
        for i, p in enumerate(pages):
            mv[i * PAGE:(i + 1) * PAGE] = p
        assert r.pageout() == n
        st = r.stats()
        assert st["resident"] == 0 and st["stored"] == n
        assert st["store"]["same_pages"] == n // 4
        assert st["store"]["huge_pages"] >= n // 4 - 2
        assert st["store"]["mem_used_total"] < n * PAGE
        # random-order reads fault the pages back
        order = list(range(n))
        random.Random(3).shuffle(order)
        for i in order:
            assert mv[i * PAGE:(i + 1) * PAGE] == pages[i], i
        st = r.stats()
        # counters of the last fault may land just after it returns
        assert st["faults"] > 0 and n - 8 <= st["pages_in"] <= n
        assert st["fault_p50_ns"] > 0
        del mv


def test_partial_pageout_release_and_writes_after():
    with libzs.Region(64 * PAGE) as r:
        mv = r.view()
        mv[:] = b"\x5a" * (64 * PAGE)
        assert r.pageout(16 * PAGE, 16 * PAGE) == 16
        mv[20 * PAGE + 7] = 1                    # write to a stored page
        r.release(32 * PAGE, 32 * PAGE)          # forget the second half
        assert mv[20 * PAGE + 7] == 1 and mv[20 * PAGE + 8] == 0x5a
        assert bytes(mv[32 * PAGE:33 * PAGE]) == bytes(PAGE)
        st = r.stats()
        assert st["stored"] == 15 and st["store"]["pages_stored"] == 15
        del mv


def test_numpy_array():
    np = pytest.importorskip("numpy")
    with libzs.Region(1 << 20) as r:
        a = r.numpy("float64")
        a[:] = np.arange(a.size, dtype="float64")
        r.pageout()
        assert r.stats()["resident"] == 0
        assert float(a.sum()) == float(a.size * (a.size - 1) / 2)
        del a


def test_bad_arguments():
    with pytest.raises(ValueError):
        libzs.Region(0)
    with libzs.Region(8 * PAGE) as r:
        with pytest.raises(ValueError):
            r.pageout(1, PAGE)
        with pytest.raises(ValueError):
            r.release(0, 9 * PAGE)
        with pytest.raises(ValueError):
            r.advise("lukewarm")
    with pytest.raises(libzs.ZsError):
        libzs.Region(8 * PAGE, comp="nope")
    r.close()
    with pytest.raises(ValueError):
        r.stats()


@pytest.mark.skipif(os.geteuid() != 0, reason="needs root to drop privileges")
def test_unprivileged_error_names_the_fix():
    pid = os.fork()
    if pid == 0:
        code = 1
        try:
            os.setgid(65534)
            os.setuid(65534)
            try:
                libzs.Region(PAGE).close()
                code = 0                              # unprivileged uffd allowed here
            except libzs.ZsError as e:
                code = 0 if "vm.unprivileged_userfaultfd" in str(e) else 1
        finally:
            os._exit(code)
    _, status = os.waitpid(pid, 0)
    assert os.WIFEXITED(status) and os.WEXITSTATUS(status) == 0


def test_madvise_dontneed_is_counted_and_reads_zeros():
    import ctypes
    libc = ctypes.CDLL(None, use_errno=True)
    libc.madvise.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int]
    MADV_DONTNEED = 4
    with libzs.Region(16 * PAGE) as r:
        mv = r.view()
        mv[:] = b"\x33" * (16 * PAGE)
        assert r.pageout(8 * PAGE, 8 * PAGE) == 8
        assert libc.madvise(r.addr, 2 * PAGE, MADV_DONTNEED) == 0          # resident pages
        assert libc.madvise(r.addr + 8 * PAGE, 2 * PAGE, MADV_DONTNEED) == 0  # stored pages
        st = r.stats()              # stats see every event whose madvise has returned
        assert st["removed"] == 4 and st["stored"] == 6 and st["store"]["pages_stored"] == 6
        assert bytes(mv[0:2 * PAGE]) == bytes(2 * PAGE)
        assert bytes(mv[8 * PAGE:10 * PAGE]) == bytes(2 * PAGE)
        assert mv[2 * PAGE] == 0x33 and mv[10 * PAGE] == 0x33 and mv[15 * PAGE] == 0x33
        st = r.stats()
        assert st["sigbus_pages"] == 0 and st["read_errors"] == 0
        del mv
