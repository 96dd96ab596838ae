"""
The report's embedded default corpus: memory-like 4 KiB pages generated
deterministically from a seed, so `zs report --quick` needs no data files
and every machine measures the same bytes.  Nothing here is copied from
anywhere: words are made of random syllables, records and heap words are
synthesised.

Page kinds and why they are here (zram sees all of these in practice):
  text      prose-like ASCII, Zipf-distributed made-up words (page cache,
            logs, source) - lz4 ~2x
  records   CSV/JSON-ish structured lines: ids, timestamps, small numbers,
            repeated keys - compresses well, 3-5x
  heap      64-bit words as an anonymous heap looks: pointers into a few
            regions, small integers, zeros, short string fragments,
            allocator headers - 2-4x, with a long tail
  sparse    mostly zero pages with a few live cache lines - very small
  same      zero or same-filled pages (zram stores only the fill word)
  random    incompressible (already compressed/encrypted data): stored raw
            as "huge" objects
  mixed     half random, half compressible - lands in the large classes
"""
import random
import struct
from typing import List, Set, Tuple

PAGE = 4096

# (kind, share of pages)
MIX = [("text", 0.22), ("records", 0.18), ("heap", 0.30), ("sparse", 0.06),
       ("same", 0.08), ("random", 0.10), ("mixed", 0.06)]

_SYL = ["ka", "to", "ri", "men", "sa", "lo", "ver", "an", "de", "ix", "pu", "ler", "os",
        "tin", "ga", "mo", "ne", "shi", "bar", "el", "qu", "ra", "fen", "dol", "ty", "ur"]


def _randbytes(rng: random.Random, n: int) -> bytes:
    """_randbytes(rng, n) (Python 3.9+), which is getrandbits(8 * n) in little-endian order."""
    return rng.getrandbits(8 * n).to_bytes(n, "little") if n else b""


def _vocab(rng: random.Random, n: int = 600) -> Tuple[List[str], List[float]]:
    seen: Set[str] = set()
    while len(seen) < n:
        seen.add("".join(rng.choice(_SYL) for _ in range(rng.choice((1, 1, 2, 2, 2, 3, 4)))))
    words = sorted(seen)
    rng.shuffle(words)
    cum: List[float] = []
    acc = 0.0
    for i in range(len(words)):
        acc += 1.0 / (i + 1)                  # Zipf
        cum.append(acc)
    return words, cum


def _text_page(rng: random.Random, vocab: List[str], weights: List[float], page: int) -> bytes:
    out: List[str] = []
    n = 0
    while n < page:
        ws = rng.choices(vocab, cum_weights=weights, k=rng.randint(6, 18))
        s = " ".join(ws).capitalize() + rng.choice((". ", ". ", ", ", "; ", ".\n", "?\n"))
        out.append(s)
        n += len(s)
    return "".join(out).encode()[:page]


def _record_page(rng: random.Random, vocab: List[str], page: int,
                 t0: int) -> Tuple[bytes, int]:
    out: List[str] = []
    n = 0
    fmt = rng.choice(("csv", "json", "kv"))
    while n < page:
        rid = rng.randint(100000, 999999)
        t0 += rng.randint(1, 900)
        name = rng.choice(vocab[:80])
        status = rng.choice(("ok", "ok", "ok", "retry", "fail"))
        val = rng.randint(0, 5000)
        if fmt == "csv":
            s = f"{rid},{t0},{name},{status},{val},{rng.random():.4f}\n"
        elif fmt == "json":
            s = (f'{{"id": {rid}, "ts": {t0}, "user": "{name}", "status": "{status}", '
                 f'"bytes": {val}}}\n')
        else:
            s = f"ts={t0} level=info id={rid} user={name} status={status} n={val}\n"
        out.append(s)
        n += len(s)
    return "".join(out).encode()[:page], t0


def _heap_page(rng: random.Random, page: int) -> bytes:
    regions = [0x00007F3A1C000000, 0x0000555D8E400000, 0x00007FFD5B200000]
    # per-page mix, so heap pages spread over many size classes
    p_ptr = rng.uniform(0.15, 0.45)
    p_zero = p_ptr + rng.uniform(0.05, 0.55)
    p_small = p_zero + rng.uniform(0.05, 0.2)
    p_str = p_small + rng.uniform(0.0, 0.1)
    spread = 1 << rng.choice((12, 16, 20))
    words: List[int] = []
    nw = page // 8
    rand = rng.random
    while len(words) < nw:
        size = rng.choice((2, 3, 4, 4, 6, 8, 12, 16))
        words.append((size * 8 + 16) | 1)            # allocator chunk header
        for _ in range(size):
            r = rand()
            if r < p_ptr:
                words.append(regions[int(r * 3 / p_ptr) % 3] + rng.randrange(spread) * 16)
            elif r < p_zero:
                words.append(0)
            elif r < p_small:
                words.append(int(rand() * 256))                      # small int / bool
            elif r < p_str:
                words.append(_STRWORDS[int(rand() * len(_STRWORDS))])  # short string
            else:
                words.append(rng.getrandbits(64))                     # hash / random
    return struct.pack(f"<{nw}Q", *words[:nw])


_STRWORDS = [struct.unpack("<Q", s.encode().ljust(8, b"\0"))[0] for s in _SYL]


def _sparse_page(rng: random.Random, page: int) -> bytes:
    b = bytearray(page)
    for _ in range(rng.randint(1, 6)):
        off = rng.randrange(0, page // 64) * 64
        b[off:off + 64] = _randbytes(rng, 64)
    return bytes(b)


def _same_page(rng: random.Random, page: int) -> bytes:
    if rng.random() < 0.6:
        return bytes(page)
    word = rng.choice((0xFFFFFFFFFFFFFFFF, 0x0101010101010101, rng.getrandbits(64)))
    return struct.pack("<Q", word) * (page // 8)


def generate(npages: int = 3000, seed: int = 2024,
             page: int = PAGE) -> Tuple[List[bytes], List[str]]:
    """Return (pages: list of bytes, kinds: list of str), deterministic for (npages, seed)."""
    rng = random.Random(seed)
    vocab, weights = _vocab(rng)
    kinds: List[str] = []
    for kind, share in MIX:
        kinds += [kind] * round(share * npages)
    kinds = (kinds + ["heap"] * npages)[:npages]
    rng.shuffle(kinds)          # pages of all kinds interleaved, as a swap device sees them
    pages: List[bytes] = []
    t0 = 1_700_000_000
    for kind in kinds:
        if kind == "text":
            p = _text_page(rng, vocab, weights, page)
        elif kind == "records":
            p, t0 = _record_page(rng, vocab, page, t0)
        elif kind == "heap":
            p = _heap_page(rng, page)
        elif kind == "sparse":
            p = _sparse_page(rng, page)
        elif kind == "same":
            p = _same_page(rng, page)
        elif kind == "random":
            p = _randbytes(rng, page)
        else:  # mixed
            half = page // 2
            p = _randbytes(rng, half) + _text_page(rng, vocab, weights, page - half)
        if len(p) < page:
            p = p + bytes(page - len(p))
        pages.append(p)
    return pages, kinds


def write(path: str, npages: int = 3000, seed: int = 2024, page: int = PAGE) -> List[str]:
    """Write the corpus to one file (pages back to back); returns the kinds list."""
    pages, kinds = generate(npages, seed, page)
    with open(path, "wb") as f:
        for p in pages:
            f.write(p)
    return kinds
