# libzs.CompressedDict: the mapping contract (every public method), codecs and levels,
# dictionary training, capacity with eviction, memory given back after deletions, misuse
# (wrong types, lengths, closed objects), threads, pickling, and its type hints under mypy
# --strict.  Randomized parts use a fixed seed, printed.
import errno
import os
import pickle
import random
import shutil
import subprocess
import threading
import time

import pytest

import libzs
from conftest import REPO

SEED = int(os.environ.get("ZS_TEST_SEED", "12345"))


def records(n, seed=SEED):
    """JSON-like records of 200..1,500 bytes that compress about 3-5x."""
    rng = random.Random(seed)
    words = ["alpha", "beta", "gamma", "delta", "status", "user", "region", "value", "ok"]
    out = []
    for i in range(n):
        fields = ", ".join(f'"{rng.choice(words)}_{j}": "{rng.choice(words)}{rng.randrange(1000)}"'
                           for j in range(rng.randrange(8, 60)))
        out.append(('{"id": %d, %s}' % (i, fields)).encode())
    return out


def test_mapping_contract():
    print("seed", SEED)
    with libzs.CompressedDict() as d:
        assert len(d) == 0 and not d and list(d) == []
        d["k"] = b"str key"
        d[b"k"] = bytearray(b"bytes key")       # a different key, any bytes-like value
        d["v"] = memoryview(b"x" * 300)
        assert d["k"] == b"str key" and d[b"k"] == b"bytes key" and d["v"] == b"x" * 300
        assert type(d[b"k"]) is bytes
        assert len(d) == 3 and "k" in d and b"k" in d and "zz" not in d and 5 not in d
        assert sorted(d, key=repr) == sorted(["k", b"k", "v"], key=repr)
        assert d.get("zz") is None and d.get("zz", b"dflt") == b"dflt" and d.get("k") == b"str key"
        d["k"] = b"replaced"
        assert d["k"] == b"replaced" and len(d) == 3
        del d["k"]
        with pytest.raises(KeyError):
            del d["k"]
        with pytest.raises(KeyError):
            d["k"]
        assert d.pop(b"k") == b"bytes key" and d.pop("nope", None) is None
        assert d.setdefault("s", b"1") == b"1" and d.setdefault("s", b"2") == b"1"
        d.update({"a": b"A", "b": b"B"}, c=b"C")
        assert dict(d.items()) == {"v": b"x" * 300, "s": b"1", "a": b"A", "b": b"B", "c": b"C"}
        assert set(d.keys()) == {"v", "s", "a", "b", "c"} and b"A" in list(d.values())
        k, v = d.popitem()
        assert k not in d and len(d) == 4
        assert d == {kk: d[kk] for kk in d}
        d[""] = b""                               # empty values and keys are fine
        assert d[""] == b""
        d.clear()
        assert len(d) == 0 and d.stats()["entries"] == 0
        assert "CompressedDict" in repr(d)


def test_iteration_changed_size_raises():
    d = libzs.CompressedDict()
    for i in range(100):
        d[f"k{i}"] = b"v" * 100
    with pytest.raises(RuntimeError, match="changed size"):
        for k in d:
            d[k + "x"] = b"new"
    keys = list(d)
    assert len(keys) == len(set(keys)) == len(d)


@pytest.mark.parametrize("codec", ["none", "lz4", "lz4:8", "lz4hc", "zstd", "zstd:9", "zstd-huf", "zstd-huf:-1"])
def test_codecs_round_trip(codec):
    recs = records(500)
    d = libzs.CompressedDict(codec)
    for i, r in enumerate(recs):
        d[i.to_bytes(4, "little")] = r
    assert all(d[i.to_bytes(4, "little")] == r for i, r in enumerate(recs))
    st = d.stats()
    assert st["entries"] == 500 and st["value_bytes"] == sum(map(len, recs))
    if codec == "none":
        assert st["raw_objects"] == 500
    else:
        assert st["stored_bytes"] < st["value_bytes"] * (0.9 if codec == "lz4:8" else 0.75), st


def test_bad_arguments_name_the_argument_and_range():
    with pytest.raises(libzs.ZsArgumentError, match="lz4, zstd"):
        libzs.CompressedDict("gzip")
    with pytest.raises(ValueError, match="level"):
        libzs.CompressedDict("zstd:x")
    with pytest.raises(libzs.ZsArgumentError, match="zs_cache_create"):
        libzs.CompressedDict("lz4hc", level=99)
    with pytest.raises(TypeError, match="codec must be a str"):
        libzs.CompressedDict(3)
    with pytest.raises(libzs.ZsArgumentError, match=r"max_key 0 is outside 1\.\.4095"):
        libzs.CompressedDict(max_key=0)
    with pytest.raises(libzs.ZsArgumentError, match=r"dict_size 10 is outside 256\.\."):
        libzs.CompressedDict("zstd", train=10, dict_size=10)
    with pytest.raises(libzs.ZsArgumentError, match="train= needs codec 'zstd'"):
        libzs.CompressedDict("lz4", train=10)
    with pytest.raises(TypeError, match="maxsize must be an int"):
        libzs.CompressedDict(maxsize="1G")
    with pytest.raises(TypeError, match="dict must be bytes"):
        libzs.CompressedDict("zstd", dict="text")


def test_wrong_types_and_lengths():
    d = libzs.CompressedDict(max_key=16)
    with pytest.raises(TypeError, match="keys must be str or bytes, not int"):
        d[1] = b"x"
    with pytest.raises(TypeError, match="keys must be str or bytes"):
        d[1]
    with pytest.raises(TypeError, match="not str"):
        d["k"] = "text"
    with pytest.raises(TypeError, match="bytes-like"):
        d["k"] = 5
    with pytest.raises(ValueError, match="longer than max_key"):
        d["k" * 17] = b"x"
    d["k" * 16] = b"x"                              # exactly max_key bytes
    with pytest.raises(libzs.ZsError) as e:
        d["big"] = bytes(d.max_value_len + 1)
    assert e.value.errno == errno.ENOSPC and "too long" in str(e.value)
    d["big"] = bytes(d.max_value_len - 10)
    assert len(d["big"]) == d.max_value_len - 10
    assert "ü" not in d
    d["ü"] = b"utf8"
    assert d["ü"] == b"utf8" and "ü" in list(d)


def test_closed_raises_everywhere():
    d = libzs.CompressedDict()
    d["a"] = b"1"
    d.close()
    d.close()
    assert d.closed and "closed" in repr(d)
    calls = [lambda: d["a"], lambda: d.__setitem__("a", b"2"), lambda: d.__delitem__("a"),
             lambda: "a" in d, lambda: len(d), lambda: list(d), lambda: d.get("a"),
             d.clear, d.memory, d.stats, d.compact, lambda: d.currsize,
             lambda: pickle.dumps(d), lambda: d.retrain([b"x"])]
    for c in calls:
        with pytest.raises(ValueError, match="closed") as e:
            c()
        assert isinstance(e.value, (libzs.ZsArgumentError, ValueError))
    with libzs.CompressedDict() as d2:
        d2["x"] = b"y"
    assert d2.closed


def test_trained_dictionary_from_first_values():
    recs = records(3000)
    plain = libzs.CompressedDict("zstd")
    trained = libzs.CompressedDict("zstd", train=500, dict_size=8192)
    for i, r in enumerate(recs):
        plain[str(i)] = r
        trained[str(i)] = r
        if i == 498:
            assert trained.dictionary is None
    assert trained.dictionary is not None and 256 <= len(trained.dictionary) <= 8192
    assert all(trained[str(i)] == r for i, r in enumerate(recs))
    sp, st = plain.stats(), trained.stats()
    print("stored bytes without / with a dictionary", sp["stored_bytes"], st["stored_bytes"])
    assert st["dict_len"] == len(trained.dictionary)
    assert st["stored_bytes"] < 0.8 * sp["stored_bytes"]


def test_zstd_huf_denser_at_negative_levels_and_trains():
    # 4 KiB blocks of printable 50-byte fragments, each repeated once (like RocksDB's
    # blocks of db_bench values): a match finder finds the repeats; only an entropy
    # coder stores the literals in fewer than 8 bits each.
    rng = random.Random(SEED)
    alpha = bytes(range(32, 127))
    vals = []
    for _ in range(100):
        frags = [bytes(rng.choice(alpha) for _ in range(50)) for _ in range(41)]
        vals.append(b"".join(f + f for f in frags))
    plain, huf = libzs.CompressedDict("zstd:-1"), libzs.CompressedDict("zstd-huf:-1")
    for i, v in enumerate(vals):
        plain[i.to_bytes(4, "little")] = v
        huf[i.to_bytes(4, "little")] = v
    assert all(huf[i.to_bytes(4, "little")] == v for i, v in enumerate(vals))
    sp, sh = plain.stats()["stored_bytes"], huf.stats()["stored_bytes"]
    print("zstd -1 / zstd-huf -1 stored bytes", sp, sh)
    assert sh < 0.95 * sp
    recs = records(1500)
    t = libzs.CompressedDict("zstd-huf", train=400, dict_size=4096)
    for i, r in enumerate(recs):
        t[str(i)] = r
    assert t.dictionary is not None
    assert t.retrain(n=500) >= 256
    assert all(t[str(i)] == r for i, r in enumerate(recs))


def test_given_dictionary_and_retrain():
    recs = records(2000)
    dct = libzs.train_dict(recs[:400], 4096)
    d = libzs.CompressedDict("zstd", dict=dct)
    for i, r in enumerate(recs):
        d[str(i)] = r
    assert d.dictionary == dct
    before = d.stats()["stored_bytes"]
    n = d.retrain(n=800)
    assert 256 <= n <= 16384 and d.dictionary != dct
    assert all(d[str(i)] == r for i, r in enumerate(recs)) and len(d) == 2000
    assert d.stats()["stored_bytes"] < before * 1.2
    d.retrain(samples=recs[1000:1500])
    assert d["7"] == recs[7]
    with pytest.raises(libzs.ZsArgumentError, match="retrain needs codec 'zstd'"):
        libzs.CompressedDict("lz4").retrain()
    with pytest.raises(ValueError):
        libzs.train_dict([b"a"], 4096)           # too few samples
    with pytest.raises(TypeError, match="samples must be a list"):
        libzs.train_dict(b"one value", 4096)


def test_compressor_with_dictionary_and_level():
    recs = records(600)
    dct = libzs.train_dict(recs[:400], 4096)
    with libzs.Compressor("zstd", dict=dct) as c, libzs.Compressor("zstd") as plain:
        assert c.has_dict and not plain.has_dict
        a, b = c.compress(recs[500]), plain.compress(recs[500])
        assert len(a) < len(b) and c.decompress(a, len(recs[500])) == recs[500]
        assert c.compressed_size(recs[500]) == len(a)
    with libzs.Compressor("zstd", level=19) as c:
        assert c.name.startswith("zstd") and c.decompress(c.compress(recs[0]), len(recs[0])) == recs[0]
    with pytest.raises(libzs.ZsArgumentError, match="zs_comp_config.level 99"):
        libzs.Compressor("lz4hc", level=99)
    with pytest.raises(libzs.ZsArgumentError):
        libzs.Compressor("lzo", dict=dct)
    with pytest.raises(TypeError, match="orig_len must be an int"):
        libzs.Compressor().decompress(b"x", "1")
    with pytest.raises(ValueError, match=r"orig_len must be in 1\.\.65536"):
        libzs.Compressor().decompress(b"x", 70000)


def test_capacity_evicts_in_clock_order():
    rng = random.Random(SEED)
    cap = 8 << 20
    d = libzs.CompressedDict("lz4", maxsize=cap)
    assert d.maxsize == cap
    hot = [f"hot{i}" for i in range(50)]
    for k in hot:
        d[k] = rng.randbytes(2000)
    for i in range(20000):                         # 40 MB of incompressible values
        d[f"cold{i}"] = rng.randbytes(2000)
        if i % 100 == 0:
            for k in hot:                          # read: their reference bits stay set
                assert d.get(k) is not None
    st = d.stats()
    print("capacity", cap, "currsize", d.currsize, "entries", st["entries"],
          "evictions", st["evictions"])
    assert st["evictions"] > 10000 and d.currsize <= cap * 1.05
    assert all(k in d for k in hot)              # CLOCK kept the entries in use


def test_deleting_gives_memory_back():
    recs = records(20000)
    d = libzs.CompressedDict("lz4")
    for i, r in enumerate(recs):
        d[i.to_bytes(4, "little")] = r
    full = d.memory()
    rng = random.Random(SEED)
    gone = rng.sample(range(len(recs)), int(len(recs) * 0.6))
    for i in gone:
        del d[i.to_bytes(4, "little")]
    time.sleep(1.5)                                # idle compaction + page decay
    left = d.memory()
    print("memory full", full, "after deleting 60% and 1.5 s", left)
    assert left < 0.55 * full
    keep = set(range(len(recs))) - set(gone)
    assert all(d[i.to_bytes(4, "little")] == recs[i] for i in list(keep)[:2000])


def test_threads_share_one_dict():
    recs = records(400)
    d = libzs.CompressedDict("zstd", train=300)   # training happens while threads write
    errors = []

    def worker(t):
        try:
            rng = random.Random(SEED + t)
            for i in range(3000):
                k = f"{t}:{rng.randrange(200)}"
                r = recs[rng.randrange(len(recs))]
                d[k] = r
                v = d.get(k)
                assert v is None or v in recs
                if i % 7 == 0:
                    d.pop(k, None)
                d["shared"] = r
                assert d["shared"] in recs
        except Exception as e:                     # pragma: no cover - reported below
            errors.append(e)

    ts = [threading.Thread(target=worker, args=(t,)) for t in range(4)]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    assert not errors, errors
    assert d.dictionary is not None
    assert all(d[k] in recs for k in d)


def test_close_while_threads_run():
    d = libzs.CompressedDict("lz4")
    stop = threading.Event()
    seen = []

    def worker():
        i = 0
        while not stop.is_set():
            try:
                d[str(i % 500)] = b"v" * 3000
                d.get(str(i % 500))
            except ValueError as e:                # closed: the only error allowed
                seen.append(str(e))
                return
            i += 1

    ts = [threading.Thread(target=worker) for _ in range(3)]
    for t in ts:
        t.start()
    time.sleep(0.2)
    d.close()
    stop.set()
    for t in ts:
        t.join()
    assert all("closed" in s for s in seen)


def test_pickle_copies_contents():
    recs = records(300)
    d = libzs.CompressedDict("zstd:5", train=100)
    for i, r in enumerate(recs):
        d[str(i) if i % 2 else str(i).encode()] = r
    e = pickle.loads(pickle.dumps(d))
    assert e is not d and e == d and e.dictionary == d.dictionary
    e["new"] = b"only here"
    assert "new" not in d
    import copy
    assert copy.copy(d) == d


def _mypy():
    exe = shutil.which("mypy")
    if not exe:
        pytest.skip("mypy is not installed")
    return exe


def test_mypy_strict_rejects_a_str_value(tmp_path):
    py = os.path.join(REPO, "python")
    good = tmp_path / "good.py"
    good.write_text(
        "import libzs\n"
        "with libzs.CompressedDict('zstd', train=100, maxsize=64 << 20) as d:\n"
        "    d['k'] = b'bytes'\n"
        "    d[b'k'] = b'bytes'\n"
        "    v: bytes = d['k']\n"
        "    w: bytes | None = d.get('x')\n"
        "    n: int = len(d) + d.memory() + d.currsize\n"
        "    keys: list[str | bytes] = list(d)\n")
    bad = tmp_path / "bad.py"
    bad.write_text(
        "import libzs\n"
        "d = libzs.CompressedDict()\n"
        "d['k'] = 'text'\n")
    env = dict(os.environ, MYPYPATH=py)
    strict = [_mypy(), "--strict", "--cache-dir", os.devnull]
    r = subprocess.run(strict + [str(good)], capture_output=True, text=True, env=env,
                       cwd=tmp_path)
    assert r.returncode == 0, r.stdout + r.stderr
    r = subprocess.run(strict + [str(bad)],
                       capture_output=True, text=True, env=env, cwd=tmp_path)
    assert r.returncode == 1 and "bad.py:3" in r.stdout and "str" in r.stdout, r.stdout


def test_mypy_strict_on_the_package():
    py = os.path.join(REPO, "python")
    r = subprocess.run([_mypy(), "--strict", "--cache-dir", os.devnull, "libzs"], cwd=py,
                       capture_output=True, text=True)
    assert r.returncode == 0, r.stdout + r.stderr
