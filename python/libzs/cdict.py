"""
libzs.CompressedDict: a MutableMapping of str/bytes keys to bytes values kept
compressed in a libzs cache (include/zs/cache.h, on the blob store of
include/zs/blob.h).  This file owns the Python-facing part: arguments,
dictionary training and retraining, iteration, capacity properties, pickling.
The per-item calls (d[k], d[k] = v, del d[k], k in d, len, get) are the
compiled module's (_ext.c, class Cache), inherited as they are, so an item
costs one C call and no Python frame.
"""
from __future__ import annotations

import errno as _errno
from collections.abc import MutableMapping
from typing import Any, Dict, Iterator, List, Optional, Sequence, Tuple, Union

from . import _ext

Key = Union[str, bytes]
_CODECS = {"none": _ext.CODEC_NONE, "lz4": _ext.CODEC_LZ4, "zstd": _ext.CODEC_ZSTD,
           "lz4hc": _ext.CODEC_LZ4HC, "zstd-huf": _ext.CODEC_ZSTD_HUF}
# The codecs whose dictionaries zstd's trainer makes (train= and retrain()).
_TRAINABLE = ("zstd", "zstd-huf")


def _arg_error(msg: str) -> Exception:
    from . import ZsArgumentError
    return ZsArgumentError(_errno.EINVAL, msg)


def _int(name: str, v: Any, lo: int, hi: int) -> int:
    if not isinstance(v, int) or isinstance(v, bool):
        raise TypeError(f"{name} must be an int, not {type(v).__name__}")
    if not lo <= v <= hi:
        raise _arg_error(f"{name} {v} is outside {lo}..{hi}")
    return v


class CompressedDict(_ext.Cache, MutableMapping[Key, bytes]):
    """
    A dict of str or bytes keys to bytes values, each value compressed in C (lz4 by
    default).  "k" and b"k" are two keys, as in a dict; a value may be any bytes-like
    object and always comes back as bytes.

    codec      "lz4" (default), "zstd", "zstd-huf", "lz4hc" or "none"; "zstd:19" / "lz4:8" set
               the level; "zstd-huf" is zstd with literals always Huffman-coded (denser at
               zstd's negative levels, slower to read than lz4)
    level      the codec's level (0: its default; lz4 1..65537 acceleration, lz4hc 1..12,
               zstd its min..max); overrides a level in codec
    dict       a dictionary for zstd or lz4 (bytes, e.g. libzs.train_dict(samples))
    train      zstd only: train a dictionary on the first `train` values stored (the dict
               rebuilds its store with it then, moving the entries: once); 0: never
    dict_size  the trained dictionary's size in bytes (256..1 MiB; default 16 KiB)
    maxsize    capacity in real memory, bytes (0: none).  Past it an insert evicts entries
               first, in CLOCK order (second chance: an entry read since the hand last
               passed is skipped once), not LRU; cachetools' naming (maxsize, currsize).
               It counts everything the store holds, the compression contexts included
               (zstd: about 1 MiB each), so a zstd dict needs several MiB at least
    min_compress  values shorter than this are kept raw (default 64)
    max_key    longest key in bytes, its UTF-8 for a str (1..4095; default 1023)

    Misuse: a key that is not str or bytes, or a str value, raises TypeError; a key past
    max_key ValueError; a value past max_value_len ZsError (ENOSPC); a missing key
    KeyError; any call after close() ZsArgumentError (a ValueError).  Every method may be
    called from any thread: the C cache has its own locks and inserts run without the GIL;
    close() waits for calls in flight.  Freed entries give their memory back by themselves
    (the store compacts a step at a time, and when idle for 200 ms).
    """

    def __init__(self, codec: str = "lz4", level: int = 0, *, dict: Optional[bytes] = None,
                 train: int = 0, dict_size: int = 16384, maxsize: int = 0,
                 min_compress: int = 0, max_key: int = 1023) -> None:
        if not isinstance(codec, str):
            raise TypeError(f"codec must be a str, not {type(codec).__name__}")
        name, _, lv = codec.partition(":")
        if name not in _CODECS:
            raise _arg_error(f"codec {codec!r} is not one of {', '.join(_CODECS)} "
                             f"(with an optional :LEVEL, e.g. zstd:3)")
        if lv:
            if not lv.lstrip("-").isdigit():
                raise _arg_error(f"codec {codec!r}: the level after ':' must be an int")
            level = level or int(lv)
        _int("level", level, -(1 << 31), (1 << 31) - 1)
        _int("train", train, 0, 1 << 30)
        _int("dict_size", dict_size, 256, _ext.MAX_DICT)
        _int("maxsize", maxsize, 0, (1 << 63) - 1)
        _int("min_compress", min_compress, 0, 1 << 20)
        _int("max_key", max_key, 1, _ext.MAX_KEY - 1)
        if dict is not None:
            if isinstance(dict, str) or not isinstance(dict, (bytes, bytearray, memoryview)):
                raise TypeError(f"dict must be bytes, not {type(dict).__name__}")
            dict = bytes(dict)
        if train and name not in _TRAINABLE:
            raise _arg_error(f"train= needs codec 'zstd' or 'zstd-huf' (a trained dictionary is zstd's "
                             f"format), not {name!r}")
        if train and dict is not None:
            raise _arg_error("give either dict= or train=, not both")
        self._cfg: Dict[str, Any] = dict_(codec=name, level=level, min_compress=min_compress,
                                          max_key=max_key, maxsize=maxsize)
        self._dict: Optional[bytes] = dict
        self._dict_size = dict_size
        self._train_error: Optional[str] = None
        super().__init__(_CODECS[name], level, dict, maxsize, min_compress, max_key + 1)
        if train:
            self._sample([], train)

    # -- dictionary --
    @property
    def dictionary(self) -> Optional[bytes]:
        """The dictionary in use (given or trained), or None."""
        return self._dict

    def _train(self, samples: List[bytes], own_calls: int = 0) -> None:
        """Called by the C insert that stored the train-th value: train, then rebuild."""
        try:
            d = train_dict(samples, self._dict_size)
        except ValueError as e:        # too few or too uniform: keep going without one
            self._train_error = str(e)
            return
        self._rebuild(d, own_calls)

    def _rebuild(self, d: bytes, own_calls: int) -> None:
        c = self._cfg
        new = _ext.Cache(_CODECS[c["codec"]], c["level"], d, c["maxsize"], c["min_compress"],
                         c["max_key"] + 1)
        # other threads wait while the entries move, so none is lost or resurrected
        self._exclusive(own_calls)
        try:
            for k in list(self._keys()):
                v = self.get(k)
                if v is not None:
                    new[k] = v
            self._swap(new)
            self._dict = d
        finally:
            self._release()
            new.close()        # the old store, swapped into `new`

    def retrain(self, samples: Optional[Sequence[bytes]] = None, n: int = 1000) -> int:
        """Train a new zstd dictionary (on `samples`, else on up to n of the stored values),
        then recompress every entry with it; returns the dictionary's size.  O(entries);
        other threads' calls wait meanwhile.  ZsArgumentError for a codec other than zstd
        or too few / too uniform samples."""
        if self.closed:
            raise _arg_error("CompressedDict is closed")
        if self._cfg["codec"] not in _TRAINABLE:
            raise _arg_error(f"retrain needs codec 'zstd' or 'zstd-huf', not {self._cfg['codec']!r}")
        if samples is None:
            _int("n", n, 1, 1 << 30)
            samples = []
            for k in self._keys():
                v = self.get(k)
                if v is not None:
                    samples.append(v)
                if len(samples) >= n:
                    break
        d = train_dict(samples, self._dict_size)
        self._rebuild(d, 0)
        return len(d)

    # -- mapping --
    def _keys(self) -> Iterator[Key]:
        cur = 0
        nxt = self._next
        while True:
            r = nxt(cur)
            if r is None:
                return
            k, cur = r
            yield k

    def __iter__(self) -> Iterator[Key]:
        """Keys in the store's order (not insertion order).  Changing the size during the
        iteration raises RuntimeError, as a dict does."""
        n = len(self)
        for k in self._keys():
            if len(self) != n:
                raise RuntimeError("CompressedDict changed size during iteration")
            yield k
        if len(self) != n:
            raise RuntimeError("CompressedDict changed size during iteration")

    def __repr__(self) -> str:
        if self.closed:
            return "<CompressedDict closed>"
        return (f"<CompressedDict {len(self)} entries, codec {self._cfg['codec']}, "
                f"{self.memory()} bytes>")

    # -- capacity (cachetools' names) --
    @property
    def maxsize(self) -> int:
        """The capacity in real bytes (0: none)."""
        return int(self._cfg["maxsize"])

    @property
    def currsize(self) -> int:
        """Real bytes held now: memory()."""
        return self.memory()

    def stats(self) -> Dict[str, Any]:
        """The C cache's counters (entries, hits, misses, evictions, mem_bytes, value_bytes,
        stored_bytes, compaction...) plus ratio (value bytes per real byte), codec, dict_len
        and, when training failed, train_error."""
        st: Dict[str, Any] = super().stats()
        st["ratio"] = st["value_bytes"] / st["mem_bytes"] if st["mem_bytes"] else 0.0
        st["codec"] = self._cfg["codec"]
        st["dict_len"] = len(self._dict) if self._dict else 0
        if self._train_error:
            st["train_error"] = self._train_error
        return st

    # -- lifetime --
    def __enter__(self) -> "CompressedDict":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    def __reduce__(self) -> Tuple[Any, ...]:
        """Pickles the contents (decompressed) and the config; the copy is a new store."""
        if self.closed:
            raise _arg_error("CompressedDict is closed")
        cfg = dict_(self._cfg)
        cfg["dict"] = self._dict
        return (_restore, (cfg, [(k, self[k]) for k in list(self._keys())]))

    def __copy__(self) -> "CompressedDict":
        cfg, items = self.__reduce__()[1]
        return _restore(cfg, items)


dict_ = dict


def _restore(cfg: Dict[str, Any], items: List[Tuple[Key, bytes]]) -> CompressedDict:
    d = CompressedDict(cfg["codec"], cfg["level"], dict=cfg["dict"], maxsize=cfg["maxsize"],
                       min_compress=cfg["min_compress"], max_key=cfg["max_key"])
    for k, v in items:
        d[k] = v
    return d


def train_dict(samples: Sequence[bytes], dict_size: int = 16384) -> bytes:
    """See libzs.train_dict."""
    _int("dict_size", dict_size, 256, _ext.MAX_DICT)
    if isinstance(samples, (str, bytes, bytearray, memoryview)):
        raise TypeError("samples must be a list of bytes values, not one value")
    return _ext.train_dict(list(samples), dict_size)
