# Every refused config carries the C library's reason (4.0.0: one constructor shape,
# int zs_X_create(cfg, out, err, errlen)): the exception is ZsArgumentError (EINVAL)
# and its message names the field C refused and the accepted range, for the ctypes
# constructors (Pool, ZramStore, Compressor without the extension) and the _ext ones
# (Compressor, CompressedDict).
import errno

import pytest

import libzs


def _refused(fn, *want):
    with pytest.raises(libzs.ZsArgumentError) as e:
        fn()
    msg = str(e.value)
    assert e.value.errno == errno.EINVAL, msg
    for w in want:
        assert w in msg, msg
    return msg


def test_pool_reason_names_field_and_range():
    _refused(lambda: libzs.Pool(chain=99), "max_chain 99", "must be 1..")
    _refused(lambda: libzs.Pool(page_size=1000), "page_size 1000", "4096..65536")


def test_zram_reason_names_field():
    _refused(lambda: libzs.ZramStore(slots=4, page_size=5000), "page_size 5000", "4096..65536")


def test_compressor_reason_names_field():
    _refused(lambda: libzs.Compressor("lz4", max_src=(1 << 20) + 1), "max_src 1048577",
             "1..1048576")
    _refused(lambda: libzs.Compressor("nosuch"), "nosuch")


def test_cache_reason_names_field():
    _refused(lambda: libzs.CompressedDict("lz4hc", level=99), "zs_cache_create", "level 99")
