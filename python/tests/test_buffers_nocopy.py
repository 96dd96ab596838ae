# Reads into caller buffers and writes from any bytes-like object without a
# Python-side copy; the C library, not Python, validates
# configs and its reason reaches the exception; constants come from C.
import array
import ctypes
import errno
import random

import pytest

import libzs
from libzs import _lib as L

SEED = 22006
print("seed", SEED)


def test_pool_read_into_every_size_and_kind_of_buffer():
    rng = random.Random(SEED)
    with libzs.Pool() as p:
        ps = p.page_size
        for size in [1, 31, 32, 100, 2047, 3000, ps - 1, ps] + [rng.randrange(1, ps) for _ in
                                                                   range(200)]:
            data = bytes(rng.randrange(256) for _ in range(size))
            h = p.store(data)
            buf = bytearray(size + 7)
            assert p.read_into(h, buf) == size
            assert bytes(buf[:size]) == data and bytes(buf[size:]) == bytes(7)
            mv = memoryview(bytearray(size))
            assert p.read_into(h, mv) == size and mv.tobytes() == data
            part = bytearray(size)
            assert p.read_into(h, part, size // 2) == size // 2
            assert bytes(part[:size // 2]) == data[:size // 2]
            p.free(h)


def test_pool_read_into_refusals():
    with libzs.Pool() as p:
        h = p.store(b"y" * 100)
        with pytest.raises(ValueError):
            p.read_into(h, bytearray(99))          # shorter than the object
        with pytest.raises((TypeError, BufferError)):
            p.read_into(h, b"\0" * 100)             # read-only
        with pytest.raises(ValueError):
            p.read_into(h, bytearray(200), 101)     # longer than the object
        p.free(h)
        with pytest.raises(libzs.ZsArgumentError):
            p.read_into(h, bytearray(100))          # freed


def test_write_accepts_any_buffer_in_place():
    a = array.array("i", range(25))                  # 100 bytes, itemsize 4
    with libzs.Pool() as p:
        for src in (bytes(a), bytearray(a), memoryview(a), memoryview(bytes(a))[0:100], a,
                    (ctypes.c_char * 100).from_buffer_copy(bytes(a))):
            h = p.store(src)
            assert p.read(h) == bytes(a)
            p.write(h, memoryview(bytearray(b"z" * 50)))
            assert p.read(h, 50) == b"z" * 50
            p.free(h)
        # a non-contiguous view is copied once, then written
        stride = memoryview(bytearray(range(200)))[::2]
        h = p.store(stride)
        assert p.read(h) == bytes(range(0, 200, 2))
        with pytest.raises(TypeError):
            p.store("text")


def test_strided_numpy_slice_is_copied_once():
    """A strided numpy slice (numpy refuses it a contiguous buffer with ValueError, where
    memoryview says BufferError) is copied once and stored, compressed or written."""
    np = pytest.importorskip("numpy")
    a = np.arange(400, dtype=np.uint8)[::2]
    assert not a.flags["C_CONTIGUOUS"]
    want = a.tobytes()
    with libzs.Pool() as p:
        h = p.store(a)
        assert p.read(h) == want
        p.write(h, a[::-1])
        assert p.read(h) == a[::-1].tobytes()
    with libzs.Compressor("lz4") as c:
        assert c.decompress(c.compress(a), len(want)) == want
    with libzs.CompressedDict() as d:
        d["a"] = a
        assert d["a"] == want
    with libzs.ZramStore(slots=2) as z:
        page = np.zeros(z.page_size * 2, dtype=np.uint8)[::2]
        page[:3] = 7
        z.write(0, page)
        assert z.read(0) == page.tobytes()


def test_zram_read_into_and_write_views():
    with libzs.ZramStore(slots=8) as z:
        ps = z.page_size
        page = bytearray(random.Random(SEED).randbytes(ps // 2) + bytes(ps // 2))
        z.write(3, memoryview(page))
        out = bytearray(ps + 16)
        assert z.read_into(3, out) == ps
        assert out[:ps] == page
        with pytest.raises(ValueError):
            z.read_into(3, bytearray(ps - 1))
        with pytest.raises(ValueError):
            z.write(4, memoryview(page)[1:])


@pytest.mark.parametrize("kwargs,errno_,says", [
    (dict(slots=4, page_size=1000), errno.EINVAL, "page_size 1000"),
    (dict(slots=4, delta=8192), errno.EINVAL, "delta=8192"),
    (dict(slots=4, backend="nope"), errno.EINVAL, 'kind "nope"'),
    (dict(slots=0), errno.EINVAL, "no slot"),
    (dict(disksize=100), errno.EINVAL, "disksize 100"),
])
def test_zram_config_refused_by_c(kwargs, errno_, says):
    with pytest.raises(libzs.ZsArgumentError) as e:
        libzs.ZramStore(**kwargs)
    assert e.value.errno == errno_ and says in str(e.value), str(e.value)


def test_pool_config_refused_by_c():
    with pytest.raises(libzs.ZsArgumentError) as e:
        libzs.Pool(delta=8192)                      # > page_size: C's rule, not Python's
    assert e.value.errno == errno.EINVAL and "delta=8192" in str(e.value)


def test_names_and_constants_from_c():
    names = L.need("zs_free_mode_names")()
    c_modes = []
    i = 0
    while names[i]:
        c_modes.append(names[i].decode())
        i += 1
    # The registries (zsmalloc.h) may grow: the kernel's entries keep their values and
    # every registered entry is listed, in value order.
    assert list(libzs.FREE_MODES) == c_modes and c_modes[:3] == ["pool", "class", "class-unlocked"]
    assert len(c_modes) == L.const("ZS_FREE_MODE_COUNT")
    assert libzs.FREE_MODES["class-unlocked"] == L.const("ZS_FREE_CLASS_INDEX_UNLOCKED")
    assert list(libzs.CHAIN_POLICIES.values()) == list(range(L.const("ZS_CHAIN_POLICY_COUNT")))
    assert {k: libzs.CHAIN_POLICIES[k] for k in ("exhaustive", "heuristic")} == \
        {"exhaustive": 0, "heuristic": 1}
    assert L.const("ZS_ZRAM_F_HUGE") == 1 << 21
    with pytest.raises(KeyError):
        L.const("ZS_NOT_A_CONSTANT")
    with libzs.ZramStore(slots=2) as z:
        z.write(0, bytes(z.page_size))
        info = z.slot_info(0)
        assert info["same"] and info["flags"] & L.const("ZS_ZRAM_F_SAME")
        assert not info["huge"] and not info["written_back"]
