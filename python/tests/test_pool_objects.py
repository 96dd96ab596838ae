# The Pool's per-object table as the compiled module keeps it (_ext.c, class Objects): each
# call checks the handle and changes the table in the C function that makes the C call.
# Misuse gets the same exceptions the Python table gave (wrong types, a closed pool, freed
# and stale handles), the chunk map survives growth and removal in any order, threads
# storing, reading and freeing at once (large stores run without the GIL) keep it equal to
# the C pool, and close() from another thread waits for the stores in flight.  The ctypes
# path (a source tree without the compiled module) is checked in a child interpreter.
# Seeded (ZS_TEST_SEED, printed).
import errno
import os
import random
import subprocess
import sys
import threading

import pytest

import libzs
from libzs import _lib as L

SEED = int(os.environ.get("ZS_TEST_SEED", "7321"))
print("seed", SEED)

pytestmark = pytest.mark.skipif(libzs._ext is None, reason="needs the compiled module")


def _c_objects(p):
    return L.need("zs_pool_objects")(p._p)


def _pattern(i, n):
    return bytes([(i * 7 + 1) % 251]) * n


def test_wrong_types_raise_typeerror_or_valueerror():
    with libzs.Pool() as p:
        h = p.store(b"abc")
        for bad in ("text", 123, None, 1.5):
            with pytest.raises(TypeError):
                p.store(bad)
        for bad in ("h", 1.0, None, True, b"\x01"):
            with pytest.raises(TypeError, match="handle must be an int"):
                p.read(bad)
            with pytest.raises(TypeError):
                p.free(bad)
            with pytest.raises(TypeError):
                p.read_into(bad, bytearray(8))
            with pytest.raises(TypeError):
                p.write(bad, b"x")
        with pytest.raises(TypeError):
            p.malloc(True)
        with pytest.raises(TypeError):
            p.malloc(3.0)
        for length in ("1", 1.0, True, -1, 4, 2**70):
            with pytest.raises(ValueError, match="length must be in 0..3"):
                p.read(h, length)
            with pytest.raises(ValueError, match="length must be in 0..3"):
                p.read_into(h, bytearray(8), length)
        with pytest.raises((TypeError, BufferError)):
            p.read_into(h, b"immutable")           # not writable
        with pytest.raises(TypeError):
            p.read_into(h, "str")
        with pytest.raises(ValueError, match="shorter"):
            p.read_into(h, bytearray(2))
        with pytest.raises(ValueError, match="offset 0"):
            p.write(h, b"x", 1)
        with pytest.raises(ValueError, match="do not fit"):
            p.write(h, b"abcd")
        with pytest.raises(TypeError):
            p.write(h, "str")
        with pytest.raises(TypeError):
            p._x.read(h, None, 3)               # too many arguments
        with pytest.raises(TypeError):
            p._x.read(h, size=3)                # unknown keyword
        with pytest.raises(TypeError):
            p._x.read()                         # no handle
        # keywords reach the C methods by name
        assert p._x.read(handle=h, length=2) == b"ab"
        buf = bytearray(3)
        assert p._x.read_into(h, buffer=buf) == 3 and buf == b"abc"
        assert p.read(h) == b"abc" and len(p) == 1


@pytest.mark.parametrize("bad", [0, -8, 2**64, 2**70, 1, 1 << 63])
def test_values_that_are_not_handles(bad):
    with libzs.Pool() as p:
        p.store(b"x")
        with pytest.raises(libzs.ZsArgumentError, match="is not a handle") as e:
            p.read(bad)
        assert e.value.errno == errno.EINVAL
        assert hex(bad) in str(e.value)
        with pytest.raises(libzs.ZsArgumentError, match="is not a handle"):
            p.free(bad)
        assert len(p) == 1


def test_size_limits_and_errnos():
    with libzs.Pool() as p:
        big = p.max_object_size
        for n, err in ((0, errno.EINVAL), (-5, errno.EINVAL), (big + 1, errno.ENOSPC),
                       (2**80, errno.ENOSPC), (-2**80, errno.EINVAL)):
            with pytest.raises(libzs.ZsArgumentError) as e:
                p.malloc(n)
            assert e.value.errno == err, n
        with pytest.raises(libzs.ZsArgumentError) as e:
            p.store(b"")
        assert e.value.errno == errno.EINVAL
        with pytest.raises(libzs.ZsArgumentError) as e:
            p.store(bytes(big + 1))
        assert e.value.errno == errno.ENOSPC
        assert len(p) == 0 == _c_objects(p)
        h = p.store(bytes(big))
        assert p.read(h) == bytes(big) and p.stats()["object_bytes"] == big


def test_closed_pool_refuses_every_call():
    p = libzs.Pool()
    h = p.store(b"abc")
    p.close()
    calls = [lambda: p.store(b"x"), lambda: p.malloc(8), lambda: p.read(h),
             lambda: p.read_into(h, bytearray(8)), lambda: p.write(h, b"x"),
             lambda: p.free(h), lambda: p.free(h, deferred=True)]
    for call in calls:
        with pytest.raises(libzs.ZsArgumentError, match="pool is closed"):
            call()
    assert p.handles() == [] and len(p) == 0
    p.close()                                         # a second close does nothing


def test_freed_stale_and_foreign_handles():
    rng = random.Random(SEED)
    with libzs.Pool() as p, libzs.Pool() as q:
        hs = [p.store(_pattern(i, rng.randrange(1, 900))) for i in range(300)]
        old = hs[150]
        p.free(old)
        with pytest.raises(libzs.ZsArgumentError, match="not live"):
            p.read(old)
        with pytest.raises(libzs.ZsArgumentError, match="not live"):
            p.free(old)
        with pytest.raises(libzs.ZsArgumentError, match="not live"):
            q.read(hs[0])                               # another pool's handle
        # its slot comes back with another generation: the old handle is stale, by name
        for _ in range(10000):
            h = p.store(b"new")
            if h & 0x0000_FFFF_FFFF_FFF8 == old & 0x0000_FFFF_FFFF_FFF8:
                break
        else:
            pytest.fail("the freed slot was not reused")
        assert h != old
        for call in (lambda: p.read(old), lambda: p.free(old), lambda: p.write(old, b"x"),
                     lambda: p.read_into(old, bytearray(8))):
            with pytest.raises(libzs.ZsArgumentError, match="stale"):
                call()
        assert p.read(h) == b"new"


def test_chunk_map_grows_and_shrinks_in_any_order():
    # 200k objects take about 25 handle chunks: the chunk map doubles past 16, and freeing
    # in random order drops chunks in any order (each removal moves back the entries that
    # probed past it)
    rng = random.Random(SEED)
    with libzs.Pool() as p:
        n = 200_000
        hs = [p.store(_pattern(i, 8 + i % 40)) for i in range(n)]
        chunks = {h >> 16 for h in hs}
        assert len(chunks) > 16, len(chunks)
        live = dict(zip(hs, range(n)))
        order = list(hs)
        rng.shuffle(order)
        for k, h in enumerate(order):
            p.free(h)
            del live[h]
            if k % 20011 == 0:
                assert set(p.handles()) == set(live)
                for x in rng.sample(sorted(live), min(200, len(live))):
                    i = live[x]
                    assert p.read(x) == _pattern(i, 8 + i % 40)
        assert len(p) == 0 == _c_objects(p) and p.handles() == []
        assert p.stats()["object_bytes"] == 0
        # and fills again from empty
        h = p.store(b"again")
        assert p.handles() == [h] and p.read(h) == b"again"


def test_threads_store_read_free_agree_with_c():
    # small stores keep the GIL, those of NOGIL_MIN bytes and more release it around the C
    # call: the table gets each handle after the call, before any other thread can name it
    seeds = [SEED + t for t in range(4)]
    with libzs.Pool(max_object_size=4 * 4096) as p:
        errors = []
        kept = [[] for _ in seeds]

        def worker(t):
            rng = random.Random(seeds[t])
            mine = []
            try:
                for i in range(4000):
                    r = rng.random()
                    if r < 0.5 or not mine:
                        size = rng.choice((rng.randrange(1, 2000),
                                           rng.randrange(libzs._ext.NOGIL_MIN, 4 * 4096)))
                        mine.append((p.store(_pattern(i, size)), i, size))
                    elif r < 0.8:
                        h, j, size = mine[rng.randrange(len(mine))]
                        assert p.read(h) == _pattern(j, size)
                    else:
                        h, _, _ = mine.pop(rng.randrange(len(mine)))
                        p.free(h, deferred=r > 0.95)
            except BaseException as e:      # noqa: B902 - reported by the main thread
                errors.append(e)
            kept[t] = mine

        ths = [threading.Thread(target=worker, args=(t,)) for t in range(len(seeds))]
        for th in ths:
            th.start()
        for th in ths:
            th.join()
        assert not errors, errors
        p.flush()
        mine = [x for k in kept for x in k]
        assert sorted(p.handles()) == sorted(h for h, _, _ in mine)
        assert len(p) == _c_objects(p) == len(mine)
        assert p.stats()["object_bytes"] == sum(s for _, _, s in mine)
        for h, j, size in mine:
            assert p.read(h) == _pattern(j, size)


def test_close_from_another_thread_waits_for_stores_in_flight():
    # stores of 64 KiB run without the GIL; close() on another thread must wait for them
    # (the C pool is destroyed only then) and later calls raise "pool is closed"
    for rnd in range(5):
        p = libzs.Pool(max_object_size=16 * 4096)
        data = bytes(16 * 4096)
        go = threading.Event()
        outcome = {"stored": 0, "closed": 0, "other": []}

        def storer():
            go.wait()
            for _ in range(2000):
                try:
                    p.store(data)
                    outcome["stored"] += 1
                except libzs.ZsArgumentError as e:
                    if "pool is closed" not in str(e):
                        outcome["other"].append(e)
                    outcome["closed"] += 1
                    return
                except BaseException as e:  # noqa: B902
                    outcome["other"].append(e)
                    return

        ths = [threading.Thread(target=storer) for _ in range(3)]
        for th in ths:
            th.start()
        go.set()
        while outcome["stored"] < 20 * (rnd + 1) and any(th.is_alive() for th in ths):
            pass
        p.close()
        for th in ths:
            th.join()
        assert not outcome["other"], outcome["other"]
        assert outcome["closed"] == 3, outcome


def test_ctypes_path_without_the_compiled_module():
    # a source tree used without installing has no libzs._ext: the Pool keeps its table and
    # journal in Python, with the same answers
    code = r"""
import sys
sys.modules["libzs._ext"] = None          # import libzs._ext raises ImportError
import libzs
assert libzs._ext is None
with libzs.Pool() as p:
    hs = [p.store(bytes([i % 251]) * (1 + i % 900)) for i in range(3000)]
    for h in hs[::2]:
        p.free(h)
    hs = hs[1::2]
    assert len(p) == len(hs) == len(p.handles()) == p.stats()["objects"]
    assert all(p.read(h) == bytes([i % 251]) * (1 + i % 900)
               for i, h in zip(range(1, 3000, 2), hs))
    h = p.malloc(10)
    p.write(h, b"0123456789")
    assert p.read(h, 4) == b"0123"
    try:
        p.read(hs[0] ^ 2)
    except libzs.ZsArgumentError as e:
        assert "stale" in str(e) or "not live" in str(e), e
    else:
        raise SystemExit("a wrong generation was read")
print("ok")
"""
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                       timeout=120)
    assert r.returncode == 0 and r.stdout.strip() == "ok", r.stdout + r.stderr


def test_chunk_map_removal_when_every_chunk_collides():
    # with a hash multiplier of 0 every chunk's search starts at the same place, so each
    # lookup walks the probe sequence and each removal must move back the chunks that
    # probed past it (a removal that only emptied its place would lose them)
    rng = random.Random(SEED)
    with libzs.Pool() as p:
        t = libzs._ext.Objects(p._p, p.max_object_size, 0)
        hs = [t.store(_pattern(i, 16)) for i in range(8191 * 12)]
        assert len({h >> 16 for h in hs}) >= 12
        live = dict(zip(hs, range(len(hs))))
        order = list(hs)
        rng.shuffle(order)
        for k, h in enumerate(order):
            t.free(h)
            del live[h]
            if k % 4099 == 0:
                assert t.n == len(live) and set(t.handles()) == set(live)
                for x in rng.sample(sorted(live), min(100, len(live))):
                    assert t.read(x) == _pattern(live[x], 16)
        assert t.n == 0 == _c_objects(p) and t.handles() == []
        t.close()


def test_objects_constructor_misuse():
    with libzs.Pool() as p:
        with pytest.raises(libzs.ZsArgumentError, match="NULL"):
            libzs._ext.Objects(0, 4096)
        with pytest.raises(libzs.ZsArgumentError, match="max_size"):
            libzs._ext.Objects(p._p, 0)
        with pytest.raises(TypeError):
            libzs._ext.Objects("pool", 4096)
        t = libzs._ext.Objects(p._p, 4096)
        with pytest.raises(RuntimeError, match="already"):
            t.__init__(p._p, 4096)
        with pytest.raises(TypeError):
            t.entry("h")
        assert t.entry(2**70) == 0 and t.entry(8) == 0
        t.close()
        assert t.closed and t.n == 0 and t.handles() == []
        with pytest.raises(libzs.ZsArgumentError, match="pool is closed"):
            t.store(b"x")
