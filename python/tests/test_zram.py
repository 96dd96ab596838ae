# ZramStore and Compressor bindings: round trips on every backend and
# compressor, same-filled/huge pages, mm_stat, memory limit, bad input.
import errno
import os
import random

import pytest

import libzs
from libzs import corpus

PAGE = 4096


@pytest.fixture(scope="module")
def pages():
    return corpus.generate(200, seed=7)[0]


@pytest.mark.parametrize("backend", libzs.backend_kinds())
def test_store_roundtrip_backends(backend, pages):
    try:
        store = libzs.ZramStore(slots=len(pages), backend=backend)
    except libzs.ZsError as e:
        # jemalloc cannot be dlopen'ed into Python (initial-exec TLS); the C tests cover it.
        if backend == "jemalloc" and e.errno in (errno.ENOTSUP, errno.EOPNOTSUPP):
            pytest.skip("jemalloc is not loadable in this process: " + str(e))
        raise
    with store as z:
        for i, p in enumerate(pages):
            z.write(i, p)
        for i, p in enumerate(pages):
            assert z.read(i) == p
        mm = z.mm_stat()
        assert list(mm) == ["orig_data_size", "compr_data_size", "mem_used_total", "mem_limit",
                            "mem_used_max", "same_pages", "pages_compacted", "huge_pages",
                            "huge_pages_since"]
        assert mm["orig_data_size"] == len(pages) * PAGE
        assert mm["same_pages"] == sum(1 for p in pages if p == p[:8] * (PAGE // 8))


@pytest.mark.parametrize("comp", ["lz4", "lz4hc", "zstd", "zstd:1", "lzo"])
def test_store_compressors(comp, pages):
    with libzs.ZramStore(slots=64, comp=comp) as z:
        for i in range(64):
            z.write(i, pages[i])
        assert all(z.read(i) == pages[i] for i in range(64))
        assert z.comp.startswith(comp.split(":")[0])


def test_same_huge_discard_compact():
    rng = random.Random(3)
    with libzs.ZramStore(slots=300) as z:
        z.write(0, bytes(PAGE))
        z.write(1, rng.randbytes(PAGE))
        info0, info1 = z.slot_info(0), z.slot_info(1)
        assert info0["same"] and not info0["huge"]
        assert info1["huge"]
        for i in range(2, 300):
            z.write(i, rng.randbytes(1500) + bytes(PAGE - 1500))
        for i in range(2, 300, 2):
            z.discard(i)
        assert z.read(2) == bytes(PAGE)
        assert z.compact() >= 0
        for i in range(3, 300, 2):
            assert len(z.read(i)) == PAGE
        st = z.stats()
        assert st["notify_free"] >= 149 and st["num_writes"] >= 300
        z.reset()
        assert z.mm_stat()["orig_data_size"] == 0


def test_mem_limit_keeps_old_contents():
    rng = random.Random(5)
    with libzs.ZramStore(slots=64, mem_limit=8 * PAGE) as z:
        stored = {}
        with pytest.raises(libzs.ZsError) as e:
            for i in range(64):
                p = rng.randbytes(PAGE)
                z.write(i, p)
                stored[i] = p
        assert e.value.errno == errno.ENOMEM
        for i, p in stored.items():
            assert z.read(i) == p


def test_store_bad_input():
    with pytest.raises(ValueError):
        libzs.ZramStore()                       # neither slots nor disksize
    with pytest.raises(ValueError):
        libzs.ZramStore(slots=0)
    with pytest.raises(libzs.ZsError):
        libzs.ZramStore(slots=4, comp="nope")
    with pytest.raises(libzs.ZsError):
        libzs.ZramStore(slots=4, backend="nope")
    with pytest.raises(TypeError):
        libzs.ZramStore(slots=4, comp=3)
    with libzs.ZramStore(slots=4) as z:
        with pytest.raises(IndexError):
            z.write(4, bytes(PAGE))
        with pytest.raises(IndexError):
            z.read(-1)
        with pytest.raises(ValueError):
            z.write(0, b"short")
        with pytest.raises(TypeError):
            z.write("0", bytes(PAGE))
        with pytest.raises(libzs.ZsError):
            z.recompress()                      # no secondary configured
        assert z.read(3) == bytes(PAGE)         # never written: zeros


def test_recompress():
    rng = random.Random(9)
    with libzs.ZramStore(slots=32, comp="lz4", recomp="zstd") as z:
        for i in range(32):
            z.write(i, (rng.choice([b"abcd", b"wxyz"]) * 300 + rng.randbytes(2000))[:PAGE].ljust(PAGE, b"\0"))
        r = z.recompress("all")
        assert r["scanned"] >= 1
        for i in range(32):
            assert len(z.read(i)) == PAGE


def test_compressor():
    data = b"hello world " * 300
    for name in ("lz4", "zstd", "lzo", "lz4hc:4"):
        with libzs.Compressor(name) as c:
            comp = c.compress(data)
            assert len(comp) < len(data)
            assert c.compressed_size(data) == len(comp)
            assert c.decompress(comp, len(data)) == data
            with pytest.raises(libzs.ZsError):
                c.decompress(b"\xff" * 20, len(data))
    with pytest.raises(libzs.ZsError):
        libzs.Compressor("lzo-rle")
    with pytest.raises(libzs.ZsError):
        libzs.Compressor("bogus")
    with libzs.Compressor("lz4", max_src=4096) as c:
        with pytest.raises(ValueError):
            c.compress(bytes(8192))
