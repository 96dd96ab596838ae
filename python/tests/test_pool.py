# Pool bindings: round trips, config policies, compaction, stats, class
# introspection, and bad input raising exceptions (never crashing).
import errno
import random

import pytest

import libzs


def test_roundtrip_many_sizes():
    rng = random.Random(1)
    with libzs.Pool() as p:
        objs = {}
        for _ in range(2000):
            n = rng.randint(1, 4096)
            data = rng.randbytes(n)
            objs[p.store(data)] = data
        for h, data in objs.items():
            assert p.read(h) == data
        assert len(p) == 2000
        st = p.stats()
        assert st["objects"] == 2000 and st["pages"] == p.total_pages() > 0
        assert 0 < st["utilization"] <= 1
        for h in list(objs):
            p.free(h)
        assert p.total_pages() == 0


def test_partial_read_write():
    with libzs.Pool() as p:
        h = p.malloc(300)
        p.write(h, b"abc")
        assert p.read(h, 3) == b"abc"
        assert p.read(h, 0) == b""


@pytest.mark.parametrize("policy", ["exhaustive", "heuristic"])
@pytest.mark.parametrize("page_size,delta", [(4096, 0), (16384, 0), (16384, 16), (65536, 16)])
def test_configs(policy, page_size, delta):
    with libzs.Pool(page_size=page_size, chain=8, delta=delta, chain_policy=policy) as p:
        assert p.page_size == page_size
        h = p.store(b"x" * (page_size // 3))
        assert p.read(h) == b"x" * (page_size // 3)
        infos = p.class_info()
        assert len(infos) == p.class_count() > 0
        assert infos[0].size == 32
        if delta:
            assert infos[1].size - infos[0].size == delta
        assert all(1 <= i.pages_per_zspage <= 8 for i in infos)
        assert p.huge_class_size() <= page_size


def test_seed_class_row_16k():
    # seed 002: 16K pages, chain 8, delta 16 -> size 1072 is its own class, 4 pages, 61 objects
    with libzs.Pool(page_size=16384, chain=8, delta=16) as p:
        ci = p.class_info(p.class_index(1072 - 8))  # class lookup adds no header: ask for the slot
        assert (ci.phys_size, ci.pages_per_zspage, ci.objs_per_zspage) == (1072, 4, 61)


@pytest.mark.parametrize("mode", ["pool", "class", "class-unlocked"])
def test_free_modes_and_deferred(mode):
    with libzs.Pool(free_mode=mode) as p:
        hs = [p.store(bytes([i % 256]) * 700) for i in range(500)]
        for h in hs[:250]:
            p.free(h)
        for h in hs[250:]:
            p.free(h, deferred=True)
        p.flush()
        assert p.total_pages() == 0


def test_compact_frees_pages():
    with libzs.Pool() as p:
        hs = [p.store(b"y" * 1000) for _ in range(4000)]
        before = p.total_pages()
        for h in hs[::2]:
            p.free(h)
        freed = p.compact()
        assert freed > 0
        assert p.total_pages() < before
        assert p.stats()["pages_compacted"] >= freed
        for h in hs[1::2]:
            assert p.read(h) == b"y" * 1000


def test_class_stats():
    with libzs.Pool() as p:
        for _ in range(100):
            p.store(b"z" * 200)
        st = p.class_stats()
        assert sum(s.obj_used for s in st) == 100
        assert all(len(s.fullness) == 12 for s in st)
        one = p.class_stats(st[0].index)
        assert one.obj_used == st[0].obj_used


def test_class_index_errors():
    # README "Errors": an index outside 0..count-1 is EINVAL (class_info and class_stats
    # alike); a logical class merged into another is ENOENT for class_stats only.
    with libzs.Pool() as p:
        n = p.class_count()
        for bad in (-1, n):
            for call in (p.class_info, p.class_stats):
                with pytest.raises(libzs.ZsError) as e:
                    call(bad)
                assert e.value.errno == errno.EINVAL
        merged = next(ci for ci in p.class_info() if ci.phys_index != ci.index)
        with pytest.raises(libzs.ZsError) as e:
            p.class_stats(merged.index)
        assert e.value.errno == errno.ENOENT
        assert p.class_stats(merged.phys_index).index == merged.phys_index


def test_max_pages_limit():
    with libzs.Pool(max_pages=4) as p:
        with pytest.raises(libzs.ZsError) as e:
            for _ in range(100):
                p.store(b"q" * 4000)
        assert e.value.errno == errno.ENOMEM


@pytest.mark.parametrize("kw", [dict(page_size=1000), dict(page_size=3 * 4096),
                                dict(chain=0 - 1), dict(chain=17), dict(delta=12),
                                dict(chain_policy="fastest"), dict(free_mode="none"),
                                dict(page_size="4K")])
def test_bad_config(kw):
    with pytest.raises((ValueError, libzs.ZsError)):
        libzs.Pool(**kw)


def test_bad_handles_and_sizes():
    with libzs.Pool() as p:
        with pytest.raises(libzs.ZsError):
            p.malloc(0)
        with pytest.raises(libzs.ZsError) as e:
            p.malloc(4097)
        assert e.value.errno == errno.ENOSPC
        with pytest.raises(TypeError):
            p.malloc("10")
        h = p.malloc(10)
        with pytest.raises(ValueError):
            p.write(h, b"x" * 11)
        with pytest.raises(TypeError):
            p.write(h, "text")
        with pytest.raises(ValueError):
            p.read(h, 11)
        p.free(h)
        for bad in (h, 12345, 0):
            with pytest.raises(libzs.ZsError):
                p.free(bad)
            with pytest.raises(libzs.ZsError):
                p.read(bad)
        with pytest.raises(TypeError):
            p.free("h")
    with pytest.raises(ValueError):
        p.malloc(10)          # closed pool


def test_handle_from_other_pool():
    with libzs.Pool() as a, libzs.Pool() as b:
        h = a.store(b"abc")
        with pytest.raises(libzs.ZsError):
            b.read(h)
        with pytest.raises(libzs.ZsError):
            b.free(h)
        assert a.read(h) == b"abc"


def test_library_info():
    assert "zsmalloc" in libzs.backend_kinds()
    assert "lz4" in libzs.compressor_names()
    assert libzs.library_path().endswith(".so") or "libzs" in libzs.library_path()


def test_class_shards():
    # Copies of the size classes: objects round-trip, stats sum the copies, range is C's.
    rng = random.Random(7)
    with libzs.Pool(class_shards=4, free_mode="class-unlocked") as p:
        objs = {}
        for _ in range(500):
            data = rng.randbytes(rng.randint(1, 3000))
            objs[p.store(data)] = data
        for h, data in objs.items():
            assert p.read(h) == data
        for h in objs:
            p.free(h)
    for bad in (65, 10**6):
        with pytest.raises(libzs.ZsError) as e:
            libzs.Pool(class_shards=bad)
        assert e.value.errno == errno.EINVAL
    with pytest.raises(ValueError):
        libzs.Pool(class_shards=-1)
    with libzs.Pool(class_shards="auto") as p:  # one per online CPU: stores like any pool
        h = p.store(b"x" * 100)
        assert p.read(h) == b"x" * 100
