# Filters for typed data (filter="shuffle:4" etc.) through ZramStore and Region:
# every page kind of the report corpus round-trips under every filter, a bad
# spec is refused with ZsArgumentError (EINVAL) naming the filter, and the int32
# array (small values plus a slow trend) stores in <= 1/1.45 of plain zstd's pool memory.
import errno

import pytest

import libzs
from libzs import corpus

FILTERS = ["none", "shuffle:2", "shuffle:4", "shuffle:8", "delta:2", "delta:4", "delta:8",
           "delta+shuffle:2", "delta+shuffle:4", "delta+shuffle:8"]
BAD = ["shuffle:3", "shuffle", "delta:16", "bitshuffle:4", "shuffle:4 ", "delta+shuffle"]


def _int32_trend(n):
    """The array of `zs zram --synth int32-trend` (tools/cmd_zram.c): i // 4096 plus the
    top 6 bits of splitmix64(i), as little-endian int32; pure Python (no numpy needed)."""
    m = (1 << 64) - 1
    out = bytearray(4 * n)
    for i in range(n):
        z = (i * 0x9E3779B97F4A7C15) & m
        z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & m
        z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & m
        z ^= z >> 31
        out[4 * i:4 * i + 4] = (i // 4096 + (z >> 58)).to_bytes(4, "little")
    return bytes(out)


@pytest.mark.parametrize("filt", FILTERS)
@pytest.mark.parametrize("comp", ["lz4", "zstd"])
def test_corpus_roundtrip(filt, comp):
    pages, kinds = corpus.generate(npages=300, seed=21)
    assert set(kinds) >= {"text", "records", "heap", "sparse", "same", "random", "mixed"}
    typed = _int32_trend(4 * 1024)  # 4 typed pages
    pages += [typed[i:i + 4096] for i in range(0, len(typed), 4096)]
    with libzs.ZramStore(slots=len(pages), comp=comp, filter=filt) as z:
        for i, p in enumerate(pages):
            z.write(i, p)
        bad = sum(z.read(i) != p for i, p in enumerate(pages))
        st = z.stats()
    assert bad == 0
    # same-filled pages are found on the raw page, filter or not
    assert st["same_pages"] == sum(1 for k in kinds if k == "same")


def test_group_and_recompress_roundtrip():
    pages, _ = corpus.generate(npages=128, seed=5)
    with libzs.ZramStore(slots=len(pages), comp="lz4", recomp="zstd", group_pages=4,
                         filter="shuffle:4") as z:
        for i, p in enumerate(pages):
            z.write(i, p)
        z.recompress()
        assert all(z.read(i) == p for i, p in enumerate(pages))


@pytest.mark.parametrize("spec", BAD)
def test_bad_filter_refused(spec):
    with pytest.raises(libzs.ZsArgumentError) as e:
        libzs.ZramStore(slots=4, filter=spec)
    assert e.value.errno == errno.EINVAL
    assert "filter" in str(e.value)


def test_filter_type():
    with pytest.raises(TypeError):
        libzs.ZramStore(slots=4, filter=4)


def _int32_trend_np(n):
    """_int32_trend with numpy (the python/README.md example's array)."""
    np = pytest.importorskip("numpy")
    i = np.arange(n, dtype=np.uint64)
    with np.errstate(over="ignore"):
        z = i * np.uint64(0x9E3779B97F4A7C15)
        z = (z ^ (z >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
        z = (z ^ (z >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
    z ^= z >> np.uint64(31)
    return (i // np.uint64(4096) + (z >> np.uint64(58))).astype("<i4")


def test_numpy_matches_tool_generator():
    assert _int32_trend_np(5000).tobytes() == _int32_trend(5000)


def test_int32_trend_density():
    # 32 MiB, as `zs zram --synth int32-trend --max 32M`
    data = _int32_trend_np(8192 * 1024).tobytes()
    mem = {}
    for filt in (None, "shuffle:4"):
        with libzs.ZramStore(slots=8192, comp="zstd", filter=filt, profile="kernel") as z:
            for i in range(8192):
                z.write(i, data[i * 4096:(i + 1) * 4096])
            mem[filt] = z.stats()["mem_used_total"]
            assert z.read(777) == data[777 * 4096:778 * 4096]
    assert mem["shuffle:4"] * 1.45 <= mem[None], mem


ok, why = libzs.region_available()


@pytest.mark.skipif(not ok, reason=f"userfaultfd unavailable: {why}")
def test_region_filter():
    size = 64 * 4096
    data = _int32_trend(size // 4)
    with libzs.Region(size, comp="zstd", filter="shuffle:4") as r:
        v = r.view()
        v[:] = data
        r.pageout()
        assert r.stats()["store"]["pages_stored"] > 0
        assert bytes(v) == data
        del v
    with pytest.raises(libzs.ZsArgumentError) as e:
        libzs.Region(size, filter="shuffle:5")
    assert e.value.errno == errno.EINVAL and "filter" in str(e.value)
