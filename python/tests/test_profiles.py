# The two named profiles from Python: Pool, ZramStore and Region
# default to the application profile that C's zs_*_config_init_app fill, profile="kernel"
# gives the kernel layout, anything else is refused naming both; every zs_pool_config
# field is an option of all three, its range checked by the C create call.
import ctypes
import errno
import inspect
import os
import random

import pytest

import libzs
from libzs import _lib

PAGE = 4096
CPUS = os.sysconf("SC_NPROCESSORS_ONLN")
SHARDS_AUTO_4K = max(1, min(CPUS, 32))   # one per CPU; 255 classes x shards <= 8192 at 4K

BAD_PROFILES = ["fast", "", "App", "KERNEL", None, 1, b"app"]
region_ok, region_why = libzs.region_available()
needs_region = pytest.mark.skipif(not region_ok, reason=f"userfaultfd unavailable: {region_why}")


def _c_profile(fn):
    """A zs_pool_config filled by the named C init function, read field by field."""
    cfg = _lib.PoolConfig()
    _lib.need(fn)(ctypes.byref(cfg))
    out = {f: getattr(cfg, f) for f, _t in _lib.PoolConfig._fields_}
    out["reserved"] = list(out["reserved"])     # the ABI tail, all 0 (docs/abi.md)
    assert out["struct_size"] == ctypes.sizeof(cfg) and not any(out["reserved"])
    return out


def _pages(n, seed):
    rnd = random.Random(seed)
    out = []
    for i in range(n):
        if i % 3 == 0:
            out.append(rnd.randbytes(PAGE))
        else:
            words = [rnd.choice([b"alpha ", b"beta ", b"gamma\n", b"42 "]) for _ in range(1000)]
            out.append(b"".join(words)[:PAGE])
    return out


# -- the profiles are C's --

def test_profiles_come_from_c():
    app, kernel = _c_profile("zs_pool_config_init_app"), _c_profile("zs_pool_config_init")
    # the app profile differs from the kernel's in exactly class_shards, free_mode,
    # fit_zspages and autocompact_ms
    assert {f for f in app if app[f] != kernel[f]} == {"class_shards", "free_mode",
                                                       "fit_zspages", "autocompact_ms"}
    assert app["class_shards"] == libzs.CLASS_SHARDS_AUTO and app["free_mode"] == 1
    assert kernel["class_shards"] == 0 and kernel["free_mode"] == 0
    pa, pk = libzs.pool_profile("app"), libzs.pool_profile("kernel")
    assert libzs.pool_profile() == pa
    assert pa["class_shards"] == "auto" and pa["free_mode"] == "class"
    assert pk["class_shards"] == 0 and pk["free_mode"] == "pool"
    for opt, field in libzs.POOL_OPTIONS.items():
        if opt not in ("name", "chain_policy", "free_mode", "checked", "deferred_worker",
                       "class_shards"):
            assert pa[opt] == app[field] and pk[opt] == kernel[field], opt
    assert libzs.PROFILES == ("app", "kernel")


def test_pool_default_is_app_profile():
    with libzs.Pool() as p:
        assert p.config["profile"] == "app"
        assert p.config["class_shards"] == "auto" and p.config["free_mode"] == "class"
        assert p.class_shards == SHARDS_AUTO_4K
        want = dict(libzs.pool_profile("app"), name="zs", checked=True)
        assert {k: v for k, v in p.config.items() if k != "profile"} == want
        objs = {p.store(bytes([i % 256]) * (1 + i % 3000)): i for i in range(2000)}
        for h, i in objs.items():
            assert p.read(h) == bytes([i % 256]) * (1 + i % 3000)
            p.free(h)


def test_pool_kernel_profile():
    with libzs.Pool(profile="kernel") as p:
        assert p.config["profile"] == "kernel"
        assert p.config["free_mode"] == "pool" and p.config["class_shards"] == 0
        assert p.class_shards == 1
        h = p.store(b"k" * 300)
        assert p.read(h) == b"k" * 300


def test_options_override_the_profile():
    with libzs.Pool(profile="kernel", class_shards=2) as p:
        assert p.class_shards == 2 and p.config["free_mode"] == "pool"
    with libzs.Pool(free_mode="pool") as p:        # app profile, one field changed
        assert p.config["free_mode"] == "pool" and p.config["class_shards"] == "auto"
    with libzs.Pool(class_shards=1, free_mode="class-unlocked", chain=4, delta=32,
                    chain_policy="heuristic", max_pages=1000, deferred_capacity=64,
                    deferred_worker=False, name="mine", page_cache_pages="none",
                    page_cache_decay_ms="never") as p:
        c = p.config
        assert (c["class_shards"], c["free_mode"], c["chain"], c["delta"]) == \
            (1, "class-unlocked", 4, 32)
        assert (c["chain_policy"], c["max_pages"], c["deferred_capacity"]) == \
            ("heuristic", 1000, 64)
        assert c["deferred_worker"] is False and c["name"] == "mine"
        assert c["page_cache_pages"] == "none" and c["page_cache_decay_ms"] == "never"
        h = p.store(b"z" * 500)
        p.free(h, deferred=True)
        p.flush()
        assert len(p) == 0
    with libzs.Pool(page_cache_pages=16, page_cache_decay_ms=100) as p:
        assert (p.config["page_cache_pages"], p.config["page_cache_decay_ms"]) == (16, 100)


@pytest.mark.parametrize("bad", BAD_PROFILES)
def test_bad_profile_names_the_choices(bad):
    makers = [lambda: libzs.Pool(profile=bad), lambda: libzs.ZramStore(slots=4, profile=bad),
              lambda: libzs.pool_profile(bad)]
    if region_ok:
        makers.append(lambda: libzs.Region(8 * PAGE, profile=bad))
    for make in makers:
        with pytest.raises(ValueError) as e:
            make()
        assert isinstance(e.value, libzs.ZsArgumentError) and e.value.errno == errno.EINVAL
        assert "'app'" in str(e.value) and "'kernel'" in str(e.value)


def test_pool_is_always_checked():
    with pytest.raises(ValueError):
        libzs.Pool(checked=False)
    with pytest.raises(ValueError):
        libzs.Pool(checked=False, profile="kernel")


def test_store_checked_by_default_region_not():
    # python/README.md: a ZramStore is checked unless checked=False; a Region's store is
    # not unless checked=True, as C's region inits leave it.  What the C pool holds.
    for profile in ("app", "kernel"):
        with libzs.ZramStore(slots=4, profile=profile) as z:
            assert z.pool_config()["checked"] is True
        with libzs.ZramStore(slots=4, profile=profile, checked=False) as z:
            assert z.pool_config()["checked"] is False


@needs_region
def test_region_store_unchecked_unless_asked():
    for profile in ("app", "kernel"):
        with libzs.Region(1 << 20, profile=profile) as r:
            assert r.pool_config()["checked"] is False
        with libzs.Region(1 << 20, profile=profile, checked=True) as r:
            assert r.pool_config()["checked"] is True


# -- every pool option, everywhere; C does the validation --

def test_every_pool_config_field_is_an_option():
    fields = {f for f, _t in _lib.PoolConfig._fields_} - set(_lib.CONFIG_ABI_FIELDS)
    assert set(libzs.POOL_OPTIONS.values()) == fields
    for cls in (libzs.Pool, libzs.ZramStore, libzs.Region):
        params = inspect.signature(cls).parameters
        assert "profile" in params and params["profile"].default == "app", cls
        missing = set(libzs.POOL_OPTIONS) - set(params)
        if cls is libzs.Region:
            missing.discard("page_size")   # a region's pages are the system's (region.h)
        assert not missing, f"{cls.__name__} lacks {missing}"


@pytest.mark.parametrize("kw", [dict(chain=17), dict(class_shards=65), dict(delta=12),
                                dict(deferred_capacity=(1 << 24) + 1),
                                dict(page_cache_decay_ms=3600001)])
def test_c_refuses_out_of_range(kw):
    makers = [lambda: libzs.Pool(**kw), lambda: libzs.ZramStore(slots=4, **kw),
              lambda: libzs.ZramStore(slots=4, profile="kernel", **kw)]
    if region_ok:
        makers.append(lambda: libzs.Region(8 * PAGE, **kw))
    for make in makers:
        with pytest.raises(libzs.ZsArgumentError) as e:
            make()
        assert e.value.errno == errno.EINVAL
        name = next(iter(kw))
        assert f"{name}=" in str(e.value)          # the message says which options were set


@pytest.mark.parametrize("kw", [dict(chain=(1 << 32) + 1), dict(class_shards=-1),
                                dict(max_pages=-1), dict(page_cache_pages=1 << 64),
                                dict(class_shards="all"), dict(page_cache_decay_ms="always")])
def test_values_that_do_not_fit_the_c_field(kw):
    # refused before C: a value ctypes would truncate into a valid one must not get through
    for make in (lambda: libzs.Pool(**kw), lambda: libzs.ZramStore(slots=4, **kw)):
        with pytest.raises(ValueError):
            make()


def test_options_type_errors():
    for bad in ("8", 8.0, True, None.__class__):
        with pytest.raises(ValueError):       # pool options: a bad value is a ValueError
            libzs.Pool(chain=bad)
    with pytest.raises(TypeError):
        libzs.ZramStore(slots=4, name=b"x")
    with pytest.raises(ValueError):
        libzs.ZramStore(slots=4, free_mode="lockless")


# -- ZramStore --

def test_zram_default_is_app_profile():
    with libzs.ZramStore(slots=8) as z:
        assert z.profile == "app"
        c = z.pool_config()
        assert c["class_shards"] == "auto" and c["free_mode"] == "class"
        assert c["shards"] == SHARDS_AUTO_4K
    with libzs.ZramStore(slots=8, profile="kernel") as z:
        c = z.pool_config()
        assert c["class_shards"] == 0 and c["free_mode"] == "pool" and c["shards"] == 1


def test_zram_class_shards():
    pages = _pages(64, seed=3)
    for profile in libzs.PROFILES:
        with libzs.ZramStore(slots=64, class_shards=2, profile=profile) as z:
            c = z.pool_config()
            assert c["class_shards"] == 2 and c["shards"] == 2
            for i, p in enumerate(pages):
                z.write(i, p)
            for i, p in enumerate(pages):
                assert z.read(i) == p
            assert z.stats()["pages_stored"] == 64


def test_zram_pool_and_store_options():
    with libzs.ZramStore(slots=16, chain=4, delta=32, chain_policy="heuristic",
                         free_mode="class-unlocked", deferred_free=True,
                         deferred_capacity=32, deferred_worker=True, page_cache_pages="none",
                         page_cache_decay_ms=50, name="zr", max_pages=4096) as z:
        c = z.pool_config()
        assert (c["chain"], c["delta"], c["chain_policy"], c["free_mode"], c["name"]) == \
            (4, 32, "heuristic", "class-unlocked", "zr")
        assert c["deferred_capacity"] == 32 and c["page_cache_pages"] == "none"
        z.write(0, b"a" * 2048 + bytes(range(256)) * 8)
        z.discard(0)
        z.flush()
    with libzs.ZramStore(slots=4, backend="zblock", page_cache_pages=8) as z:
        assert z.pool_config() is None                    # not a zsmalloc pool


def test_zram_backend_max_pages():
    # max_pages is the backend's page limit (zs_backend_config.max_pages)
    with libzs.ZramStore(slots=64, max_pages=4) as z:
        rnd = random.Random(5)
        with pytest.raises(libzs.ZsError) as e:
            for i in range(64):
                z.write(i, rnd.randbytes(PAGE))
        assert e.value.errno == errno.ENOMEM


def test_zram_group_pages_and_reason():
    pages = _pages(32, seed=9)
    with libzs.ZramStore(slots=32, group_pages=4) as z:
        for i, p in enumerate(pages):
            z.write(i, p)
        for i, p in enumerate(pages):
            assert z.read(i) == p
    with pytest.raises(libzs.ZsArgumentError) as e:
        libzs.ZramStore(slots=32, group_pages=3)
    assert "group_pages" in str(e.value) and "power of two" in str(e.value)   # C's reason


def test_zram_comp_level_and_dict(tmp_path):
    if "zstd" not in libzs.compressor_names():
        pytest.skip("no zstd")
    pages = _pages(16, seed=4)
    d = b"".join(pages[1:3])
    path = tmp_path / "dict"
    path.write_bytes(d)
    for kw in (dict(comp_dict=d), dict(comp_dict=str(path)), dict(comp_dict=path),
               dict(comp_level=5)):
        with libzs.ZramStore(slots=16, comp="zstd", **kw) as z:
            for i, p in enumerate(pages):
                z.write(i, p)
            for i, p in enumerate(pages):
                assert z.read(i) == p
    with pytest.raises(libzs.ZsError) as e:
        libzs.ZramStore(slots=4, comp="zstd", comp_dict=str(tmp_path / "missing"))
    assert e.value.errno == errno.ENOENT
    with pytest.raises(libzs.ZsArgumentError):
        libzs.ZramStore(slots=4, comp="zstd", comp_level=1000)


# -- Region --

@needs_region
def test_region_profiles():
    with libzs.Region(16 * PAGE) as r:
        assert r.profile == "app"
        c = r.pool_config()
        assert c["class_shards"] == "auto" and c["free_mode"] == "class"
    pages = _pages(16, seed=8)
    with libzs.Region(16 * PAGE, profile="kernel") as r:
        c = r.pool_config()
        assert c["class_shards"] == 0 and c["free_mode"] == "pool" and c["shards"] == 1
        mv = r.view()
        for i, p in enumerate(pages):
            mv[i * PAGE:(i + 1) * PAGE] = p
        assert r.pageout() == 16
        assert r.stats()["resident"] == 0
        for i, p in enumerate(pages):
            assert bytes(mv[i * PAGE:(i + 1) * PAGE]) == p
        del mv


@needs_region
def test_region_pool_options():
    with libzs.Region(8 * PAGE, class_shards=2, chain=4, free_mode="pool",
                      page_cache_decay_ms="never", mem_limit=1 << 20, streams=2) as r:
        c = r.pool_config()
        assert (c["shards"], c["chain"], c["free_mode"], c["page_cache_decay_ms"]) == \
            (2, 4, "pool", "never")
        mv = r.view()
        mv[:PAGE] = b"r" * PAGE
        assert r.pageout() == 1
        assert bytes(mv[:PAGE]) == b"r" * PAGE
        del mv
    with pytest.raises(libzs.ZsArgumentError) as e:
        libzs.Region(8 * PAGE, handlers=65)
    assert "handlers=65" in str(e.value)
