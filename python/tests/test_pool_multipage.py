# Objects larger than a page from Python (zs_pool_config.max_object_size): the option
# reaches C through the ctypes mirror of the config (whose layout changed when the field
# was carved out of the reserved words), a multi-page object round-trips and costs
# exactly its pages, and the default pool keeps the kernel's one-page limit with the
# documented error (ZsArgumentError, errno ENOSPC).
import errno
import random

import pytest

import libzs

PAGE = 4096


def test_five_page_object_round_trips():
    rng = random.Random(21)
    with libzs.Pool(max_object_size=16 * PAGE) as p:
        assert p.config["max_object_size"] == 16 * PAGE and p.max_object_size == 16 * PAGE
        data = rng.randbytes(5 * PAGE - 100)      # needs 5 pages
        before = p.total_pages()
        h = p.store(data)
        assert p.total_pages() - before == 5      # a zspage of exactly its pages
        assert p.read(h) == data
        assert p.read(h, 3 * PAGE + 7) == data[:3 * PAGE + 7]
        buf = bytearray(len(data))
        assert p.read_into(h, buf) == len(data) and bytes(buf) == data
        new = rng.randbytes(len(data))
        p.write(h, new)
        p.compact()                               # moves nothing it holds alone
        assert p.read(h) == new
        p.free(h)
        assert p.total_pages() == before
        # the limit itself, and one byte past it
        h = p.malloc(16 * PAGE)
        p.write(h, b"\x5a" * (16 * PAGE))
        assert p.read(h) == b"\x5a" * (16 * PAGE)
        p.free(h)
        with pytest.raises(libzs.ZsError) as e:
            p.malloc(16 * PAGE + 1)
        assert e.value.errno == errno.ENOSPC


def test_default_pool_refuses_two_pages():
    for pool in (libzs.Pool(), libzs.Pool(profile="kernel"), libzs.Pool(max_object_size=0)):
        with pool as p:
            assert p.config["max_object_size"] == 0 and p.max_object_size == PAGE
            h = p.store(b"x" * PAGE)              # one page still fits
            p.free(h)
            with pytest.raises(ValueError) as e:
                p.malloc(2 * PAGE)
            assert isinstance(e.value, libzs.ZsArgumentError)
            assert e.value.errno == errno.ENOSPC


@pytest.mark.parametrize("bad", [PAGE - 1, 16 * PAGE + 1])
def test_c_refuses_max_object_size_out_of_range(bad):
    with pytest.raises(libzs.ZsArgumentError) as e:
        libzs.Pool(max_object_size=bad)
    assert e.value.errno == errno.EINVAL


def test_zram_group_pool_takes_the_group():
    # a group store on zsmalloc keeps each group as one multi-page object in a pool of
    # the slots' own page size (src/zram/group.c): its config as C holds it says so
    with libzs.ZramStore(slots=32, group_pages=8, filter="shuffle:4") as z:
        cfg = z.pool_config()
        assert cfg["page_size"] == PAGE and cfg["max_object_size"] >= 8 * PAGE
        rng = random.Random(5)
        pages = [rng.randbytes(PAGE // 2) * 2 for _ in range(32)]
        for i, pg in enumerate(pages):
            z.write(i, pg)
        assert all(z.read(i) == pg for i, pg in enumerate(pages))
    with libzs.ZramStore(slots=8, max_object_size=4 * PAGE) as z:
        assert z.pool_config()["max_object_size"] == 4 * PAGE
