"""
What a new user of the Python package ran into, one test each: sizes are checked before ctypes can
truncate them, a freed handle whose slot is reused raises instead of reading
another object, bad arguments raise what the README says, an unknown compressor
names the valid ones, backend_kinds() lists only backends a store accepts, a
closed pool says so, and a missing library fails at import.
"""
import errno
import os
import subprocess
import sys

import pytest

import libzs


def test_huge_size_refused_before_ctypes():
    with libzs.Pool() as p:
        for size in (2 ** 64 + 100, 2 ** 64, 2 ** 63, 4097, -1):
            with pytest.raises(ValueError) as e:
                p.malloc(size)
            assert isinstance(e.value, libzs.ZsError)
        assert len(p) == 0
        st = p.stats()
        assert st["object_bytes"] == 0 and st["utilization"] == 0.0
        with pytest.raises(libzs.ZsError) as e:
            p.malloc(4097)
        assert e.value.errno == errno.ENOSPC
        with pytest.raises(ValueError):
            p.class_index(2 ** 64 + 1)


def test_stale_handle_raises():
    with libzs.Pool() as p:
        h1 = p.store(b"first-A!")
        p.free(h1)
        h2 = p.store(b"other-B!")
        assert h2 != h1
        assert p.read(h2) == b"other-B!"
        with pytest.raises(libzs.ZsError) as e:
            p.read(h1)
        assert "stale" in str(e.value) or "not live" in str(e.value)
        with pytest.raises(ValueError):
            p.free(h1)
        with pytest.raises(ValueError):
            p.write(h1, b"x")
        assert p.read(h2) == b"other-B!"
        assert p.handles() == [h2]
        p.free(h2)


def test_bad_arguments_are_value_errors():
    # python/README.md: bad arguments raise ValueError/TypeError/IndexError before C is called.
    with libzs.Pool() as p:
        for bad in (0, 4097):
            with pytest.raises(ValueError):
                p.malloc(bad)
        with pytest.raises(TypeError):
            p.malloc("1")
    with pytest.raises(ValueError):
        libzs.Pool(chain=17)
    with pytest.raises(ValueError):
        libzs.ZramStore(slots=4, comp="gzip")
    with pytest.raises(ValueError):
        libzs.ZramStore(slots=4, backend="nope")
    with pytest.raises(ValueError):
        libzs.ZramStore(slots=2 ** 64)
    with pytest.raises(ValueError):
        libzs.Compressor("lz4", max_src=2 ** 64 + 4096)


def test_unknown_compressor_names_the_valid_ones():
    with pytest.raises(libzs.ZsError) as e:
        libzs.ZramStore(slots=4, comp="gzip")
    msg = str(e.value)
    assert "gzip" in msg and "lz4" in msg and "zstd" in msg
    with pytest.raises(libzs.ZsError) as e:
        libzs.Compressor("gzip")
    assert "lz4" in str(e.value)


def test_backend_kinds_are_usable():
    kinds = libzs.backend_kinds()
    assert "zsmalloc" in kinds
    assert set(kinds) <= set(libzs.backend_kinds(all=True))
    for k in kinds:
        with libzs.ZramStore(slots=4, backend=k) as z:
            z.write(0, b"a" * 4096)
            assert z.read(0) == b"a" * 4096


def test_closed_pool_says_closed():
    p = libzs.Pool()
    h = p.store(b"abc")
    p.close()
    for call in (lambda: p.read(h), lambda: p.free(h), lambda: p.write(h, b"x"),
                 lambda: p.malloc(10), lambda: p.stats(), lambda: p.compact()):
        with pytest.raises(ValueError) as e:
            call()
        assert "pool is closed" in str(e.value)
    z = libzs.ZramStore(slots=2)
    z.close()
    with pytest.raises(ValueError, match="store is closed"):
        z.read(0)


def test_missing_library_fails_at_import(tmp_path):
    env = dict(os.environ, LIBZS_LIBRARY=str(tmp_path / "no-libzs.so"))
    r = subprocess.run([sys.executable, "-c", "import libzs"], env=env, capture_output=True,
                       text=True)
    assert r.returncode != 0
    assert "LibraryNotFound" in r.stderr and "LIBZS_LIBRARY" in r.stderr


def test_every_method_of_a_closed_store_or_compressor_raises_value_error():
    # python/README.md: "a call after close() raises ValueError"; a second close() is a no-op
    z = libzs.ZramStore(slots=4)
    z.write(0, b"z" * 4096)
    z.close()
    z.close()
    calls = [lambda: z.write(0, bytes(4096)), lambda: z.read(0),
             lambda: z.read_into(0, bytearray(4096)), lambda: z.discard(0), z.reset, z.flush,
             z.compact, z.mark_idle, z.recompress, lambda: z.slot_info(0), z.stats, z.mm_stat,
             z.reset_mem_used_max, z.pool_config]
    for call in calls:
        with pytest.raises(ValueError, match="store is closed") as e:
            call()
        assert isinstance(e.value, libzs.ZsArgumentError) and e.value.errno == errno.EINVAL
    c = libzs.Compressor("lz4")
    comp = c.compress(b"a" * 1000)
    c.close()
    c.close()
    for call in (lambda: c.compress(b"a" * 1000), lambda: c.compressed_size(b"a"),
                 lambda: c.decompress(comp, 1000)):
        with pytest.raises(ValueError, match="compressor is closed") as e:
            call()
        assert isinstance(e.value, libzs.ZsArgumentError) and e.value.errno == errno.EINVAL


def test_store_index_errors_on_every_slot_method():
    # python/README.md: a slot index out of range in ZramStore is IndexError
    with libzs.ZramStore(slots=4) as z:
        for call in (lambda i: z.write(i, bytes(4096)), z.read,
                     lambda i: z.read_into(i, bytearray(4096)), z.discard, z.slot_info):
            for i in (4, -1, 2 ** 64):
                with pytest.raises(IndexError):
                    call(i)
        assert z.stats()["invalid_io"] == 0        # refused before C was called


@pytest.mark.skipif(not libzs.region_available()[0], reason="userfaultfd unavailable")
def test_region_errors_as_the_table_says():
    PAGE = 4096
    for kw in (dict(size=0), dict(size=8 * PAGE, handlers=65), dict(size=8 * PAGE,
                                                                      fault_around=257)):
        with pytest.raises(libzs.ZsArgumentError) as e:
            libzs.Region(**kw)
        assert e.value.errno == errno.EINVAL and "zs_region" in str(e.value)
    r = libzs.Region(8 * PAGE, handlers=64, fault_around=256)
    with pytest.raises(libzs.ZsArgumentError) as e:
        r.pageout(1, PAGE)                          # not page aligned: C's EINVAL
    assert e.value.errno == errno.EINVAL
    with pytest.raises(ValueError) as e:
        r.advise("lukewarm")
    assert "cold" in str(e.value)                   # names the valid ones
    r.close()
    r.close()
    # python/README.md: any method of a closed Region raises ValueError
    for call in (r.view, r.numpy, r.pageout, r.release, lambda: r.advise("cold"),
                 lambda: r.reclaim(0), r.stats, r.pool_config):
        with pytest.raises(ValueError, match="region is closed"):
            call()


def test_unknown_names_are_argument_errors_listing_the_choices():
    # python/README.md: an unknown profile or policy name (the message lists the valid ones)
    # is a ZsArgumentError (EINVAL), like every other bad argument value
    makers = [libzs.Pool, lambda **k: libzs.ZramStore(slots=4, **k)]
    if libzs.region_available()[0]:
        makers.append(lambda **k: libzs.Region(8 * 4096, **k))
    for kw, valid in ((dict(chain_policy="fastest"), libzs.CHAIN_POLICIES),
                      (dict(free_mode="none"), libzs.FREE_MODES),
                      (dict(profile="server"), libzs.PROFILES)):
        for make in makers:
            with pytest.raises(libzs.ZsArgumentError) as e:
                make(**kw)
            assert e.value.errno == errno.EINVAL
            assert all(name in str(e.value) for name in valid), (kw, str(e.value))
    with libzs.ZramStore(slots=4, recomp="zstd") as z:
        with pytest.raises(libzs.ZsArgumentError) as e:
            z.recompress("bogus")
        assert "huge_idle" in str(e.value)


def test_ints_that_ctypes_would_truncate_are_refused():
    # python/README.md: values are checked before ctypes could truncate them; a wrong type
    # is a TypeError (not ctypes.ArgumentError)
    with libzs.Pool() as p:
        for call in (p.class_info, p.class_stats):
            for bad in (2 ** 64, 2 ** 32, -(2 ** 31) - 1):    # not class 0 after truncation
                with pytest.raises(libzs.ZsArgumentError):
                    call(bad)
            with pytest.raises(TypeError):
                call("1")
            with pytest.raises(libzs.ZsArgumentError):   # in C's int, out of C's range
                call(p.class_count())
    if not libzs.region_available()[0]:
        return
    with libzs.Region(16 * 4096) as r:
        v = r.view()
        v[:] = b"a" * len(v)
        del v
        for bad in (2 ** 64 + 4096, -1):
            with pytest.raises(libzs.ZsArgumentError):
                r.reclaim(bad)
        with pytest.raises(TypeError):
            r.reclaim("1")
        assert r.stats()["stored"] == 0            # nothing was paged out
