"""
libzs: Python bindings for the libzs C library (zsmalloc, zblock, zram in
user space), over ctypes.

This file owns the Python-facing API: Pool (a zsmalloc pool with its policy
config, handles as ints, bytes in and out, compaction and statistics),
Compressor, ZramStore (the compressed page store) and the exceptions.  C
errors (negative errno values, NULL returns) become ZsError, and EINVAL (C
refused an argument) ZsArgumentError, which is both a ValueError and a
ZsError.  Configs are validated by C alone: Python checks only types and that
an int fits its C field (so ctypes never truncates it); the ranges and C's
reason come from the create calls.  Per call, Python refuses wrong types,
sizes outside 1..the pool's largest object (max_object_size, by default the
page size; ENOSPC above it) and unknown, freed or stale
handles before C is called, so a caller cannot crash the process with a bad
handle.  Writes read any bytes-like object in place and read_into fills a
caller's buffer: no copy on the Python side.  Flag bits, enum values and
names come from the library (zs_const, zs_*_names), not from copies here.
The package is typed (py.typed; mypy passes on python/).

Pool handles are the C library's handles.  C puts a generation in each
handle, so a handle freed and handed out again is a different int, and a Pool
is always in checked mode: C refuses a freed or stale handle with EINVAL.  The
Pool keeps no per-object Python objects, only 8 bytes per handle (_SizeTable:
the object's size, which C does not record, and the handle's generation, which
lets the refusal say "stale" and before the C call).

Pool, ZramStore and Region start from one of C's two named profiles: profile="app" (the
default: zs_pool_config_init_app and the zram/region inits built on it, class copies per
CPU and zs_free without the pool lock) or profile="kernel" (zs_pool_config_init: the
kernel's layout, page for page); every zs_pool_config field is an option of all three
(POOL_OPTIONS), None keeping the profile's value, and the C create call checks the ranges.

The library is loaded when the package is imported: without a loadable
libzs.so, `import libzs` raises LibraryNotFound (an ImportError).

    import libzs
    with libzs.Pool(page_size=4096, chain=8, chain_policy="heuristic") as pool:
        h = pool.malloc(100)
        pool.write(h, b"x" * 100)
        assert pool.read(h) == b"x" * 100
        pool.free(h)
"""
from __future__ import annotations

import ctypes
import errno as _errno
import functools
import mmap
import os
import sys
import threading
import time
from typing import (Any, Callable, Dict, List, Optional, Sequence, Tuple, TypeVar, Union,
                    overload)

from . import _lib as _L
from ._lib import LibraryNotFound, library_path

__all__ = [
    "Pool", "Compressor", "ZramStore", "ZsError", "ZsArgumentError", "LibraryNotFound",
    "library_path",
    "ClassInfo", "ClassStats", "backend_kinds", "compressor_names", "page_same_filled",
    "CHAIN_POLICIES", "FREE_MODES", "PROFILES", "POOL_OPTIONS", "pool_profile",
    "CLASS_SHARDS_AUTO", "PAGES_NO_CACHE", "PAGES_DECAY_NEVER",
    "CompressedDict", "train_dict",
]
__version__ = "4.1.0"

# Any object with the buffer protocol (bytes, bytearray, memoryview, array.array, numpy
# arrays, mmap): the C library reads or fills its memory in place.  (typing has no
# name for it before Python 3.12's collections.abc.Buffer.)
Buffer = Any
Handle = int
_F = TypeVar("_F", bound=Callable[..., Any])
_C = TypeVar("_C", bound="_Closable")


class ZsError(OSError):
    """A libzs call failed; .errno holds the (positive) errno value."""

    def __init__(self, err: int, what: str) -> None:
        err = abs(int(err))
        super().__init__(err, f"{what}: {os.strerror(err)}")


class ZsArgumentError(ZsError, ValueError):
    """A bad argument, refused before C is called: a ZsError (errno EINVAL, or ENOSPC for a
    size above the page size) that is also a ValueError."""


_U64 = (1 << 64) - 1


def _int_arg(name: str, v: Any, lo: int, hi: int, err: int = _errno.EINVAL) -> int:
    """An int argument in lo..hi, checked here so that ctypes never truncates it."""
    if not isinstance(v, int) or isinstance(v, bool):
        raise TypeError(f"{name} must be an int, not {type(v).__name__}")
    if not lo <= v <= hi:
        raise ZsArgumentError(err if v > hi else _errno.EINVAL,
                              f"{name} {v} is outside {lo}..{hi}")
    return v


# Load the library now: a missing libzs.so is an import error, not a surprise at first use.
_L.lib()

# The compiled per-object calls (_ext.c), linked against the library just loaded (its soname
# is then already in the process).  A source tree used without `pip install` has no such
# module: the ctypes paths below still work, and CompressedDict says what is missing.
try:
    from . import _ext
    _ext._init(ZsError, ZsArgumentError)
    EXT_ERROR: Optional[str] = None
except ImportError:   # pragma: no cover - the installed package always has it
    _ext = None  # type: ignore[assignment]
    EXT_ERROR = ("the compiled module libzs._ext is not in this copy of the package (a source "
                 "tree used without installing it): pip install ./python")


def _check(rc: int, what: str) -> int:
    """A C return value, or its errno as the exception (EINVAL: ZsArgumentError, which is
    also a ValueError: C refused an argument)."""
    if rc < 0:
        raise ZsArgumentError(rc, what) if -rc == _errno.EINVAL else ZsError(rc, what)
    return rc


# The smallest C error return of a handle-returning call (ZS_IS_ERR: -4095..-1 as unsigned long)
_H_ERR_MIN = (1 << (8 * ctypes.sizeof(ctypes.c_ulong))) - 4095


def _is_err(h: int) -> bool:
    return h >= (1 << 64) - 4095 or h >= _H_ERR_MIN


def _to_bytes(data: Buffer) -> bytes:
    if isinstance(data, str):
        raise TypeError("data must be bytes-like, not str")
    return bytes(memoryview(data))


class _PyBuffer(ctypes.Structure):
    """CPython's Py_buffer (the buffer protocol's view, a stable part of the C API)."""
    _fields_ = [("buf", ctypes.c_void_p), ("obj", ctypes.c_void_p), ("len", ctypes.c_ssize_t),
                ("itemsize", ctypes.c_ssize_t), ("readonly", ctypes.c_int),
                ("ndim", ctypes.c_int), ("format", ctypes.c_char_p),
                ("shape", ctypes.c_void_p), ("strides", ctypes.c_void_p),
                ("suboffsets", ctypes.c_void_p), ("internal", ctypes.c_void_p)]


_get_buffer = ctypes.pythonapi.PyObject_GetBuffer
_get_buffer.argtypes = [ctypes.py_object, ctypes.POINTER(_PyBuffer), ctypes.c_int]
_get_buffer.restype = ctypes.c_int
_release_buffer = ctypes.pythonapi.PyBuffer_Release
_release_buffer.argtypes = [ctypes.POINTER(_PyBuffer)]
_release_buffer.restype = None
_PyBUF_SIMPLE, _PyBUF_WRITABLE = 0, 1


class _borrow:
    """
    with _borrow(data[, writable]) as (pointer, length): a bytes-like object's memory for
    the length of the block, with no copy: C reads a write's input, or fills a read_into's
    buffer, in place.  The object stays exported meanwhile (a bytearray cannot be resized
    under the C call, which runs without the GIL).  bytes are passed as they are; a
    read-only buffer that is not contiguous (a strided numpy view) is copied once, as
    before; a writable one must be contiguous.  A class, not a generator: it is on every
    write's path.
    """
    __slots__ = ("_data", "_writable", "_view")

    def __init__(self, data: Buffer, writable: bool = False) -> None:
        if isinstance(data, str):
            raise TypeError("data must be bytes-like, not str")
        self._data = data
        self._writable = writable
        self._view: Optional[_PyBuffer] = None

    def __enter__(self) -> Tuple[Any, int]:
        data = self._data
        if type(data) is bytes and not self._writable:
            return data, len(data)
        view = _PyBuffer()
        # recorded before the export is taken (releasing a view never taken does nothing):
        # an exception when the call returns (a signal handler's) must not leave the
        # caller's buffer exported for good, and __exit__ does not run for an __enter__
        # that raised
        self._view = view
        try:
            _get_buffer(data, view, _PyBUF_WRITABLE if self._writable else _PyBUF_SIMPLE)
        except (BufferError, ValueError):    # numpy says ValueError for a strided view
            self._view = None
            if self._writable:
                raise
            copy = bytes(memoryview(data))
            return copy, len(copy)
        except BaseException:
            _release_buffer(view)
            self._view = None
            raise
        return view.buf, view.len

    def __exit__(self, *exc: Any) -> None:
        view, self._view = self._view, None
        if view is not None:
            _release_buffer(view)


def _strs(ptr: Any) -> List[str]:
    out, i = [], 0
    while ptr[i]:
        out.append(ptr[i].decode())
        i += 1
    return out


def _c_names(names_fn: str, parse_fn: str) -> Dict[str, int]:
    """A named choice's names and values, as C spells and parses them (zsmalloc.h)."""
    out = {}
    for n in _strs(_L.need(names_fn)()):
        v = ctypes.c_int()
        _check(_L.need(parse_fn)(n.encode(), ctypes.byref(v)), parse_fn)
        out[n] = v.value
    return out


CHAIN_POLICIES = _c_names("zs_chain_policy_names", "zs_chain_policy_parse")
FREE_MODES = _c_names("zs_free_mode_names", "zs_free_mode_parse")
RECOMP_TYPES = {"all": _L.const("ZS_ZRAM_RECOMP_ALL"), "idle": _L.const("ZS_ZRAM_RECOMP_IDLE"),
                "huge": _L.const("ZS_ZRAM_RECOMP_HUGE"),
                "huge_idle": _L.const("ZS_ZRAM_RECOMP_HUGE_IDLE")}
# slot_info()'s flag bits, the kernel's names (zram.h ZS_ZRAM_F_*)
_SLOT_FLAGS = {"same": _L.const("ZS_ZRAM_F_SAME"), "huge": _L.const("ZS_ZRAM_F_HUGE"),
               "idle": _L.const("ZS_ZRAM_F_IDLE"),
               "incompressible": _L.const("ZS_ZRAM_F_INCOMPRESSIBLE"),
               "written_back": _L.const("ZS_ZRAM_F_WB")}

_usable_kinds: Optional[List[str]] = None


def backend_kinds(all: bool = False) -> List[str]:
    """
    Backends a ZramStore can use in this process ("zsmalloc", "zblock", "malloc", ...).
    Each kind compiled into the library is tried once; a kind that cannot run here (jemalloc,
    which cannot be dlopen'ed into Python because of its initial-exec TLS; mimalloc when its
    library is missing) is left out.  all=True: every kind compiled in, usable or not.
    """
    global _usable_kinds
    kinds = _strs(_L.need("zs_backend_kinds")())
    if all:
        return kinds
    if _usable_kinds is None:
        create, destroy = _L.need("zs_backend_create"), _L.need("zs_backend_destroy")
        usable = []
        for k in kinds:
            cfg = _L.BackendConfig()
            _L.need("zs_backend_config_init")(ctypes.byref(cfg))
            name = k.encode()
            cfg.kind = name
            cfg.page_size = 4096
            b = ctypes.c_void_p()
            if create(ctypes.byref(cfg), ctypes.byref(b), None, 0) == 0:
                destroy(b.value)
                usable.append(k)
        _usable_kinds = usable
    return list(_usable_kinds)


def page_same_filled(page: Buffer) -> bool:
    """
    True when zram keeps only this page's fill word: every machine word equal to the first
    (zs_zram_page_same_filled, the rule's one home in zs/zram.h).  page: a whole page of
    bytes, a non-zero multiple of the machine word.
    """
    with _borrow(page) as (p, n):
        if not n or n % ctypes.sizeof(ctypes.c_ulong):
            raise ValueError(f"a page is a non-zero multiple of {ctypes.sizeof(ctypes.c_ulong)} "
                             f"bytes, not {n}")
        return bool(_L.need("zs_zram_page_same_filled")(p, n, None))


def compressor_names() -> List[str]:
    """Base compressor names ("lz4", "lz4hc", "zstd", "lzo")."""
    return _strs(_L.need("zs_comp_names")())


def _choice(value: Any, table: Dict[str, int], what: str) -> int:
    if isinstance(value, int) and value in table.values():
        return value
    try:
        return table[value]
    except (KeyError, TypeError):
        # a bad argument value: ZsArgumentError (a ValueError too), as python/README.md says
        raise ZsArgumentError(_errno.EINVAL,
                              f"{what} must be one of {sorted(table)}, not {value!r}") from None


# Two named profiles, each filled by C (the rule has one home: zs_pool_config_init_app and
# zs_pool_config_init in zsmalloc.h, and the zram/region inits built on them).
#   "app"    (the default) the application profile: one copy of each size class per CPU
#            and zs_free without the pool lock; same class table and density
#   "kernel" today's kernel layout, page for page (compare with a kernel, replay traces)
PROFILES = ("app", "kernel")
_PROFILE_INIT = {
    "pool": {"app": "zs_pool_config_init_app", "kernel": "zs_pool_config_init"},
    "zram": {"app": "zs_zram_config_init_app", "kernel": "zs_zram_config_init"},
    "region": {"app": "zs_region_config_init_app", "kernel": "zs_region_config_init"},
}
# Pool options: Python name -> zs_pool_config field.  A None value leaves the profile's.
POOL_OPTIONS = {
    "name": "name", "page_size": "page_size", "chain": "max_chain", "delta": "class_delta",
    "chain_policy": "chain_policy", "free_mode": "free_mode", "checked": "checked",
    "max_pages": "max_pages", "deferred_capacity": "deferred_capacity",
    "deferred_worker": "deferred_worker", "page_cache_pages": "page_cache_pages",
    "page_cache_decay_ms": "page_cache_decay_ms", "class_shards": "class_shards",
    "max_object_size": "max_object_size", "fit_zspages": "fit_zspages",
    "autocompact_ms": "autocompact_ms", "autocompact_pct": "autocompact_pct",
    "autocompact_min_bytes": "autocompact_min_bytes",
}
CLASS_SHARDS_AUTO = _L.ZS_CLASS_SHARDS_AUTO
PAGES_NO_CACHE = _L.ZS_PAGES_NO_CACHE
PAGES_DECAY_NEVER = _L.ZS_PAGES_DECAY_NEVER
_SPECIAL = {"class_shards": ("auto", CLASS_SHARDS_AUTO),
            "page_cache_pages": ("none", PAGES_NO_CACHE),
            "page_cache_decay_ms": ("never", PAGES_DECAY_NEVER)}


def _profile_init(what: str, profile: Any, cfg: Any) -> Any:
    """Fill cfg with a profile's defaults (the C init_app or kernel init)."""
    table = _PROFILE_INIT[what]
    if not isinstance(profile, str) or profile not in table:
        raise ZsArgumentError(_errno.EINVAL, "profile must be one of "
                              f"{', '.join(map(repr, PROFILES))} ('app': the application "
                              "profile, the default; 'kernel': the kernel's layout, "
                              f"page-exact with it), not {profile!r}")
    _L.need(table[profile])(ctypes.byref(cfg))
    return cfg


def _c_int_arg(name: str, v: Any, ctype: Any) -> int:
    """An int that fits the C field's type (so ctypes never truncates it); its range is C's."""
    bits = 8 * ctypes.sizeof(ctype)
    signed = ctype(-1).value == -1
    lo, hi = (-(1 << (bits - 1)), (1 << (bits - 1)) - 1) if signed else (0, (1 << bits) - 1)
    return _int_arg(name, v, lo, hi)


def _set_pool_options(cfg: Any, opts: Dict[str, Any], keep: List[Any]) -> Any:
    """
    Write the given pool options (Python names, None: leave the profile's) into a
    zs_pool_config filled by a profile.  Only types and widths are checked here (a name
    that C has no such choice for, an int that does not fit its field); the values' ranges
    are the create call's to refuse.  keep: a list that keeps encoded strings alive.
    """
    for opt, v in opts.items():
        if v is None:
            continue
        field = POOL_OPTIONS[opt]
        if opt == "name":
            if not isinstance(v, str):
                raise TypeError(f"name must be a str, not {type(v).__name__}")
            keep.append(v.encode())
            cfg.name = keep[-1]
        elif opt == "chain_policy":
            cfg.chain_policy = _choice(v, CHAIN_POLICIES, "chain_policy")
        elif opt == "free_mode":
            cfg.free_mode = _choice(v, FREE_MODES, "free_mode")
        elif opt == "checked":
            cfg.checked = 1 if v else 0
        elif opt == "deferred_worker":
            cfg.deferred_worker = 1 if v else -1
        elif opt == "fit_zspages":
            cfg.fit_zspages = 1 if v else 0
        else:
            word, value = _SPECIAL.get(opt, (None, None))
            if word is not None and v == word:
                v = value
            elif not isinstance(v, int) or isinstance(v, bool):
                # a ValueError, as pool options have always raised for a bad value
                raise ZsArgumentError(_errno.EINVAL, f"{opt} must be an int"
                                      + (f" or {word!r}" if word else "") + f", not {v!r}")
            setattr(cfg, field, _c_int_arg(opt, v, dict(_L.PoolConfig._fields_)[field]))
    return cfg


def _pool_config_dict(cfg: Any) -> Dict[str, Any]:
    """A zs_pool_config as Python option names and values (strings for the named choices)."""
    out: Dict[str, Any] = {}
    for opt, field in POOL_OPTIONS.items():
        v = getattr(cfg, field)
        if opt == "name":
            v = v.decode() if v else None
        elif opt == "chain_policy":
            v = {n: k for k, n in CHAIN_POLICIES.items()}.get(v, v)
        elif opt == "free_mode":
            v = {n: k for k, n in FREE_MODES.items()}.get(v, v)
        elif opt == "checked":
            v = bool(v)
        elif opt == "deferred_worker":
            v = v != -1
        elif opt == "fit_zspages":
            v = bool(v)
        elif opt in _SPECIAL and v == _SPECIAL[opt][1]:
            v = _SPECIAL[opt][0]
        out[opt] = v
    return out


def pool_profile(profile: str = "app") -> Dict[str, Any]:
    """The pool options a profile sets ("app" or "kernel"), as the C library fills them
    (zs_pool_config_init_app / zs_pool_config_init): a dict of POOL_OPTIONS names."""
    return _pool_config_dict(_profile_init("pool", profile, _L.PoolConfig()))


def _zspool_config(zram: Any) -> Optional[Dict[str, Any]]:
    """The zsmalloc pool config of a C zram store (dict, class_shards as the pool has them
    in "shards"), or None for a backend that is not zsmalloc."""
    b = _L.need("zs_zram_backend")(zram)
    pool = _L.need("zs_backend_zspool")(b) if b else None
    if not pool:
        return None
    out = _pool_config_dict(_L.need("zs_pool_get_config")(pool).contents)
    out["shards"] = _L.need("zs_pool_class_shards")(pool)
    return out


def _create_error(rc: int, what: str, reason: Optional[str],
                  given: Dict[str, Any]) -> ZsError:
    """The error for a refused create: EINVAL (a config C refuses) is a ZsArgumentError."""
    opts = ", ".join(f"{k}={v!r}" for k, v in given.items() if v is not None)
    if reason and reason.startswith(what.split()[0] + ":"):
        reason = reason[len(what.split()[0]) + 1:].strip()
    msg = what + (f": {reason}" if reason else "") + (f" (options: {opts})" if opts else "")
    if abs(rc) == _errno.EINVAL:
        return ZsArgumentError(rc, msg)
    return ZsError(rc, msg)


class ClassInfo:
    """Geometry of one logical size class (struct zs_class_info)."""
    __slots__ = ("index", "phys_index", "size", "phys_size", "pages_per_zspage",
                 "objs_per_zspage", "tail_waste", "spanning", "huge")

    index: int
    phys_index: int
    size: int
    phys_size: int
    pages_per_zspage: int
    objs_per_zspage: int
    tail_waste: int
    spanning: int
    huge: bool

    def __init__(self, c: Any) -> None:
        for f in self.__slots__:
            setattr(self, f, getattr(c, f))
        self.huge = bool(self.huge)

    def as_dict(self) -> Dict[str, Any]:
        return {f: getattr(self, f) for f in self.__slots__}

    def __repr__(self) -> str:
        return f"ClassInfo({self.as_dict()})"


class ClassStats:
    """Per physical class statistics (the kernel's debugfs "classes" columns)."""
    __slots__ = ("index", "size", "fullness", "obj_allocated", "obj_used", "pages_used",
                 "pages_per_zspage", "objs_per_zspage", "freeable")

    index: int
    size: int
    fullness: List[int]
    obj_allocated: int
    obj_used: int
    pages_used: int
    pages_per_zspage: int
    objs_per_zspage: int
    freeable: int

    def __init__(self, c: Any) -> None:
        for f in self.__slots__:
            v = getattr(c, f)
            setattr(self, f, list(v) if f == "fullness" else v)

    def as_dict(self) -> Dict[str, Any]:
        return {f: getattr(self, f) for f in self.__slots__}

    def __repr__(self) -> str:
        return f"ClassStats({self.as_dict()})"


class _Gate:
    """
    A C object that several threads may call at once, and close(): hold it (with
    gate.hold():, then gate.ptr() inside the block) around each C call; close_with()
    refuses new calls (ptr() raises closed_error()), waits for the calls in flight and
    destroys the object, once.  So a use after close(), or a close()
    racing a call on another thread, raises a ValueError instead of reaching freed C memory.

    A call in flight is a memoryview of a private bytearray, not a counter: a
    KeyboardInterrupt (or any exception a signal handler raises) can come between any two
    calls a Python-level __enter__ makes, so a counter raised there could stay raised and
    close() wait forever.  A memoryview made by one C call and entered by the with
    statement goes away whichever way the block is left or never entered (the interpreter
    drops it), so the bytearray's reference count is the number of calls in flight.
    """
    __slots__ = ("_mu", "_ba", "_ptr", "_taken", "_closed_error", "hold", "_idle",
                 "__weakref__")

    def __init__(self, ptr: Any, closed_error: Callable[[], Exception]) -> None:
        self._mu = threading.Lock()
        self._ba = bytearray(1)
        self._ptr = ptr
        self._taken: Any = None     # owed a destroy by close_with(), kept through an interrupt
        self._closed_error = closed_error
        # a C callable: no bytecode runs between making the memoryview and entering it
        self.hold: Callable[[], memoryview] = functools.partial(memoryview, self._ba)
        self._idle = sys.getrefcount(self._ba)

    def ptr(self) -> Any:
        p = self._ptr
        if p is None:
            raise self._closed_error()
        return p

    @property
    def closed(self) -> bool:
        return self._ptr is None

    def close_with(self, destroy: Callable[[Any], Any]) -> bool:
        """Refuse new calls, wait for those in flight, then destroy(pointer), once: True
        if this call destroyed it.  Interrupted while it waits, the next close_with() waits
        again and destroys; the pointer is handed from the gate to destroy() with no
        bytecode between at which an exception could drop it."""
        with self._mu:
            if self._ptr is not None:
                self._taken, self._ptr = self._ptr, None
        delay = 1e-5
        while sys.getrefcount(self._ba) > self._idle:
            time.sleep(delay)
            delay = min(delay * 2, 0.005)
        with self._mu:
            p, self._taken = self._taken, None
            if p is None:
                return False
            destroy(p)
            return True


def _gated(fn: _F) -> _F:
    """A method that calls C on self._gate's object (see _Gate)."""
    @functools.wraps(fn)
    def wrapper(self: Any, *args: Any, **kwargs: Any) -> Any:
        gate = self._gate
        with gate.hold():
            gate.ptr()
            return fn(self, *args, **kwargs)
    return wrapper  # type: ignore[return-value]


def _locked(fn: _F) -> _F:
    """A method run under self._lock (an RLock): its C calls and Python-side tables change
    together, as one step, for every thread (ctypes lets other threads run during a C call)."""
    @functools.wraps(fn)
    def wrapper(self: Any, *args: Any, **kwargs: Any) -> Any:
        with self._lock:
            return fn(self, *args, **kwargs)
    return wrapper  # type: ignore[return-value]


def _pool_op(fn: _F) -> _F:
    """A Pool method: run under the pool lock, after the journal is settled (Pool._settle)."""
    @functools.wraps(fn)
    def wrapper(self: Any, *args: Any, **kwargs: Any) -> Any:
        with self._lock:
            if self._journal:
                self._sizes.settle(self._journal)
            return fn(self, *args, **kwargs)
    return wrapper  # type: ignore[return-value]


class _Closable:
    """with-statement and finalizer support for objects that own a C handle (close() frees it)."""

    def close(self) -> None:
        raise NotImplementedError

    def __enter__(self: _C) -> _C:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    def __del__(self) -> None:
        try:
            self.close()
        except Exception:
            pass


# The C handle's layout (src/zsmalloc/internal.h, "A handle is its slot's address plus a
# generation"; src/zsmalloc/handle.c): bits 3-47 the address of an 8-byte slot in a 64 KiB
# aligned chunk whose slot 0 is never a handle, bits 1-2 and 48-59 the slot's generation, the
# other bits 0.  _SizeTable leans on it; tests/test_pool.py checks it against the library.
_H_ADDR = 0x0000_FFFF_FFFF_FFF8
_H_GEN = 0x0FFF_0000_0000_0006
_H_CHUNK_SHIFT = 16
_H_CHUNK_BYTES = 1 << _H_CHUNK_SHIFT


# The Pool's journal (Pool._settle).  A record is appended by the same C-level call that
# makes the C call, so no bytecode, where a signal handler can raise, runs between them:
#   (_J_ADD, handle or error, size)    zs_malloc / zs_malloc_write returned
#   (_J_FREE, rc, handle, size)        zs_free / zs_free_deferred returned rc
#   (_J_PLAN, ...)                     the record's table change, being stored (_SizeTable.settle)
_J_ADD, _J_FREE, _J_PLAN = "add", "free", "plan"
_J_ADD_TAG, _J_FREE_TAG = (_J_ADD,), (_J_FREE,)


class _SizeTable:
    """
    The ctypes path's table (a source tree without the compiled module; with it, _ext.c's
    Objects keeps the same table in C and needs no journal).
    What the C pool does not keep and Python needs: each live object's size (read() returns
    exactly what was stored), and its handle (handles(), the stale-handle message).  One
    table per C handle chunk, indexed like the chunk's 8-byte slots, so 8 bytes per handle
    where a dict cost about 230: a live slot's entry is its handle's non-address bits (the
    generation) with the object's size in the address bits, a free one 0, and entry 0 (slot
    0 is never a handle) counts the chunk's live objects; a table goes with its last object.
    Tables are anonymous mmaps, so a dropped one goes back to the OS at once (a 64 KiB
    malloc block in the middle of the heap would stay resident).  Callers hold the pool lock,
    and change it only through settle() (Pool._settle).
    """
    __slots__ = ("_t", "n", "nbytes")

    def __init__(self) -> None:
        self._t: Dict[int, memoryview] = {}   # chunk number -> memoryview('Q') of its slots
        self.n = 0          # live objects
        self.nbytes = 0     # their sizes, summed

    def entry(self, h: int) -> int:
        t = self._t.get((h & _H_ADDR) >> _H_CHUNK_SHIFT)
        return t[(h & (_H_CHUNK_BYTES - 1)) >> 3] if t is not None else 0

    def settle(self, journal: List[Tuple[Any, ...]]) -> None:
        """
        Carry a Pool's journal records (Pool._settle) into the table, oldest first.  Each
        record is first planned: the plan only reads the table (a chunk's new table is made
        then, not yet linked) and holds every value the change leaves, absolute, not as
        increments; it replaces the record in the journal by one item assignment and is
        then stored.  So an exception at any bytecode leaves the record (nothing changed
        yet) or its plan, which a second settle() stores again with the same result.  One
        method, with plan and store inline: it runs twice on every store and free.
        """
        t_of = self._t
        while journal:
            rec = journal[0]
            if rec[0] is not _J_PLAN:
                if rec[0] is _J_ADD:
                    _, h, size = rec
                    if h >= _H_ERR_MIN:                 # C refused: nothing was made
                        del journal[0]
                        continue
                    key = (h & _H_ADDR) >> _H_CHUNK_SHIFT
                    t = t_of.get(key)
                    if t is None:
                        t = memoryview(mmap.mmap(-1, _H_CHUNK_BYTES,
                                                 flags=mmap.MAP_PRIVATE)).cast("Q")
                    rec = (_J_PLAN, key, t, (h & (_H_CHUNK_BYTES - 1)) >> 3,
                           (h & ~_H_ADDR) | (size << 3), t[0] + 1, self.n + 1,
                           self.nbytes + size)
                else:                                    # _J_FREE
                    _, rc, h, size = rec
                    if rc < 0:                           # C refused: nothing was freed
                        del journal[0]
                        continue
                    key = (h & _H_ADDR) >> _H_CHUNK_SHIFT
                    t = t_of[key]
                    rec = (_J_PLAN, key, t, (h & (_H_CHUNK_BYTES - 1)) >> 3, 0, t[0] - 1,
                           self.n - 1, self.nbytes - size)
                journal[0] = rec
            _, key, table, i, e, live, n, nbytes = rec
            table[i] = e
            table[0] = live
            if live:
                t_of[key] = table
            else:
                t_of.pop(key, None)
            self.n = n
            self.nbytes = nbytes
            del journal[0]

    def handles(self) -> List[int]:
        return [(key << _H_CHUNK_SHIFT) | (i << 3) | (e & ~_H_ADDR)
                for key, t in self._t.items() for i, e in enumerate(t) if i and e]

    def close(self) -> None:
        self._t.clear()
        self.n = self.nbytes = 0


def _size_of_entry(e: int) -> int:
    return (e & _H_ADDR) >> 3


# The C calls on every object's path, looked up once (the rest go through _L.need).
_c_zs_malloc = _L.need("zs_malloc")
_c_zs_malloc_write = _L.need("zs_malloc_write")
_c_zs_free = _L.need("zs_free")
_c_zs_free_deferred = _L.need("zs_free_deferred")
_c_zs_obj_read_begin = _L.need("zs_obj_read_begin")
_c_zs_obj_read_end = _L.need("zs_obj_read_end")
_c_zs_obj_write = _L.need("zs_obj_write")


class Pool(_Closable):
    """
    A zsmalloc pool.  Handles are the C library's handles (ints below 2**60).

    profile    "app" (default): the application profile, zs_pool_config_init_app (one
               copy of each size class per CPU, zs_free without the pool lock; same
               class table and density as the kernel's) | "kernel": zs_pool_config_init,
               today's kernel layout page for page (compare with a kernel, replay traces)
    Options (all optional; None or left out: the profile's value), the fields of struct
    zs_pool_config (include/zs/zsmalloc.h has each range; the C library refuses a value
    outside it, raised as ZsArgumentError, errno EINVAL):
      name           for stats output (C truncates to 31 bytes)
      page_size      4096..65536, power of two
      chain          max pages per zspage, 1..16 (both profiles: 8)
      delta          class delta in bytes (0: kernel's max(page_size/256, 16))
      chain_policy   "exhaustive" (kernel today) | "heuristic" (seed 002)
      free_mode      "pool" (kernel profile) | "class" (app profile) | "class-unlocked"
      checked        must stay True: C validates every handle (checked mode), which is
                     what turns a freed or stale handle into an exception, not a crash
      max_pages      page limit, malloc raises ZsError(ENOMEM) past it (0: none)
      deferred_capacity, deferred_worker
                     free(deferred=True)'s queue length (0: C's default) and whether a
                     background thread drains it (False: only flush() and a full queue)
      page_cache_pages, page_cache_decay_ms
                     freed pages kept mapped for reuse (0: C's default, "none": none) and
                     how long an unused one stays (0: C's default, "never": no decay)
      class_shards   copies of each size class, one used per CPU (0/1: the kernel's one;
                     "auto": one per online CPU, the app profile's); more lets threads
                     allocate without meeting (docs/policies.md)
      max_object_size
                     the largest object in bytes (0: the page size, the kernel's limit);
                     page_size..16 x page_size: an object over a page takes a zspage of
                     ceil(size / page_size) pages of its own (docs/policies.md "Objects
                     larger than a page")
      fit_zspages    True (the app profile's): compaction leaves each class's last partly
                     used zspage no longer than its objects need (docs/policies.md "Fitted
                     zspages"); False: every zspage the class's chain length (the kernel's)
      autocompact_ms, autocompact_pct, autocompact_min_bytes
                     self-compaction when idle (zs/zsmalloc.h "Self-compaction"; the app
                     profile's autocompact_ms is 200, 0 turns it off)
    config is the pool's config as C holds it (option names, plus "profile"); class_shards
    (the property) the copies the pool has.
    Per object the package keeps 8 bytes (its size table) beside the C pool's own cost.
    """

    def __init__(self, page_size: Optional[int] = None, chain: Optional[int] = None,
                 delta: Optional[int] = None, chain_policy: Optional[str] = None,
                 free_mode: Optional[str] = None, checked: bool = True,
                 max_pages: Optional[int] = None, deferred_capacity: Optional[int] = None,
                 deferred_worker: Optional[bool] = None,
                 class_shards: Union[int, str, None] = None, *, profile: str = "app",
                 name: Optional[str] = None, page_cache_pages: Union[int, str, None] = None,
                 page_cache_decay_ms: Union[int, str, None] = None,
                 max_object_size: Optional[int] = None,
                 fit_zspages: Optional[bool] = None, autocompact_ms: Optional[int] = None,
                 autocompact_pct: Optional[int] = None,
                 autocompact_min_bytes: Optional[int] = None) -> None:
        if not checked:
            raise ZsArgumentError(_errno.EINVAL, "a Python Pool is always checked: C's "
                                  "checked mode is what refuses a freed or stale handle")
        given = {"page_size": page_size, "chain": chain, "delta": delta,
                 "chain_policy": chain_policy, "free_mode": free_mode, "checked": True,
                 "max_pages": max_pages, "deferred_capacity": deferred_capacity,
                 "deferred_worker": deferred_worker, "class_shards": class_shards,
                 "name": name, "page_cache_pages": page_cache_pages,
                 "page_cache_decay_ms": page_cache_decay_ms, "max_object_size": max_object_size,
                 "fit_zspages": fit_zspages, "autocompact_ms": autocompact_ms,
                 "autocompact_pct": autocompact_pct,
                 "autocompact_min_bytes": autocompact_min_bytes}
        keep: List[Any] = []
        cfg = _set_pool_options(_profile_init("pool", profile, _L.PoolConfig()), given, keep)
        out = ctypes.c_void_p()
        err = ctypes.create_string_buffer(512)
        rc = _L.need("zs_pool_create")(ctypes.byref(cfg), ctypes.byref(out), err, len(err))
        if rc < 0:
            given.pop("checked")
            raise _create_error(rc, "zs_pool_create", err.value.decode(errors="replace"),
                                dict(profile=profile, **given))
        p = out.value
        assert p is not None   # rc 0 always sets *out (zs/zsmalloc.h: zs_pool_create)
        # One lock for the C calls and the size table: ctypes releases the GIL during a C
        # call, so without it a free's table update could land after another thread's
        # malloc got the same slot back (and close() could free the pool under a call).
        self._lock = threading.RLock()
        self._p: Optional[int] = p
        self._x: Optional[_ext.Objects] = None   # the compiled table, when there is one
        self._sizes = _SizeTable()
        self._journal: List[Tuple[Any, ...]] = []   # C calls not yet in _sizes (_settle)
        self._page_size = _L.need("zs_pool_page_size")(p)
        self.config = dict(_pool_config_dict(_L.need("zs_pool_get_config")(p).contents),
                           profile=profile)
        # zs_malloc's limit (zsmalloc.h: max_object_size, 0 meaning one page)
        self._max_size = self.config["max_object_size"] or self._page_size
        if _ext is not None:
            # the compiled module keeps the table itself, updated in the same C function as
            # each C call (_ext.c, "Pool objects"): no journal, one C call per object
            self._x = _ext.Objects(p, self._max_size)

    @property
    def class_shards(self) -> int:
        """Copies of each size class the pool has (1: the kernel's layout)."""
        with self._lock:
            return int(_L.need("zs_pool_class_shards")(self._pool()))

    # -- lifetime --
    def close(self) -> None:
        """Destroy the pool and every object in it (one C call: it does not look at signals,
        a KeyboardInterrupt during it is raised when it returns, the pool destroyed)."""
        lock = getattr(self, "_lock", None)
        if lock is None:
            return
        with lock:
            # the pointer leaves self before the C call: an exception after the call cannot
            # leave a destroyed pool for a second close() or __del__ to destroy again
            p, self._p = self._p, None
            # the compiled table refuses new calls and waits for stores in flight first
            x = getattr(self, "_x", None)    # absent when __init__ stopped early
            if x is not None:
                x.close()
            self._sizes.close()
            if p:
                _L.need("zs_destroy_pool")(p)
            self._journal.clear()

    def _settle(self) -> None:
        """
        Bring the size table up to date from the journal; the caller holds the lock.  Every
        C call that makes or frees an object appends its record in the same C-level call
        (list.extend over map(): the ctypes call and the append run inside one bytecode),
        so a KeyboardInterrupt, or any exception a signal handler raises, either comes
        before the C call (nothing happened) or finds the record in the journal; settling
        it (_SizeTable.settle) can itself be interrupted at any bytecode and finished by the
        next call into the pool (any method, len()) with the same result.  So len(p),
        stats(), handles() and the C pool agree after any interrupt, and handles() lists
        every object that C holds.
        """
        self._sizes.settle(self._journal)

    def _pool(self) -> Any:
        if not getattr(self, "_p", None):
            raise ZsArgumentError(_errno.EINVAL, "pool is closed")
        return self._p

    def _entry(self, handle: Any) -> int:
        """The size table's entry of a handle that is live in this pool, else raise."""
        if not isinstance(handle, int) or isinstance(handle, bool):
            raise TypeError(f"handle must be an int, not {type(handle).__name__}")
        self._pool()
        if not 0 < handle <= _U64 or handle & ~(_H_ADDR | _H_GEN):
            raise ZsArgumentError(_errno.EINVAL, f"handle {handle:#x} is not a handle")
        e = self._sizes.entry(handle)
        if not e:
            raise ZsArgumentError(_errno.EINVAL, f"handle {handle:#x} is not live in this "
                                  f"pool (freed, or never one of its handles)")
        if (e ^ handle) & ~_H_ADDR:
            raise self._stale(handle)
        return e

    @staticmethod
    def _stale(handle: int) -> ZsArgumentError:
        return ZsArgumentError(_errno.EINVAL, f"handle {handle:#x} is stale: it was freed "
                               f"and its slot now holds another object (generation differs)")

    def _refused(self, handle: int, what: str) -> ZsArgumentError:
        """C's checked mode refused a handle the table took for live: say which way."""
        e = self._sizes.entry(handle)
        if e and (e ^ handle) & ~_H_ADDR:
            return self._stale(handle)
        return ZsArgumentError(_errno.EINVAL, f"{what}: handle {handle:#x} refused by "
                               f"checked mode (not a live handle of this pool)")

    # -- objects --
    @property
    def page_size(self) -> int:
        self._pool()
        return int(self._page_size)

    @property
    def max_object_size(self) -> int:
        """The largest object malloc takes: max_object_size, or the page size by default."""
        self._pool()
        return int(self._max_size)

    def malloc(self, size: int) -> Handle:
        """Allocate size bytes (1..max_object_size, by default the page size); returns a
        handle.  Size 0 or above that raises ZsArgumentError (errno EINVAL / ENOSPC) before
        C is called."""
        x = self._x
        if x is not None:
            return x.malloc(size)
        return self._malloc(size)

    @_pool_op
    def _malloc(self, size: int) -> Handle:
        pool = self._pool()
        _int_arg("zs_malloc size", size, 1, self._max_size, _errno.ENOSPC)
        j = self._journal
        j.extend(zip(_J_ADD_TAG, map(_c_zs_malloc, (pool,), (size,)), (size,)))
        h = j[-1][1]
        self._sizes.settle(j)
        if _is_err(h):
            raise ZsError(h - (1 << (8 * ctypes.sizeof(ctypes.c_ulong))), f"zs_malloc({size})")
        return int(h)

    def free(self, handle: Handle, deferred: bool = False) -> None:
        """Free an object (deferred=True: zs_free_deferred, see flush())."""
        x = self._x
        if x is not None:
            x.free(handle, deferred)
            return
        self._free(handle, deferred)

    @_pool_op
    def _free(self, handle: Handle, deferred: bool) -> None:
        size = _size_of_entry(self._entry(handle))
        fn = "zs_free_deferred" if deferred else "zs_free"
        j = self._journal
        j.extend(zip(_J_FREE_TAG, map(_c_zs_free_deferred if deferred else _c_zs_free,
                                      (self._p,), (handle,)), (handle,), (size,)))
        rc = j[-1][1]
        self._sizes.settle(j)
        if rc < 0:
            raise self._refused(handle, fn)

    @_pool_op
    def flush(self) -> None:
        """Wait until every deferred free issued so far is done.  One C call: it does not
        look at signals; a KeyboardInterrupt during it is raised when it returns."""
        _L.need("zs_free_deferred_flush")(self._pool())

    def write(self, handle: Handle, data: Buffer, offset: int = 0) -> None:
        """Write a bytes-like object at the start of the object (its length <= the object's
        size).  C reads the buffer in place: no copy is made on the Python side."""
        x = self._x
        if x is not None:
            x.write(handle, data, offset)
            return
        self._write(handle, data, offset)

    @_pool_op
    def _write(self, handle: Handle, data: Buffer, offset: int) -> None:
        size = _size_of_entry(self._entry(handle))
        if offset != 0:
            raise ValueError("only offset 0 is supported (zs_obj_write writes from the start)")
        with _borrow(data) as (p, n):
            if n > size:
                raise ValueError(f"{n} bytes do not fit in a {size}-byte object")
            if _c_zs_obj_write(self._p, handle, p, n) < 0:
                raise self._refused(handle, "zs_obj_write")

    def read_into(self, handle: Handle, buffer: Buffer, length: Optional[int] = None) -> int:
        """Copy the first `length` bytes of the object (default: all of it) into the start
        of a writable contiguous buffer (bytearray, memoryview, numpy array, mmap) at least
        that long; returns the bytes copied.  No bytes object is made."""
        x = self._x
        if x is not None:
            return x.read_into(handle, buffer, length)
        with self._lock:
            if self._journal:
                self._sizes.settle(self._journal)
            return self._read_into(handle, buffer, length)

    def _read_into(self, handle: Handle, buffer: Buffer, length: Optional[int]) -> int:
        size = _size_of_entry(self._entry(handle))
        if length is None:
            length = size
        if not isinstance(length, int) or isinstance(length, bool) or not 0 <= length <= size:
            raise ValueError(f"length must be in 0..{size}, not {length!r}")
        with _borrow(buffer, writable=True) as (dst, n):
            if n < length:
                raise ValueError(f"buffer of {n} bytes is shorter than {length}")
            if length == 0:
                return 0
            # an object that spans two pages is assembled in dst itself (the local copy)
            begun: List[Any] = []
            try:
                # the pointer lands in begun inside the call (see read()), so an interrupt
                # after zs_obj_read_begin still reaches the zs_obj_read_end below
                begun.extend(map(_c_zs_obj_read_begin, (self._p,), (handle,),
                                 (length,), (dst,)))
                p = begun[0]
                if not p:
                    raise self._refused(handle, "zs_obj_read_begin")
                if p != dst:
                    ctypes.memmove(dst, p, length)
            finally:
                if begun and begun[0]:
                    _c_zs_obj_read_end(self._p, handle, length, begun[0])
        return length

    def read(self, handle: Handle, length: Optional[int] = None) -> bytes:
        """Return the first `length` bytes of the object (default: all of it, exactly the
        bytes stored: the pool records each object's length)."""
        x = self._x
        if x is not None:
            return x.read(handle, length)
        with self._lock:
            if self._journal:
                self._sizes.settle(self._journal)
            return self._read(handle, length)

    def _read(self, handle: Handle, length: Optional[int]) -> bytes:
        size = _size_of_entry(self._entry(handle))
        if length is None:
            length = size
        if not isinstance(length, int) or length < 0 or length > size:
            raise ValueError(f"length must be in 0..{size}, not {length!r}")
        if length == 0:
            return b""
        copy = ctypes.create_string_buffer(length)
        begun: List[Any] = []
        try:
            # zs_obj_read_begin pins the object until zs_obj_read_end; its result is
            # appended inside the same C-level call, so an exception raised when the call
            # returns (a signal handler's) still finds it here and the finally ends the read
            begun.extend(map(_c_zs_obj_read_begin, (self._p,), (handle,), (length,),
                             (copy,)))
            p = begun[0]
            if not p:
                raise self._refused(handle, "zs_obj_read_begin")
            return ctypes.string_at(p, length)
        finally:
            if begun and begun[0]:
                _c_zs_obj_read_end(self._p, handle, length, begun[0])

    def store(self, data: Buffer) -> Handle:
        """malloc + write: keep a bytes-like object (read in place; a non-contiguous one is
        copied once), return the handle; read(handle) gives back exactly these bytes.
        One C call (zs_malloc_write); the size limits and errors are malloc's."""
        x = self._x
        if x is not None:
            return x.store(data)
        with self._lock:
            if self._journal:
                self._sizes.settle(self._journal)
            return self._store_ctypes(self._pool(), data)

    def _store_ctypes(self, pool: Any, data: Buffer) -> Handle:
        with _borrow(data) as (p, n):
            _int_arg("zs_malloc size", n, 1, self._max_size, _errno.ENOSPC)
            j = self._journal
            j.extend(zip(_J_ADD_TAG, map(_c_zs_malloc_write, (pool,), (p,), (n,)), (n,)))
            h = j[-1][1]
            self._sizes.settle(j)
            if _is_err(h):
                raise ZsError(h - (1 << (8 * ctypes.sizeof(ctypes.c_ulong))),
                              f"zs_malloc_write({n})")
        return int(h)

    @_pool_op
    def handles(self) -> List[Handle]:
        """The live handles (a new list)."""
        return self._table().handles()

    def __len__(self) -> int:
        if self._journal:
            with self._lock:
                self._settle()
        return self._table().n

    def _table(self) -> Union[_SizeTable, "_ext.Objects"]:
        """Where the objects are counted: the compiled table, else the Python one."""
        return self._sizes if self._x is None else self._x

    # -- pool --
    @_pool_op
    def compact(self) -> int:
        """Compact every class; returns pages freed.  One C call (zs_compact has no
        per-class entry point): it does not look at signals, and a KeyboardInterrupt that
        arrives during it is raised when it returns, the compaction done.  Compaction moves
        objects but changes no handle, so nothing is lost either way (150,000 live objects
        of 700 bytes among 150,000 freed: 0.22 s here)."""
        return int(_L.need("zs_compact")(self._pool()))

    @_pool_op
    def total_pages(self) -> int:
        """Pool pages in use (the kernel's pages_allocated)."""
        return int(_L.need("zs_get_total_pages")(self._pool()))

    @_pool_op
    def trim(self) -> None:
        """Return cached pages and unused handle memory to the OS (zs_pool_trim).  One C
        call: a KeyboardInterrupt during it is raised when it returns."""
        _L.need("zs_pool_trim")(self._pool())

    @_pool_op
    def huge_class_size(self) -> int:
        return int(_L.need("zs_huge_class_size")(self._pool()))

    @_pool_op
    def class_index(self, size: int) -> int:
        """Physical class index for a request of `size` bytes."""
        _int_arg("size", size, 1, self.max_object_size, _errno.ENOSPC)
        return _check(_L.need("zs_lookup_class_index")(self._pool(), size), "zs_lookup_class_index")

    @_pool_op
    def stats(self) -> Dict[str, Any]:
        st = _L.PoolStats()
        _L.need("zs_pool_stats")(self._pool(), ctypes.byref(st), ctypes.sizeof(st))
        ps = self.page_size
        pages = self.total_pages()
        t = self._table()
        used = t.nbytes
        return {"pages": pages, "mem_bytes": pages * ps, "objects": t.n,
                "object_bytes": used,
                "utilization": used / (pages * ps) if pages else 0.0,
                "pages_compacted": st.pages_compacted}

    @_pool_op
    def class_count(self) -> int:
        return int(_L.need("zs_class_count")(self._pool()))

    @overload
    def class_info(self, index: int) -> ClassInfo: ...
    @overload
    def class_info(self, index: None = None) -> List[ClassInfo]: ...

    @_pool_op
    def class_info(self, index: Optional[int] = None) -> Union[ClassInfo, List[ClassInfo]]:
        """ClassInfo of one logical class, or a list of all of them."""
        fn = _L.need("zs_class_info")
        if index is None:
            return [self._class_info(i) for i in range(self.class_count())]
        return self._class_info(index)

    def _class_info(self, index: int) -> ClassInfo:
        fn = _L.need("zs_class_info")
        _c_int_arg("index", index, ctypes.c_int)   # ctypes would truncate 2**64 to class 0
        c = _L.ClassInfoC()
        _check(fn(self._pool(), index, ctypes.byref(c)), f"zs_class_info({index})")
        return ClassInfo(c)

    @overload
    def class_stats(self, index: int, used_only: bool = True) -> ClassStats: ...
    @overload
    def class_stats(self, index: None = None, used_only: bool = True) -> List[ClassStats]: ...

    @_pool_op
    def class_stats(self, index: Optional[int] = None,
                    used_only: bool = True) -> Union[ClassStats, List[ClassStats]]:
        """ClassStats of one physical class, or a list (those with objects if used_only)."""
        fn = _L.need("zs_class_stats")
        if index is None:
            out = []
            for i in range(self.class_count()):
                c = _L.ClassStatsC()
                if fn(self._pool(), i, ctypes.byref(c), ctypes.sizeof(c)) == 0:
                    if not used_only or c.obj_allocated:
                        out.append(ClassStats(c))
            return out
        _c_int_arg("index", index, ctypes.c_int)   # ctypes would truncate 2**64 to class 0
        c = _L.ClassStatsC()
        _check(fn(self._pool(), index, ctypes.byref(c), ctypes.sizeof(c)),
               f"zs_class_stats({index})")
        return ClassStats(c)


def _comp_ok(name: str) -> None:
    """Refuse an unknown compressor by naming the valid ones (C would say only EINVAL)."""
    rc = _L.need("zs_comp_check")(name.encode())
    if rc < 0:
        names = compressor_names()
        hint = " (lzo-rle is the kernel's; use lzo)" if name.startswith("lzo-rle") else ""
        raise ZsArgumentError(-rc, f"compressor {name!r} is not available{hint}; valid: "
                              f"{', '.join(names)} (with an optional :LEVEL, e.g. zstd:3)")


class Compressor(_Closable):
    """
    One compressor context: "lz4", "lz4:N", "lz4hc[:N]", "zstd[:N]", "lzo".

    level    0: the name's level (or the codec's default); else replaces ":N" (lz4
             1..65537, lz4hc 1..12, zstd its min..max level)
    dict     None, or 1..1 MiB of bytes for "zstd" (a trained dictionary, e.g.
             libzs.train_dict(samples), or raw content) or "lz4" (its last 64 KiB count);
             copied once when the context is made, never per call
    compress(data) returns bytes made at their final size; decompress(data, orig_len) needs
    the original length (1..max_src).  Both run without the GIL, one call at a time per
    context (other threads wait).  A closed Compressor raises ZsArgumentError.
    """

    def __init__(self, name: str = "lz4", max_src: int = 65536, *, level: int = 0,
                 dict: Optional[Buffer] = None) -> None:
        if not isinstance(name, str):
            raise TypeError(f"compressor name must be a str, not {type(name).__name__}")
        _c_int_arg("max_src", max_src, ctypes.c_size_t)   # its range is zs_comp_create's
        _int_arg("level", level, -(1 << 31), (1 << 31) - 1)
        if dict is not None and isinstance(dict, str):
            raise TypeError("dict must be bytes-like, not str")
        _comp_ok(name)
        self._lock = threading.RLock()   # one context, one output buffer: one call at a time
        self._x: Any = None
        self._c: Any = None
        self._dst: Any = None
        self.max_src = max_src
        if _ext is not None:
            x = _ext.Comp(name, max_src, level, dict)
            self._x = x
            # the C methods themselves, bound on the instance: no Python frame per call
            self.__dict__.update(compress=x.compress, decompress=x.decompress)
            self.name: str = x.name
            return
        if level or dict is not None:
            raise ZsArgumentError(_errno.EINVAL, f"level and dict need {EXT_ERROR}")
        out = ctypes.c_void_p()
        cc = _L.CompConfig()
        _L.need("zs_comp_config_init")(ctypes.byref(cc))
        cc.name = name.encode()
        cc.max_src = max_src
        err = ctypes.create_string_buffer(512)
        rc = _L.need("zs_comp_create")(ctypes.byref(cc), ctypes.byref(out), err, len(err))
        if rc < 0:
            raise _create_error(rc, "zs_comp_create", err.value.decode(errors="replace"),
                                dict(name=name, max_src=max_src))
        self._c = out.value
        self.name = _L.need("zs_comp_name")(self._c).decode()
        self._dst = ctypes.create_string_buffer(_L.need("zs_comp_bound")(self._c, max_src))

    @property
    def has_dict(self) -> bool:
        """True when the context compresses with a dictionary."""
        if self._x is not None:
            return bool(self._x.has_dict)
        self._ctx()
        return False

    def close(self) -> None:
        """Free the context (waits for a call in flight); later calls raise ZsArgumentError."""
        x = getattr(self, "_x", None)
        if x is not None:
            x.close()
            return
        lock = getattr(self, "_lock", None)
        if lock is None:
            return
        with lock:
            c, self._c = self._c, None     # out before the call: never destroyed twice
            if c:
                _L.need("zs_comp_destroy")(c)

    def _ctx(self) -> Any:
        if not self._c:
            raise ZsArgumentError(_errno.EINVAL, "compressor is closed")
        return self._c

    def _compress(self, data: Buffer) -> int:
        with _borrow(data) as (p, n):
            if n > self.max_src:
                raise ZsArgumentError(_errno.EINVAL, f"data of {n} bytes exceeds max_src "
                                      f"{self.max_src}")
            return _check(_L.need("zs_compress")(self._ctx(), p, n, self._dst, len(self._dst)),
                          "zs_compress")

    @_locked
    def compress(self, data: Buffer) -> bytes:
        """The compressed bytes (the ctypes path; the compiled module's replaces it)."""
        n = self._compress(data)
        return ctypes.string_at(self._dst, n)

    def compressed_size(self, data: Buffer) -> int:
        return len(self.compress(data))

    @_locked
    def decompress(self, data: Buffer, orig_len: int) -> bytes:
        """data decompressed to exactly orig_len bytes (1..max_src)."""
        if not isinstance(orig_len, int) or isinstance(orig_len, bool):
            raise TypeError(f"orig_len must be an int, not {type(orig_len).__name__}")
        _int_arg("orig_len", orig_len, 1, self.max_src)
        out = ctypes.create_string_buffer(orig_len)
        with _borrow(data) as (p, n):
            _check(_L.need("zs_decompress")(self._ctx(), p, n, out, orig_len), "zs_decompress")
        return out.raw


def _filter_arg(v: Optional[str], keep: List[Any]) -> Optional[bytes]:
    """The filter spec for the config (C checks it: a bad one is ZsArgumentError)."""
    if v is None:
        return None
    if not isinstance(v, str):
        raise TypeError("filter must be a str such as 'shuffle:4' (or None)")
    keep.append(v.encode())
    return bytes(keep[-1])


def _dict_arg(name: str, v: Any, keep: List[Any]) -> Tuple[Any, int, Optional[bytes]]:
    """A compressor dictionary: bytes-like (copied by C at create) or a path (str/PathLike)
    whose whole contents are the dictionary.  Returns (data, length, path) for the config."""
    if v is None:
        return None, 0, None
    if isinstance(v, (str, os.PathLike)):
        keep.append(os.fsencode(v))
        return None, 0, keep[-1]
    data = _to_bytes(v)
    keep.append(ctypes.create_string_buffer(data, len(data)))
    return ctypes.cast(keep[-1], ctypes.c_void_p), len(data), None


class ZramStore(_Closable):
    """
    The user-space zram store: `slots` pages of page_size bytes (or give
    disksize in bytes).  backend: "zsmalloc" | "zblock" | "malloc" | ...

    profile: "app" (default, zs_zram_config_init_app: the pool in the application
    profile) | "kernel" (zs_zram_config_init: page-exact with kernel zram).  The pool
    options are Pool's (chain, delta, chain_policy, free_mode, class_shards,
    deferred_capacity, deferred_worker, page_cache_pages, page_cache_decay_ms, name,
    max_object_size, fit_zspages, autocompact_*; None: the profile's) and apply to zsmalloc (zblock reads page_cache_pages); max_pages
    and checked are the backend's (every kind).  Store options, struct zs_zram_config:
    mem_limit (bytes), deferred_free, streams, track_actime, comp_level/recomp_level
    (0: the name's level, e.g. "zstd:5"), comp_dict/recomp_dict (bytes, or the path of a
    file holding the dictionary), group_pages (slots compressed together as one object),
    filter ("shuffle:N", "delta:N", "delta+shuffle:N" with N = 2, 4, 8: typed data is
    filtered before compressing; None/"none": off).
    A value outside its range (include/zs/zram.h, zsmalloc.h) is the C library's to
    refuse: ZsArgumentError (errno EINVAL) with its reason.  pool_config() is the
    zsmalloc pool's config as C holds it.
    """

    def __init__(self, slots: Optional[int] = None, disksize: Optional[int] = None,
                 page_size: Optional[int] = None, comp: str = "lz4",
                 recomp: Optional[str] = None, backend: str = "zsmalloc", mem_limit: int = 0,
                 deferred_free: bool = False, streams: int = 0, track_actime: bool = False,
                 chain: Optional[int] = None, delta: Optional[int] = None,
                 chain_policy: Optional[str] = None, free_mode: Optional[str] = None,
                 checked: bool = True, *, profile: str = "app",
                 class_shards: Union[int, str, None] = None, max_pages: Optional[int] = None,
                 deferred_capacity: Optional[int] = None,
                 deferred_worker: Optional[bool] = None,
                 page_cache_pages: Union[int, str, None] = None,
                 page_cache_decay_ms: Union[int, str, None] = None, name: Optional[str] = None,
                 comp_level: int = 0, recomp_level: int = 0, comp_dict: Any = None,
                 recomp_dict: Any = None, group_pages: int = 0,
                 filter: Optional[str] = None, max_object_size: Optional[int] = None,
                 fit_zspages: Optional[bool] = None, autocompact_ms: Optional[int] = None,
                 autocompact_pct: Optional[int] = None,
                 autocompact_min_bytes: Optional[int] = None) -> None:
        # Only types and C field widths are checked here; every range (page size, slots,
        # limits, backend kind) is zs_zram_create's to refuse, with its reason.
        cfg = _profile_init("zram", profile, _L.ZramConfig())
        if (slots is None) == (disksize is None):
            raise ValueError("give exactly one of slots or disksize")
        if page_size is not None:
            cfg.page_size = _c_int_arg("page_size", page_size, ctypes.c_size_t)
        if slots is not None:
            _c_int_arg("slots", slots, ctypes.c_uint64)
            cfg.disksize = _c_int_arg("slots * page_size", slots * cfg.page_size,
                                      ctypes.c_uint64)
        else:
            cfg.disksize = _c_int_arg("disksize", disksize, ctypes.c_uint64)
        if not isinstance(comp, str) or (recomp is not None and not isinstance(recomp, str)):
            raise TypeError("comp/recomp must be str")
        if not isinstance(backend, str):
            raise TypeError("backend must be a str")
        _comp_ok(comp)
        if recomp is not None:
            _comp_ok(recomp)
        # keep the encoded strings (and dictionaries) alive as long as the store
        self._keep: List[Any] = [comp.encode(), recomp.encode() if recomp else None,
                                 backend.encode()]
        cfg.comp = self._keep[0]
        cfg.recomp = self._keep[1]
        cfg.backend.kind = self._keep[2]
        cfg.backend.page_size = cfg.page_size
        cfg.backend.checked = 1 if checked else 0
        if max_pages is not None:      # the backend's limit (the pool's field is not read)
            cfg.backend.max_pages = _c_int_arg("max_pages", max_pages, ctypes.c_size_t)
        pool_opts = {"chain": chain, "delta": delta, "chain_policy": chain_policy,
                     "free_mode": free_mode, "class_shards": class_shards,
                     "deferred_capacity": deferred_capacity,
                     "deferred_worker": deferred_worker, "page_cache_pages": page_cache_pages,
                     "page_cache_decay_ms": page_cache_decay_ms, "name": name,
                     "max_object_size": max_object_size, "fit_zspages": fit_zspages,
                     "autocompact_ms": autocompact_ms, "autocompact_pct": autocompact_pct,
                     "autocompact_min_bytes": autocompact_min_bytes}
        _set_pool_options(cfg.backend.zs, pool_opts, self._keep)
        cfg.mem_limit = _c_int_arg("mem_limit", mem_limit, ctypes.c_uint64)
        cfg.deferred_free = 1 if deferred_free else 0
        cfg.streams = _c_int_arg("streams", streams, ctypes.c_uint)
        cfg.track_actime = 1 if track_actime else 0
        cfg.comp_level = _c_int_arg("comp_level", comp_level, ctypes.c_int)
        cfg.recomp_level = _c_int_arg("recomp_level", recomp_level, ctypes.c_int)
        cfg.comp_dict, cfg.comp_dict_len, cfg.comp_dict_path = _dict_arg("comp_dict", comp_dict,
                                                                         self._keep)
        cfg.recomp_dict, cfg.recomp_dict_len, cfg.recomp_dict_path = _dict_arg(
            "recomp_dict", recomp_dict, self._keep)
        cfg.group_pages = _c_int_arg("group_pages", group_pages, ctypes.c_uint)
        cfg.filter = _filter_arg(filter, self._keep)
        out = ctypes.c_void_p()
        err = ctypes.create_string_buffer(512)
        rc = _L.need("zs_zram_create")(ctypes.byref(cfg), ctypes.byref(out), err, len(err))
        if rc in (-_errno.EOPNOTSUPP, -_errno.ENOTSUP) and backend not in backend_kinds():
            raise ZsError(rc, f"zs_zram_create: backend {backend!r} cannot run in this process "
                          f"(usable here: {', '.join(backend_kinds())})")
        if rc < 0:
            given = dict(profile=profile, max_pages=max_pages, **pool_opts)
            for k, v, dflt in (("mem_limit", mem_limit, 0), ("streams", streams, 0),
                               ("comp_level", comp_level, 0), ("recomp_level", recomp_level, 0),
                               ("group_pages", group_pages, 0), ("filter", filter, None)):
                if v != dflt:
                    given[k] = v
            raise _create_error(rc, "zs_zram_create", err.value.decode(errors="replace"),
                                given)
        self._z = out.value
        # C calls run in parallel (the store is thread-safe); close() waits for them
        self._gate = _Gate(self._z, lambda: ZsArgumentError(_errno.EINVAL, "store is closed"))
        self.page_size: int = _L.need("zs_zram_page_size")(self._z)
        self.slots: int = _L.need("zs_zram_slots")(self._z)
        self.comp: str = _L.need("zs_zram_comp_name")(self._z).decode()
        self.backend = backend
        self.profile = profile

    @_gated
    def pool_config(self) -> Optional[Dict[str, Any]]:
        """The zsmalloc pool's config as C holds it (Pool.config's names, and "shards": the
        copies of each size class it has), or None when the backend is not zsmalloc."""
        return _zspool_config(self._store())

    def close(self) -> None:
        gate = getattr(self, "_gate", None)
        if gate is None:                        # created, but failed before the gate was set
            z, self._z = getattr(self, "_z", None), None
            if z:
                _L.need("zs_zram_destroy")(z)
            return
        gate.close_with(_L.need("zs_zram_destroy"))
        self._z = None

    def __len__(self) -> int:
        return self.slots

    def _store(self) -> Any:
        gate = getattr(self, "_gate", None)
        if gate is None:
            raise ZsArgumentError(_errno.EINVAL, "store is closed")
        return gate.ptr()

    def _index(self, index: Any) -> int:
        if not isinstance(index, int) or isinstance(index, bool):
            raise TypeError("slot index must be an int")
        if not 0 <= index < self.slots:
            raise IndexError(f"slot {index} out of range 0..{self.slots - 1}")
        return index

    @_gated
    def write(self, index: int, page: Buffer) -> None:
        """Store exactly page_size bytes (any bytes-like object, read in place) in slot
        `index`."""
        with _borrow(page) as (p, n):
            if n != self.page_size:
                raise ValueError(f"a page is {self.page_size} bytes, got {n}")
            _check(_L.need("zs_zram_write")(self._store(), self._index(index), p),
                   f"zs_zram_write({index})")

    @_gated
    def read(self, index: int) -> bytes:
        # a buffer per call: a shared one could be refilled by another thread's read
        # before this one copied it out
        buf = ctypes.create_string_buffer(self.page_size)
        _check(_L.need("zs_zram_read")(self._store(), self._index(index), buf,
                                       self.page_size), f"zs_zram_read({index})")
        return buf.raw

    @_gated
    def read_into(self, index: int, buffer: Buffer) -> int:
        """Decompress slot `index` into the start of a writable contiguous buffer of at least
        page_size bytes (bytearray, memoryview, numpy array, mmap); returns page_size."""
        with _borrow(buffer, writable=True) as (p, n):
            if n < self.page_size:
                raise ValueError(f"buffer of {n} bytes is shorter than a page "
                                 f"({self.page_size})")
            _check(_L.need("zs_zram_read")(self._store(), self._index(index), p,
                                           self.page_size), f"zs_zram_read({index})")
        return self.page_size

    @_gated
    def discard(self, index: int) -> None:
        _check(_L.need("zs_zram_discard")(self._store(), self._index(index)),
               f"zs_zram_discard({index})")

    @_gated
    def reset(self) -> None:
        """Empty every slot.  One C call: it does not look at signals (a KeyboardInterrupt
        during it is raised when it returns, the store empty); so are flush(), compact()
        and recompress(), which walk the whole store."""
        _L.need("zs_zram_reset")(self._store())

    @_gated
    def flush(self) -> None:
        """Finish the store's deferred frees (one C call, as reset())."""
        _L.need("zs_zram_flush")(self._store())

    @_gated
    def compact(self) -> int:
        """Compact the store's pool; pages freed (one C call, as reset())."""
        return int(_L.need("zs_zram_compact")(self._store()))

    @_gated
    def mark_idle(self, age_seconds: int = 0) -> int:
        _int_arg("age_seconds", age_seconds, 0, (1 << 32) - 1)
        return _check(_L.need("zs_zram_mark_idle")(self._store(), age_seconds), "zs_zram_mark_idle")

    @_gated
    def recompress(self, type: str = "all", threshold: int = 0,
                   max_pages: int = 0) -> Dict[str, int]:
        """Recompress slots with the recomp algorithm (max_pages 0: no limit).  One C call,
        as reset(): bound a long run with max_pages to see a KeyboardInterrupt sooner."""
        r = _L.ZramRecompResult()
        t = _choice(type, RECOMP_TYPES, "type")
        _int_arg("threshold", threshold, 0, _U64)
        _int_arg("max_pages", max_pages, 0, (1 << (8 * ctypes.sizeof(ctypes.c_ulong))) - 1)
        _check(_L.need("zs_zram_recompress")(self._store(), t, threshold, max_pages,
                                             ctypes.byref(r)), "zs_zram_recompress")
        return {"scanned": r.scanned, "recompressed": r.recompressed,
                "incompressible": r.incompressible}

    @_gated
    def slot_info(self, index: int) -> Dict[str, Any]:
        size, flags, prio = ctypes.c_size_t(), ctypes.c_uint(), ctypes.c_uint()
        _check(_L.need("zs_zram_slot_info")(self._store(), self._index(index), ctypes.byref(size),
                                            ctypes.byref(flags), ctypes.byref(prio)),
               "zs_zram_slot_info")
        f = flags.value
        out: Dict[str, Any] = {"size": size.value, "flags": f, "prio": prio.value}
        for name, bit in _SLOT_FLAGS.items():
            out[name] = bool(f & bit)
        return out

    @_gated
    def stats(self) -> Dict[str, int]:
        st = _L.ZramStatsC()
        _L.need("zs_zram_get_stats")(self._store(), ctypes.byref(st), ctypes.sizeof(st))
        return {n: getattr(st, n) for n in _L.ZRAM_STAT_FIELDS}

    def mm_stat(self) -> Dict[str, int]:
        """The nine mm_stat columns, in the kernel's order, as a dict."""
        s = self.stats()
        return {n: s[n] for n in _L.ZRAM_STAT_FIELDS[:9]}

    @_gated
    def reset_mem_used_max(self) -> None:
        _L.need("zs_zram_reset_mem_used_max")(self._store())


# Compressed memory (userfaultfd): python/libzs/region.py
from .region import Region, available as region_available  # noqa: E402

# The compressed mapping (python/libzs/cdict.py) needs the compiled module.
if _ext is not None:
    from .cdict import CompressedDict, train_dict  # noqa: E402
else:  # pragma: no cover
    def train_dict(samples: Sequence[Buffer], dict_size: int = 16384) -> bytes:
        raise ImportError(EXT_ERROR)

    class CompressedDict:  # type: ignore[no-redef]
        def __init__(self, *args: Any, **kwargs: Any) -> None:
            raise ImportError(EXT_ERROR)

__all__ += ["Region", "region_available"]
