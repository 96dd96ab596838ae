"""
`zs report`: runs the seed experiments and writes report.md with tables and
PNG plots.  tools/cmd_report.c finds this file (tools/report/ in a source
tree, PREFIX/share/libzs/report/ installed) and execs a Python 3 that has
matplotlib on it, with PYTHONPATH naming the libzs package and LIBZS_LIBRARY
the libzs.so that go with that zs:

    report.py --zs PATH/zs --bench-dir DIR [--quick] [--data FILE|DIR ...] [--out DIR]

(--build-dir DIR, a build tree holding both bench_* and libzs.so, still works.)
Not part of the importable libzs package: a script of the tool's, which
needs matplotlib and the benchmark programs.

This file owns the experiment plan (what runs, with which options, in quick
and full mode), the parsing of the CLI's and the benchmarks' JSON, the plots
and the markdown.  The measurements themselves are done by the C tools
(`zs classes|testmod|zram|compare`, bench_*) so the report shows exactly what
those commands print; the Python bindings are used for the corpus and its
compressibility.  A step whose tool is missing or fails becomes a
"not available: <why>" section and the report goes on.
"""
import argparse
import importlib.util
import datetime
import json
import os
import platform
import shutil
import subprocess
import sys
import tempfile
import time

# Run straight from a source tree (no PYTHONPATH from `zs report`): the repository's python/.
# Only found here, not imported: importing libzs loads libzs.so, which main() does once the
# arguments are checked (and LIBZS_LIBRARY is settled).
_SRC_PY = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "python")
if importlib.util.find_spec("libzs") is None:
    sys.path.insert(0, os.path.normpath(_SRC_PY))

QUICK_PAGES = 3000          # embedded corpus, quick run (~12 MiB)
FULL_PAGES = 16384          # embedded corpus, full run without --data (64 MiB)
SEED = {  # seed 002's zsmalloc_test numbers at 4K pages, chain 10
    "exhaustive": {"pool_pages": 175111, "spanning": 110377, "memcpy_bytes": 278318624},
    "heuristic": {"pool_pages": 175920, "spanning": 103256, "memcpy_bytes": 265378608},
}


# ---------------------------------------------------------------- helpers

class Progress:
    """One stderr line per step: bar, percent of the planned weight, elapsed time."""

    def __init__(self, steps):
        self.total = float(sum(w for _, w in steps)) or 1.0
        self.done = 0.0
        self.t0 = time.monotonic()
        self.n = len(steps)
        self.i = 0

    def start(self, name):
        self.i += 1
        self._line(f"{name} ...")

    def finish(self, name, weight, note=""):
        self.done += weight
        self._line(f"{name}: {note or 'done'}")

    def _line(self, text):
        frac = min(self.done / self.total, 1.0)
        bar = "#" * int(frac * 24)
        el = time.monotonic() - self.t0
        sys.stderr.write(f"[{bar:<24}] {frac * 100:3.0f}%  {int(el) // 60:d}:{int(el) % 60:02d}"
                         f"  ({self.i}/{self.n}) {text}\n")
        sys.stderr.flush()


class Unavailable(Exception):
    """A step cannot run here (tool missing, not root, ...)."""


def run(cmd, timeout=600, env=None):
    """Run a command; returns stdout.  Raises Unavailable with the reason on failure."""
    exe = cmd[0]
    if not os.path.exists(exe) and shutil.which(exe) is None:
        raise Unavailable(f"{os.path.basename(exe)} is not built (looked for {exe})")
    try:
        p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                           timeout=timeout, env=env)
    except subprocess.TimeoutExpired:
        raise Unavailable(f"`{' '.join(cmd)}` took longer than {timeout} s") from None
    if p.returncode != 0:
        err = (p.stderr or p.stdout).strip().splitlines()
        raise Unavailable(f"`{' '.join(os.path.basename(c) if i == 0 else c for i, c in enumerate(cmd))}`"
                          f" exited with {p.returncode}: {err[-1] if err else 'no output'}")
    return p.stdout


def zs_backend_kinds(zs):
    """The backend kinds the zs tool has: `zs --version`'s "backends:" line.  The tool's, not
    the Python binding's: the malloc baselines are the harness's, linked into zs only."""
    for line in run([zs, "--version"], timeout=60).splitlines():
        if line.startswith("backends:"):
            return line.split()[1:]
    raise Unavailable(f"`{os.path.basename(zs)} --version` lists no backends")


def run_json(cmd, timeout=600):
    out = run(cmd, timeout)
    try:
        return json.loads(out)
    except ValueError:
        m = out.find("{")
        try:
            return json.loads(out[m:]) if m >= 0 else None
        except ValueError:
            pass
        raise Unavailable(f"`{os.path.basename(cmd[0])}` printed no JSON "
                          f"(first line: {out.strip().splitlines()[:1]})") from None


def md_table(headers, rows):
    def fmt(v):
        if isinstance(v, float):
            return f"{v:,.3g}" if abs(v) < 100 else f"{v:,.0f}"
        if isinstance(v, int):
            return f"{v:,}"
        return str(v)
    out = ["| " + " | ".join(headers) + " |", "|" + "---|" * len(headers)]
    for r in rows:
        out.append("| " + " | ".join(fmt(v) for v in r) + " |")
    return "\n".join(out) + "\n"


def mib(b):
    return b / 1048576.0


class Report:
    def __init__(self, args):
        self.args = args
        self.out = args.out
        self.sections = []      # (title, markdown)
        self.results = {}       # raw data, written as results.json
        self.figures = []

    def section(self, title, md):
        self.sections.append((title, md))

    def figure(self, fig, name, caption):
        path = os.path.join(self.out, name)
        fig.savefig(path, dpi=110, bbox_inches="tight")
        import matplotlib.pyplot as plt
        plt.close(fig)
        self.figures.append(name)
        return f"![{caption}]({name})\n\n*Figure: {caption}*\n\n"


# ---------------------------------------------------------------- steps

def step_corpus(rep, ctx):
    """The pages the store/backend experiments run on, and their compressibility."""
    from libzs import corpus, Compressor, page_same_filled
    a = ctx["args"]
    pages, kinds = [], []
    if a.data:
        limit = (12 if a.quick else 256) << 20
        pages = _load_pages(ctx["zs"], ctx["tmp"], a.data, limit)
        kinds = ["data"] * len(pages)
        if not pages:
            raise Unavailable(f"no readable pages in {' '.join(a.data)}")
        ctx["paths"] = list(a.data)
        ctx["max_mib"] = limit >> 20
        src = (f"your data: {len(pages)} pages of 4 KiB from {', '.join(a.data)} "
               f"(at most {limit >> 20} MiB)")
    else:
        n = QUICK_PAGES if a.quick else FULL_PAGES
        path = os.path.join(ctx["tmp"], "corpus.bin")
        pages, kinds = corpus.generate(n)
        with open(path, "wb") as f:
            f.write(b"".join(pages))
        ctx["paths"] = [path]
        ctx["max_mib"] = (len(pages) * 4096 >> 20) + 1
        src = (f"the embedded corpus (`libzs.corpus`, seed 2024): {len(pages)} pages of 4 KiB "
               f"generated deterministically, no files shipped")
    sizes = {}
    for comp in ("lz4", "zstd"):
        with Compressor(comp, 4096) as c:
            sizes[comp] = [0 if page_same_filled(p) else min(c.compressed_size(p), 4096)
                           for p in pages]
    ctx["npages"] = len(pages)
    order = [k for k, _ in corpus.MIX] if not a.data else ["data"]
    rows = []
    for k in order:
        idx = [i for i, kk in enumerate(kinds) if kk == k]
        if not idx:
            continue
        same = sum(1 for i in idx if sizes["lz4"][i] == 0)
        tot = {c: sum(sizes[c][i] for i in idx) for c in sizes}
        ratio = {c: f"{len(idx) * 4096 / tot[c]:.2f}x" if tot[c] else "fill word only"
                 for c in sizes}
        rows.append([k, len(idx), same, ratio["lz4"], ratio["zstd"]])
    if kinds:
        tot = {c: sum(sizes[c]) for c in sizes}
        rows.append(["**all**", len(pages), sum(1 for s in sizes["lz4"] if s == 0),
                     f"{len(pages) * 4096 / max(1, tot['lz4']):.2f}x",
                     f"{len(pages) * 4096 / max(1, tot['zstd']):.2f}x"])
    rep.results["corpus"] = {"source": src, "pages": len(pages),
                             "kinds": {r[0]: r[1] for r in rows[:-1]}}

    # The huge-class size is the allocator's, for the pool shape this report runs with.
    from libzs import Pool
    pa = ctx.get("pool_kw", {})
    with Pool(page_size=4096, **pa) as pool:
        huge = pool.huge_class_size()
    rep.results["corpus"]["huge_class_size_4k"] = huge
    import matplotlib.pyplot as plt
    fig, ax = plt.subplots(figsize=(8, 4.2))
    data = [[sizes["lz4"][i] for i, kk in enumerate(kinds) if kk == k] for k in order]
    ax.hist(data, bins=list(range(0, 4097 + 128, 128)), stacked=True, label=order)
    ax.axvline(huge, color="k", ls="--", lw=1)
    ax.text(huge + 26, ax.get_ylim()[1] * 0.9,
            f"4K huge class\n({huge} B, chain {pa.get('chain', 8)}):\nstored raw", fontsize=8)
    ax.set_xlabel("lz4 compressed size of a page (bytes; same-filled pages at 0)")
    ax.set_ylabel("pages")
    ax.set_title("Corpus compressibility: compressed page sizes by page kind")
    ax.legend(title="page kind", fontsize=8)
    md = f"Source: {src}.\n\n"
    md += md_table(["kind", "pages", "same-filled", "lz4 ratio", "zstd ratio"], rows)
    md += ("\nRatios are original bytes / compressed bytes over the kind's pages (same-filled "
           "pages count 0 bytes, as zram stores only their fill word).\n\n")
    md += rep.figure(fig, "corpus.png", "lz4 compressed size of every corpus page, stacked by "
                     f"page kind; the dashed line is the 4K huge-class size ({huge} B, from "
                     "`Pool.huge_class_size()` in this run)")
    rep.section("Corpus", md)
    return f"{len(pages)} pages"


def _load_pages(zs, tmp, paths, limit):
    """The pages of paths, by the tools' one page loader (`zs pages`, zs_pageset_load)."""
    out = os.path.join(tmp, "data-pages.bin")
    p = subprocess.run([zs, "pages", "-o", out, "--max", str(limit), *paths],
                       stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    if p.returncode != 0:
        raise Unavailable(f"zs pages: {p.stderr.strip()}")
    with open(out, "rb") as f:
        data = f.read()
    os.unlink(out)
    return [data[i:i + 4096] for i in range(0, len(data), 4096)]


def step_classes(rep, ctx):
    """zs classes for each page size / policy / delta: waste per size class."""
    zs = ctx["zs"]
    sizes = [4096, 16384] + ([] if ctx["args"].quick else [65536])
    runs = []
    for ps in sizes:
        deltas = [0] if ps == 4096 else [0, 16]
        for d in deltas:
            for pol in ("exhaustive", "heuristic"):
                cmd = [zs, "classes", "--page-size", str(ps), "--chain", "8",
                       "--chain-policy", pol, "--json"]
                if d:
                    cmd += ["--delta", str(d)]
                j = run_json(cmd)
                runs.append(j)
    rep.results["classes"] = [{k: v for k, v in j.items() if k != "rows"} for j in runs]

    import matplotlib.pyplot as plt
    fig, axes = plt.subplots(len(sizes), 1, figsize=(12, 3.4 * len(sizes)))
    for ax, ps in zip(axes, sizes):
        for j in (r for r in runs if r["page_size"] == ps):
            xs, ys = [], []
            for row in j["rows"]:
                slot = row["chain"] * ps / row["objs"]
                w = (row["phys"] - row["log"]) + row["tail_waste"] / row["objs"]
                xs.append(row["log"])
                ys.append(100.0 * w / slot)
            ls = "-" if j["chain_policy"] == "exhaustive" else "--"
            ax.plot(xs, ys, ls, lw=0.9, label=f"{j['chain_policy']}, delta {j['delta']} "
                    f"(avg {j['avg_effective_waste_pct']:.2f}%, {j['physical_classes']} classes)")
        ax.set_title(f"Waste per size class, {ps // 1024}K pages, max chain 8")
        ax.set_xlabel("request size (bytes)")
        ax.set_ylabel("effective waste (% of slot)")
        ax.set_yscale("symlog", linthresh=1)
        ax.legend(fontsize=8, title="chain policy, class delta", loc="upper left",
                  bbox_to_anchor=(1.01, 1.0))
        ax.grid(alpha=0.3)
    fig.tight_layout()
    rows = [[f"{j['page_size'] // 1024}K", j["chain_policy"], j["delta"], j["logical_classes"],
             j["physical_classes"], j["huge_class_size"], f"{j['avg_effective_waste_pct']:.2f}%",
             j["total_span"]] for j in runs]
    md = ("`zs classes --page-size P --chain 8 --chain-policy POLICY [--delta D] --json`: the "
          "simulate_zsmalloc table computed from the allocator's own class table.  Effective "
          "waste of a request size = (slot padding + the zspage tail's share per object) / "
          "slot bytes, averaged over request sizes 32, 48, ... page size.\n\n")
    md += md_table(["page", "chain policy", "delta", "logical classes", "physical classes",
                    "huge class size", "avg effective waste", "spanning slots (sum)"], rows)
    md += "\n" + rep.figure(fig, "classes_waste.png",
                            "effective waste per request size for each chain policy and class "
                            "delta (symlog y axis), one panel per page size")
    rep.section("Size classes: waste per class", md)
    return f"{len(runs)} tables"


def step_testmod(rep, ctx):
    """zs testmod per chain policy and chain size: pool pages vs spanning objects."""
    zs = ctx["zs"]
    quick = ctx["args"].quick
    chains = [4, 8, 10, 16] if quick else [2, 4, 6, 8, 10, 12, 14, 16]
    count = 256 if quick else 1337
    res = []
    for pol in ("exhaustive", "heuristic"):
        for c in chains:
            j = run_json([zs, "testmod", "--chain", str(c), "--chain-policy", pol,
                          "--count", str(count), "--json"])
            j["chain"] = c
            res.append(j)
    seed_rows = []
    for pol in ("exhaustive", "heuristic"):
        if count == 1337:
            j = next(r for r in res if r["chain"] == 10 and r["chain_policy"] == pol)
        else:
            j = run_json([zs, "testmod", "--chain", "10", "--chain-policy", pol, "--json"])
        s = SEED[pol]
        ok = all(j[k] == s[k] for k in s)
        seed_rows.append([pol, j["pool_pages"], s["pool_pages"], j["spanning"], s["spanning"],
                          j["memcpy_bytes"], s["memcpy_bytes"], "yes" if ok else "**NO**"])
    rep.results["testmod"] = res
    rep.results["testmod_seed"] = seed_rows

    import matplotlib.pyplot as plt
    fig, ax = plt.subplots(figsize=(8, 5))
    for pol, mk in (("exhaustive", "o-"), ("heuristic", "s--")):
        pts = [r for r in res if r["chain_policy"] == pol]
        ax.plot([r["spanning"] for r in pts], [r["pool_pages"] for r in pts], mk,
                label=f"{pol}")
        for r in pts:
            ax.annotate(f"chain {r['chain']}", (r["spanning"], r["pool_pages"]), fontsize=7,
                        textcoords="offset points", xytext=(4, 4 if pol == "exhaustive" else -10))
    ax.set_xlabel("spanning objects (reads that copy two pages)")
    ax.set_ylabel("pool pages used")
    ax.set_title(f"zsmalloc_test workload ({count} objects per size, 32..4080 B, 4K pages):\n"
                 "pool pages vs spanning objects per chain policy")
    ax.legend(title="chain policy")
    ax.grid(alpha=0.3)
    rows = [[r["chain_policy"], r["chain"], r["pool_pages"],
             f"{r['utilization_permille'] / 10:.1f}%", r["spanning"],
             f"{mib(r['memcpy_bytes']):.1f}"] for r in res]
    md = (f"`zs testmod --chain N --chain-policy P --count {count} --json` (the zsmalloc_test "
          f"module's workload on the real allocator: sizes 32, 48, ..., 4080, {count} objects "
          "each, written then read back).  Fewer pages is denser; fewer spanning objects is "
          "cheaper to read.\n\n")
    md += md_table(["chain policy", "max chain", "pool pages", "utilization", "spanning objects",
                    "memcpy MiB"], rows)
    md += "\n" + rep.figure(fig, "testmod_chain.png",
                            "pool pages vs spanning objects, one line per chain policy, one point "
                            "per max chain length")
    md += ("Seed check, full workload (1337 objects per size, chain 10), "
           "`zs testmod --chain 10 [--chain-policy heuristic]`:\n\n")
    md += md_table(["policy", "pool pages", "seed", "spanning", "seed", "memcpy bytes", "seed",
                    "matches"], seed_rows)
    rep.section("Chain policy: testmod", md)
    return f"{len(res) + (0 if count == 1337 else 2)} runs"


def step_chain_bench(rep, ctx):
    """bench_chain: the same trade-off with read cost, on testmod and real pages."""
    j = run_json([os.path.join(ctx["build"], "bench_chain"), "--json"]
                 + (["--quick"] if ctx["args"].quick else []), timeout=900)
    rep.results["bench_chain"] = j
    rows = [[r["workload"], f"{r['page_size'] // 1024}K", r["chain"], r["policy"], r["pages"],
             r["spanning"], f"{r['util_permille'] / 10:.1f}%", f"{r['read_ns']:.0f}"]
            for r in j.get("rows", [])]
    if not rows:
        raise Unavailable("bench_chain printed no per-config results")
    md = (f"`bench_chain {'--quick ' if ctx['args'].quick else ''}--json` (workload `real` = "
          f"{j.get('real_glob', 'real file pages')}, lz4 per page).  Read ns: one "
          "read_begin/read_end (and, for real pages, the decompression), median over rounds.\n\n")
    md += md_table(["workload", "page", "max chain", "policy", "pool pages", "spanning",
                    "utilization", "read ns"], rows)
    rep.section("Chain policy: pages, spanning and read cost (bench_chain)", md)
    return f"{len(rows)} configs"


MODES = ("pool_lock", "class_index", "ci_unlocked")


def _bench_release_tables(j):
    """bench_release --json's rows as the tables the plots use: per page mode, lock mode and
    thread count the median ms and the (min, max) spread; per page mode and thread count the
    object count."""
    out = {"data": {}, "spread": {}, "objects": {}}
    for r in j.get("rows", []):
        panel, t = r["pages"], r["threads"]
        out["objects"].setdefault(panel, {})[t] = r["objects"]
        for mode, v in r["modes"].items():
            out["data"].setdefault(panel, {}).setdefault(mode, {})[t] = v["median_ms"]
            out["spread"].setdefault(panel, {}).setdefault(mode, {})[t] = (v["min_ms"],
                                                                           v["max_ms"])
    return out


def step_release(rep, ctx):
    """bench_release: concurrent release, speedup per lock mode and the per-free cost with its
    spread."""
    j = run_json([os.path.join(ctx["build"], "bench_release"), "--json"]
                 + (["--quick"] if ctx["args"].quick else []), timeout=900)
    rep.results["bench_release"] = j
    tables = _bench_release_tables(j)
    data, spread, objs = tables["data"], tables["spread"], tables["objects"]
    if not data:
        raise Unavailable("bench_release printed no per-mode timings")
    names = {"pool_lock": "pool lock (kernel today)", "class_index": "class index",
             "ci_unlocked": "class index + unlocked zspage free"}
    panels = {"cached": "freed pages kept in the page cache",
              "os": "freed pages returned to the OS"}
    import matplotlib.pyplot as plt
    fig, axes = plt.subplots(2, len(data), figsize=(5.4 * len(data), 7.6), squeeze=False)
    nproc = j.get("nproc", os.cpu_count())
    rows = []
    for col, (panel, modes) in enumerate(sorted(data.items())):
        ax, ax2 = axes[0][col], axes[1][col]
        allt = sorted({t for m in modes.values() for t in m})
        # Top: speedup vs the pool lock at the same thread count.  Each thread frees its own
        # set, so the work grows with T and raw times would mix more work with slowdown.
        base = modes.get("pool_lock", {})
        for mode in MODES:
            if mode not in modes:
                continue
            ts = [t for t in sorted(modes[mode]) if base.get(t)]
            ax.plot(ts, [base[t] / modes[mode][t] for t in ts], "o-", label=names[mode])
            # Bottom: cost per free (ns), median with the min..max of the rounds.
            sp = spread.get(panel, {}).get(mode, {})
            ts2 = [t for t in sorted(modes[mode]) if objs.get(panel, {}).get(t)]
            per = [modes[mode][t] * 1e6 / objs[panel][t] for t in ts2]
            lo = [p - sp[t][0] * 1e6 / objs[panel][t] if t in sp else 0 for p, t in zip(per, ts2)]
            hi = [sp[t][1] * 1e6 / objs[panel][t] - p if t in sp else 0 for p, t in zip(per, ts2)]
            off = (MODES.index(mode) - 1) * 0.08
            ax2.errorbar([t + off for t in ts2], per, yerr=[lo, hi], fmt="o-", capsize=3,
                         label=names[mode])
        for a in (ax, ax2):
            if nproc and max(allt) > nproc:
                a.axvspan(nproc + 0.5, max(allt) + 0.5, color="grey", alpha=0.12,
                          label=f"threads > {nproc} CPUs")
            a.set_xticks(allt)
            a.grid(alpha=0.3)
        ax.axhline(1.0, color="k", lw=0.8)
        ax.set_xlabel("threads releasing at once (each frees its own objects)")
        ax.set_ylabel("speedup vs pool lock (pool-lock ms / mode ms)")
        ax.set_title(f"Concurrent zs_free: {panels.get(panel, panel)}", fontsize=10)
        ax.legend(fontsize=8, title="zs_free lock mode")
        ax2.set_xlabel("threads releasing at once")
        ax2.set_ylabel("wall ns per free (median; bars: min..max of rounds)")
        ax2.set_yscale("log")
        ax2.set_title("cost per free, with the spread of the rounds", fontsize=10)
        for t in allt:
            b = base.get(t)
            for mode in MODES:
                if t in modes.get(mode, {}):
                    v = modes[mode][t]
                    sp = spread.get(panel, {}).get(mode, {}).get(t)
                    rows.append([panel, t, names[mode], f"{v:.2f}",
                                 f"{sp[0]:.2f}..{sp[1]:.2f}" if sp else "",
                                 f"{b / v:.2f}x" if b else ""])
    fig.tight_layout()
    md = (f"`bench_release {'--quick ' if ctx['args'].quick else ''}--json`: T threads share one "
          f"pool, each allocates {j.get('mib_per_thread', '?')} MiB of 200..3600 B objects, then "
          "all free at once; wall time of the free phase, median (and min..max) of "
          f"{j.get('rounds', '?')} interleaved rounds.  Each thread frees its own set, so the "
          "work grows with T: the plot shows the speedup over the pool lock at the same T and "
          "the cost per free.  Seed 000: 1.40x at 2 processes, 1.39-1.83x at 4.  This machine "
          f"has {nproc} CPUs; load average at start {j.get('loadavg_start', '?')}.\n\n")
    md += md_table(["pages", "threads", "lock mode", "median ms", "min..max ms",
                    "speedup vs pool lock"], rows)
    md += "\n" + rep.figure(fig, "release_threads.png",
                            "top: speedup of each zs_free lock mode over the pool lock at the "
                            "same thread count (medians); bottom: wall ns per free with the "
                            "min..max of the rounds (log scale)")
    rep.section("zs_free lock modes: concurrent release", md)
    return "ok"


def step_deferred(rep, ctx):
    """bench_deferred: release latency with deferred vs synchronous free."""
    j = run_json([os.path.join(ctx["build"], "bench_deferred"), "--json"]
                 + (["--quick"] if ctx["args"].quick else []), timeout=900)
    rep.results["bench_deferred"] = j
    names = {"sync": "zs_free (sync)", "deferred_default_cap": "deferred, default capacity",
             "deferred_big_cap": "deferred, capacity >= N",
             "deferred_no_worker": "deferred, no worker (flush frees)"}
    rows = [[r["pages"], names.get(r["variant"], r["variant"]), f"{r['release_ms']:.2f}",
             f"{r['total_ms']:.2f}", f"{r['held_pct']:.0f}%",
             "1x" if r["variant"] == "sync" else f"{r['release_speedup']:.2f}x",
             "1x" if r["variant"] == "sync" else f"{r['total_speedup']:.2f}x"]
            for r in j.get("rows", [])]
    if not rows:
        raise Unavailable("bench_deferred printed no per-variant timings")
    import matplotlib.pyplot as plt
    panels = sorted({r[0] for r in rows})
    fig, axes = plt.subplots(1, len(panels), figsize=(5.5 * len(panels), 4), squeeze=False)
    for ax, panel in zip(axes[0], panels):
        pr = [r for r in rows if r[0] == panel]
        x = range(len(pr))
        ax.bar([i - 0.2 for i in x], [float(r[2]) for r in pr], 0.4, label="caller's release loop")
        ax.bar([i + 0.2 for i in x], [float(r[3]) for r in pr], 0.4,
               label="until every object is freed")
        ax.set_xticks(list(x))
        ax.set_xticklabels([r[1].replace(", ", ",\n") for r in pr], fontsize=7)
        vals = [float(r[2]) for r in pr] + [float(r[3]) for r in pr]
        pos = [v for v in vals if v > 0]
        if _needs_log_axis(vals):
            # A linear axis would hide the short bars next to the long ones.
            ax.set_yscale("log")
            ax.set_ylabel("time (ms, log scale)")
            ax.set_ylim(min(pos) / 2, max(pos) * 8)
        else:
            ax.set_ylabel("time (ms)")
            ax.set_ylim(0, ax.get_ylim()[1] * 1.3)
        for i, r in enumerate(pr):
            ax.text(i - 0.2, float(r[2]), f"{float(r[2]):.2g}", ha="center", va="bottom",
                    fontsize=6)
            ax.text(i + 0.2, float(r[3]), f"{float(r[3]):.2g}", ha="center", va="bottom",
                    fontsize=6)
        ax.set_title(f"Deferred vs sync free ({'page cache' if panel == 'cached' else 'pages to OS'})",
                     fontsize=10)
        ax.legend(fontsize=8, loc="upper right")
        ax.grid(alpha=0.3, axis="y")
    fig.tight_layout()
    md = (f"`bench_deferred {'--quick ' if ctx['args'].quick else ''}--json`: one caller frees "
          f"{j.get('handles', '?')} handles ({j.get('mib', '?')} MiB); *release* is the caller's "
          "loop, *total* includes the drain, *held* is the share of pool pages still allocated "
          "when the loop returns.  Seed 001: munmap 3.4x faster.\n\n")
    md += md_table(["pages", "variant", "release ms", "total ms", "held at return",
                    "release speedup", "total speedup"], rows)
    md += "\n" + rep.figure(fig, "deferred.png", "caller's release time and time until all "
                            "memory is freed, sync vs deferred free variants (log y axis where "
                            "the bars differ by 100x or more; each bar is labelled with its ms)")
    rep.section("Deferred vs synchronous free", md)
    return "ok"


def _needs_log_axis(values, ratio=100):
    """Bars that differ by `ratio` or more: a linear axis would hide the short ones."""
    pos = [v for v in values if v > 0]
    return bool(pos) and max(pos) / min(pos) >= ratio


def step_api(rep, ctx):
    """bench_api: new read/write API vs legacy map/unmap."""
    j = run_json([os.path.join(ctx["build"], "bench_api"), "--json"]
                 + (["--quick"] if ctx["args"].quick else []), timeout=900)
    rep.results["bench_api"] = j
    skip = {"bench", "nproc", "cpu", "kernel"}
    rows = [[k, v] for k, v in j.items() if k not in skip]
    md = (f"`bench_api {'--quick ' if ctx['args'].quick else ''}--json`: the seed-004 workload "
          "(fixed sizes, map read-only then read-write vs zs_obj_read_begin/zs_obj_write).  "
          "Seed 004: -28% instructions (callgrind; run `bench_api` without --json under "
          "valgrind for that).\n\n")
    md += md_table(["measure", "value"], rows)
    if "speedup" in j:
        md += (f"\nThe new API is **{j['speedup']:.2f}x** the legacy API's speed "
               f"({j.get('new_vs_legacy_time_pct', 0):+.1f}% time per object).\n")
    rep.section("New vs legacy object API", md)
    return f"{j.get('speedup', 0):.2f}x" if "speedup" in j else "ok"


# bench_zram --json row keys, in the order of its text table's columns.
ZRAM_COLS = (("raw_comp", "raw_comp_MBps"), ("store_wr", "store_write_MBps"),
             ("st_wr_warm", "store_write_warm_MBps"), ("raw_dec", "raw_decomp_MBps"),
             ("store_rd", "store_read_MBps"), ("wr/raw", "write_vs_raw"),
             ("wrw/raw", "warm_write_vs_raw"), ("rd/raw", "read_vs_raw"), ("ratio", "ratio"))


def step_zram(rep, ctx):
    """bench_zram (store vs raw compressor vs kernel zram) and zs zram --vs-kernel."""
    quick = ctx["args"].quick
    cmd = [os.path.join(ctx["build"], "bench_zram"), "--json", "--max", str(ctx["max_mib"]),
           "--reps", "1" if quick else "3", "--comp", "lz4,zstd", "--threads", "1,2"]
    j = run_json(cmd + ctx["paths"], timeout=900)
    rows = j.get("rows", [])
    rep.results["bench_zram"] = j
    table = []
    for r in rows:
        table.append([r["comp"], r["threads"]]
                     + [f"{r[k]:.1f} MB/s" if k.endswith("MBps") else f"{r[k]:.3f}"
                        for _, k in ZRAM_COLS]
                     + ["ERRORS" if r.get("errors") else ""])
        k = r.get("kernel")
        if k:
            # The kernel device's write and read sit under the store's columns.
            table.append([r["comp"], f"{r['threads']} (kernel zram)", "",
                          f"{k['write_MBps']:.1f} MB/s", "", "", f"{k['read_MBps']:.1f} MB/s",
                          "", "", "", f"{k['ratio']:.3f}",
                          "store/kernel: write %.2fx (warm %.2fx), read %.2fx" % (
                              k["store_vs_kernel_write"], k["store_vs_kernel_warm_write"],
                              k["store_vs_kernel_read"])])
    md = ("`" + " ".join([os.path.basename(cmd[0])] + cmd[1:]) + " CORPUS`: "
          f"{j.get('pages', '?')} pages, backend {j.get('backend', '?')}, best of "
          f"{j.get('reps', '?')}; the same pages "
          "compressed/decompressed raw (no allocator) and written/read through the store; "
          "`wr/raw` > 1 means the store is faster than compressing alone (same-filled pages "
          "skip the compressor).\n\n"
          + md_table(["comp", "thr"] + [c for c, _ in ZRAM_COLS] + ["note"], table) + "\n")
    notes = sorted({r["kernel_note"] for r in rows if r.get("kernel_note")})
    if notes:
        md += "Kernel zram: " + "; ".join(notes) + "\n\n"
    if rows:
        import matplotlib.pyplot as plt
        fig, axes = plt.subplots(1, 2, figsize=(10, 4))
        labels = [f"{r['comp']}, {r['threads']} thr" for r in rows]
        for ax, (raw, st, what) in zip(axes, (("raw_comp_MBps", "store_write_MBps", "write"),
                                              ("raw_decomp_MBps", "store_read_MBps", "read"))):
            x = list(range(len(rows)))
            ax.bar([i - 0.27 for i in x], [r.get(raw, 0) for r in rows], 0.27,
                   label="raw compressor")
            ax.bar(x, [r.get(st, 0) for r in rows], 0.27, label="libzs zram store")
            kv = [(r.get("kernel") or {}).get(what + "_MBps", 0) for r in rows]
            if any(kv):
                ax.bar([i + 0.27 for i in x], kv, 0.27,
                       label="kernel zram (O_DIRECT, same threads)")
            ax.set_xticks(x)
            ax.set_xticklabels(labels, fontsize=8)
            ax.set_ylabel("MB/s")
            ax.set_title(f"{what} throughput", fontsize=10)
            ax.set_ylim(0, ax.get_ylim()[1] * 1.25)
            ax.legend(fontsize=8)
            ax.grid(alpha=0.3, axis="y")
        fig.suptitle("zram store vs raw compressor"
                     + (" vs kernel zram" if any(r.get("kernel") for r in rows) else ""))
        fig.tight_layout()
        md += rep.figure(fig, "zram_vs_raw.png", "write and read throughput: raw compressor, "
                         "the libzs store and (when root with zram) the kernel's zram")
    # mm_stat side by side with the kernel
    vs = []
    if os.geteuid() == 0 and os.path.isdir("/sys/class/zram-control"):
        try:
            j = run_json([ctx["zs"], "zram", "--vs-kernel", "--json", "--quiet", "--max",
                          f"{ctx['max_mib']}M"] + ctx["paths"], timeout=900)
            rep.results["zram_vs_kernel"] = j
            k = j.get("kernel") or {}
            s = j.get("store") or {}
            cols = ["orig_data_size", "compr_data_size", "mem_used_total", "same_pages",
                    "huge_pages", "write_MBps", "read_MBps"]
            for c in cols:
                if c in s or c in k:
                    vs.append([c, s.get(c, ""), k.get(c, "")])
            if vs:
                md += "`zs zram --vs-kernel --json` (lz4, same pages):\n\n"
                md += md_table(["mm_stat / throughput", "libzs store", "kernel zram"], vs)
            else:
                md += ("`zs zram --vs-kernel` ran but printed no kernel columns:\n\n```\n"
                       + json.dumps(j)[:1500] + "\n```\n")
        except Unavailable as e:
            md += f"Kernel zram side by side: not available: {e}\n"
    else:
        md += "Kernel zram side by side: not available: needs root and /sys/class/zram-control.\n"
    rep.section("zram store vs raw compressor (and kernel zram)", md)
    return f"{len(rows)} rows"


def step_backends(rep, ctx):
    """zs zram on every backend with every compressor: throughput and density."""
    kinds = zs_backend_kinds(ctx["zs"])
    if ctx["args"].backend:
        kinds = [ctx["args"].backend]
    comps = ["lz4", "zstd", "lzo"]
    res = []
    for b in kinds:
        for c in comps:
            j = run_json([ctx["zs"], "zram", "--backend", b, "--comp", c, "--json", "--quiet",
                          "--max", f"{ctx['max_mib']}M"] + ctx["pool_args"] + ctx["paths"],
                         timeout=900)
            s = j.get("store", j)
            pool_kind = bool(s.get("paged"))  # the backend's ZS_BACKEND_CAP_PAGES
            # Pool kinds: pool pages x page size (what the kernel counts).  Malloc kinds:
            # the process's RSS growth while writing, i.e. memory in use; their own
            # counters can report a reserved arena (mimalloc: a flat 32 MiB).
            mem = s.get("mem_used_total", 0) if pool_kind else s.get("rss_growth", 0)
            res.append({"backend": b, "comp": c, "write_MBps": s.get("write_MBps", 0),
                        "read_MBps": s.get("read_MBps", 0),
                        "mem_used_total": s.get("mem_used_total", 0),
                        "rss_growth": s.get("rss_growth", 0), "memory": mem,
                        "paged": pool_kind,
                        "memory_measure": "pool pages x page size" if pool_kind
                        else "RSS growth while writing",
                        "orig_data_size": s.get("orig_data_size", 0),
                        "compr_data_size": s.get("compr_data_size", 0)})
    rep.results["backends_zram"] = res
    import matplotlib.pyplot as plt
    fig, axes = plt.subplots(1, 2, figsize=(11, 4.2))
    w = 0.8 / len(comps)
    for ax, key, what in ((axes[0], "write_MBps", "write"), (axes[1], "read_MBps", "read")):
        for ci, c in enumerate(comps):
            xs = [i + (ci - (len(comps) - 1) / 2) * w for i in range(len(kinds))]
            ax.bar(xs, [next(r[key] for r in res if r["backend"] == b and r["comp"] == c)
                        for b in kinds], w, label=c)
        ax.set_xticks(range(len(kinds)))
        ax.set_xticklabels(kinds)
        ax.set_xlabel("backend")
        ax.set_ylabel(f"store {what} throughput (MB/s of pages)")
        ax.set_title(f"zram store {what} throughput per backend and compressor", fontsize=10)
        ax.set_ylim(0, ax.get_ylim()[1] * 1.2)
        ax.legend(title="compressor", fontsize=8, ncol=3, loc="upper left")
        ax.grid(alpha=0.3, axis="y")
    fig.tight_layout()
    rows = [[r["backend"], r["comp"], f"{r['write_MBps']:.0f}", f"{r['read_MBps']:.0f}",
             f"{mib(r['memory']):.2f}" if r["memory"] else "n/a", r["memory_measure"],
             f"{mib(r['rss_growth']):.2f}",
             f"{r['orig_data_size'] / r['memory']:.2f}x" if r["memory"] else "n/a"]
            for r in res]
    md = ("`zs zram --backend B --comp C --json" + (" " + " ".join(ctx["pool_args"])
                                                      if ctx["pool_args"] else "")
          + " CORPUS`, single thread: every page written, then read back and checked.  "
          "Ratio = original bytes / memory.  Memory is measured two ways, named in the "
          "table: zsmalloc and zblock hold pool pages (pages x page size, as the kernel "
          "counts `mem_used_total`); the malloc baselines are measured by what they use, the "
          "process's RSS growth while the pages were written (`rss_growth`), because their own "
          "counters can include reserved but unused memory (mimalloc reports its 32 MiB "
          "arena).\n\n")
    md += md_table(["backend", "compressor", "write MB/s", "read MB/s", "memory MiB",
                    "memory measured as", "RSS growth MiB (all kinds)", "ratio"], rows)
    zs_ratio = {r["comp"]: r["orig_data_size"] / r["memory"] for r in res
                if r["backend"] == "zsmalloc" and r["memory"]}
    beat = [r for r in res if not r["paged"] and r["memory"]
            and r["comp"] in zs_ratio and r["orig_data_size"] / r["memory"] > zs_ratio[r["comp"]]]
    if beat:
        md += ("\nRows where a malloc baseline beats zsmalloc ("
               + ", ".join(f"{r['backend']}/{r['comp']}" for r in beat)
               + ") do not contradict the README's memory headline, which is measured after a "
               "churn and compaction (next section): here every object was just written, "
               "nothing freed, so malloc has no holes yet, while zsmalloc already pays for a "
               "partly filled zspage per size class.  The RSS column measures every kind the "
               "same way.\n")
    md += "\n" + rep.figure(fig, "backend_throughput.png",
                            "zram store write and read throughput per backend (x) and "
                            "compressor (bars)")
    rep.section("Backends x compressors: throughput", md)
    return f"{len(res)} runs"


def step_compare(rep, ctx):
    """zs compare: memory after fill, churn and compaction per backend."""
    quick = ctx["args"].quick
    cmd = [ctx["zs"], "compare", "--json"] + ctx["pool_args"]
    if ctx["args"].backend:
        cmd += ["--backends", ",".join(dict.fromkeys(["zsmalloc", ctx["args"].backend]))]
    for p in ctx["paths"]:
        cmd += ["--files", p]
    cmd += ["--max-mib", str(ctx["max_mib"])]
    if quick:
        cmd += ["--mix-n", "20000", "--testmod-n", "16", "--rounds", "2", "--repeat", "1",
                "--page-size", "4096"]
    j = run_json(cmd, timeout=1800)
    res = j.get("results", [])
    res = [r for r in res if r.get("ok", 1)]
    if not res:
        raise Unavailable("zs compare returned no results")
    rep.results["compare"] = j
    import matplotlib.pyplot as plt
    groups = []
    for r in res:
        g = (r["workload"], r["page_size"])
        if g not in groups:
            groups.append(g)
    ncol = min(2, len(groups))
    nrow = (len(groups) + ncol - 1) // ncol
    fig, axes = plt.subplots(nrow, ncol, figsize=(6 * ncol, 3.8 * nrow), squeeze=False)
    phases = [("fill", "after fill"), ("churn", "after churn"), ("compact", "after compaction")]
    rows = []
    for ax, g in zip(axes.flat, groups):
        rs = [r for r in res if (r["workload"], r["page_size"]) == g]
        x = list(range(len(rs)))
        for pi, (ph, lab) in enumerate(phases):
            ax.bar([i + (pi - 1) * 0.27 for i in x], [mib(r[ph]["mem_bytes"]) for r in rs],
                   0.27, label=lab)
        live = mib(rs[0]["churn"]["live_bytes"])
        ax.axhline(live, color="k", ls="--", lw=1, label="live bytes after churn")
        ax.set_xticks(x)
        ax.set_xticklabels([r["backend"] + ("\n(pool pages)" if r["paged"]
                                            else "\n(RSS growth)") for r in rs], fontsize=7)
        ax.set_ylabel("memory (MiB): pool pages x page\nsize, or RSS growth (malloc)",
                      fontsize=8)
        ax.set_title(f"Memory per backend: {g[0]} workload, {g[1] // 1024}K pages", fontsize=10)
        ax.grid(alpha=0.3, axis="y")
        for r in rs:
            rows.append([g[0], f"{g[1] // 1024}K", r["backend"],
                         f"{mib(r['fill']['mem_bytes']):.2f}", f"{mib(r['churn']['mem_bytes']):.2f}",
                         f"{mib(r['compact']['mem_bytes']):.2f}",
                         f"{r['compact'].get('util', 0) * 100:.1f}%",
                         f"{r.get('store_ops', 0) / 1e3:.0f}k", f"{r.get('load_ops', 0) / 1e3:.0f}k",
                         f"{r.get('free_ops', 0) / 1e3:.0f}k"])
    for ax in list(axes.flat)[len(groups):]:
        ax.axis("off")
    handles, labels = axes.flat[0].get_legend_handles_labels()
    fig.legend(handles, labels, loc="lower center", ncol=4, fontsize=9,
               bbox_to_anchor=(0.5, -0.02))
    fig.tight_layout(rect=(0, 0.04, 1, 1))
    md = ("`" + " ".join(["zs"] + [os.path.basename(c) if c in ctx["paths"] else c
                                   for c in cmd[1:]]) + "`: the same blobs on every backend; "
          "memory is pool pages x page size for zsmalloc/zblock and RSS growth (memory in use) "
          "for the malloc baselines, as each bar's label says.  Churn frees and reallocates a random share of the blobs; compaction is a "
          "no-op where the backend has none.  ops/s are store / load / free.\n\n")
    md += md_table(["workload", "page", "backend", "fill MiB", "churn MiB", "compacted MiB",
                    "utilization after", "store ops/s", "load ops/s", "free ops/s"], rows)
    md += _compare_vs_readme(res, quick)
    md += "\n" + rep.figure(fig, "backend_memory.png",
                            "memory held by each backend after fill, after churn and after "
                            "compaction, one panel per workload and page size")
    rep.section("Backend comparison: memory after churn", md)
    return f"{len(res)} results"


def _compare_vs_readme(res, quick):
    """A note for every group where a malloc baseline holds less than zsmalloc after
    compaction: the README's headline (`zs compare` defaults) says the opposite."""
    notes = []
    for g in sorted({(r["workload"], r["page_size"]) for r in res}):
        rs = [r for r in res if (r["workload"], r["page_size"]) == g]
        zs = next((r for r in rs if r["backend"] == "zsmalloc"), None)
        mall = [r for r in rs if not r["paged"] and r["compact"]["mem_bytes"]]
        if not zs or not mall:
            continue
        best = min(mall, key=lambda r: r["compact"]["mem_bytes"])
        zm, bm = zs["compact"]["mem_bytes"], best["compact"]["mem_bytes"]
        if bm >= zm:
            continue
        live = zs["compact"]["live_bytes"]
        notes.append(
            f"- **{g[0]}, {g[1] // 1024}K: {best['backend']} {mib(bm):.2f} MiB < zsmalloc "
            f"{mib(zm):.2f} MiB after compaction**.  Here zsmalloc held "
            f"{mib(zm - live):.2f} MiB beyond the {mib(live):.2f} MiB of live objects: each "
            "size class in use keeps partly filled zspages (up to a chain of pages each), a "
            "cost that does not shrink with the pool, so it weighs most on small runs"
            + (" like this quick one" if quick else "") + "; and the malloc figure is RSS "
            "growth, which does not count heap memory the allocator already held before the "
            "run.  Run `zs report` without --quick (or `zs compare`) for the README's "
            "setting.")
    if not notes:
        return ""
    return ("\nRows where a malloc holds less than zsmalloc after compaction, and why:\n\n"
            + "\n".join(notes) + "\n")


def step_threads(rep, ctx):
    """bench_threads: aggregate throughput and speedup over one thread, per allocator."""
    quick = ctx["args"].quick
    nproc = os.cpu_count() or 1
    ts = [t for t in (1, 2, 4, 8, 16, 32, 64) if t <= nproc] or [1]
    rows_wanted = ["zs-pool", "zs-unlocked", "zs-cached", "zs-private", "zblock", "glibc",
                   "mimalloc"]
    j = run_json([os.path.join(ctx["build"], "bench_threads"), "--json", "--workload", "churn",
                  "--threads", ",".join(map(str, ts)), "--rows", ",".join(rows_wanted)]
                 + (["--quick"] if quick else []), timeout=1800)
    rep.results["bench_threads"] = j
    rows = [r for r in rows_wanted if f"churn_{r}_t1_mops" in j]
    if not rows:
        raise Unavailable("bench_threads printed no churn rows")
    import matplotlib.pyplot as plt
    fig, axes = plt.subplots(1, 2, figsize=(11, 4.2))
    for r in rows:
        got = [t for t in ts if f"churn_{r}_t{t}_mops" in j]
        axes[0].plot(got, [j[f"churn_{r}_t{t}_mops"] for t in got], marker="o", label=r)
        axes[1].plot(got, [j[f"churn_{r}_t{t}_scaling"] for t in got], marker="o", label=r)
    axes[1].plot(ts, ts, color="grey", linestyle=":", label="linear")
    for ax, what in ((axes[0], "Mops/s, all threads (malloc+write+free)"),
                     (axes[1], "speedup over the same allocator at T=1")):
        ax.set_xlabel("threads T (one shared pool or heap)")
        ax.set_ylabel(what)
        ax.set_xticks(ts)
        ax.grid(alpha=0.3)
        ax.legend(fontsize=7)
    axes[0].set_title("churn throughput", fontsize=10)
    axes[1].set_title("speedup (T / T=1); load at start %.1f" % j.get("loadavg_start", 0),
                      fontsize=10)
    fig.tight_layout()
    table = [[r] + [f"{j.get(f'churn_{r}_t{t}_mops', 0):.2f} ({j.get(f'churn_{r}_t{t}_scaling', 0):.2f}x)"
                    for t in ts] for r in rows]
    md = (f"`bench_threads --json --workload churn --threads {','.join(map(str, ts))}"
          f"{' --quick' if quick else ''}`: T threads, each allocating 200..3600 B objects, "
          "writing and freeing them in rounds; zs-* rows share one pool (zs-private: a pool "
          "per thread), the malloc rows one heap.  Mops/s (speedup over T=1).  On a loaded "
          "machine (load average at start: %.1f, %d CPUs) the speedup says more about the "
          "machine than the allocator; `bench_threads` also prints Mops per CPU-second.\n\n"
          % (j.get("loadavg_start", 0), nproc))
    md += md_table(["row"] + [f"T={t}" for t in ts], table)
    md += "\n" + rep.figure(fig, "threads.png", "churn throughput and speedup per thread count")
    rep.section("Threads: throughput and speedup (bench_threads)", md)
    best = max(j.get(f"churn_zs-unlocked_t{t}_scaling", 0) for t in ts)
    return f"zs-unlocked speedup up to {best:.2f}x"


def step_algorithms(rep, ctx):
    """zs zram --matrix: which compressor and level (and group size) suits this data."""
    # A dictionary trained on the same pages adds the lz4/zstd "+dict" rows.
    dict_path = os.path.join(ctx["tmp"], "zs.dict")
    trained = subprocess.run([ctx["zs"], "dict", "train", "-o", dict_path, "--max",
                              str(min(ctx['max_mib'], 64) << 20)] + ctx["paths"],
                             stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL).returncode == 0
    j = run_json([ctx["zs"], "zram", "--matrix", "--json", "--max", f"{ctx['max_mib']}M"]
                 + (["--dict", dict_path] if trained else []) + ctx["paths"], timeout=1800)
    res = [r for r in j.get("rows", []) if not r.get("rc")]
    rep.results["algorithms"] = j
    if not res:
        raise Unavailable("zs zram --matrix printed no rows")
    import matplotlib.pyplot as plt
    fig, ax = plt.subplots(figsize=(8, 4.8))
    for g, marker in ((4096, "o"), (65536, "s")):
        pts = [r for r in res if r["group_bytes"] == g]
        ax.scatter([r["write_MBps"] for r in pts], [r["ratio_mem"] for r in pts], marker=marker,
                   label=f"{g // 1024} KiB objects")
        for r in pts:
            ax.annotate(r["comp"], (r["write_MBps"], r["ratio_mem"]), fontsize=6,
                        xytext=(3, 2), textcoords="offset points")
    ax.set_xscale("log")
    ax.set_xlabel("store write MB/s (log)")
    ax.set_ylabel("original bytes / pool memory (pages x page size)")
    ax.set_title("which algorithm on this data: density vs write speed", fontsize=10)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8)
    fig.tight_layout()
    table = [[r["comp"], f"{r['group_bytes'] // 1024}K", f"{r['ratio_mem']:.3f}",
              f"{r['ratio_compr']:.3f}", f"{r['write_MBps']:.0f}", f"{r['read_MBps']:.0f}",
              f"{r['rand_read_4k_us']:.1f}"] for r in res]
    md = (f"`zs dict train -o D CORPUS; zs zram --matrix --json --max {ctx['max_mib']}M "
          f"{'--dict D ' if trained else ''}CORPUS`: every compressor and level "
          f"{'(and lz4/zstd with a dictionary trained on these pages) ' if trained else ''}"
          "with 4 KiB objects (today's zram) and 64 KiB groups (the large-folio RFC), "
          "on this run's pages.  Ratio against pool memory is what a store really costs; the "
          "ratio against compressed bytes alone ignores size-class rounding.  Small corpora "
          "(quick mode) penalise 64 KiB groups: each size class holds a partly filled "
          "zspage of 64 KiB pages.\n\n")
    md += md_table(["compressor", "object", "ratio (pool memory)", "ratio (compressed bytes)",
                    "write MB/s", "read MB/s", "random 4K read us"], table)
    md += "\n" + rep.figure(fig, "algorithms.png", "density against write speed per "
                             "compressor and level, 4 KiB vs 64 KiB objects")
    rep.section("Which algorithm on my data", md)
    best = max(res, key=lambda r: r["ratio_mem"])
    return f"densest {best['comp']} at {best['group_bytes'] // 1024}K ({best['ratio_mem']:.2f}x)"


ZSWAP_CAPTURE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "tests",
                             "data", "zswap-build-sizes.txt.xz")


def step_zswap(rep, ctx):
    """zs zswap: the corpus through libzs's zswap per backend (fill, churn, compaction), and the
    committed kernel-build capture (seed 003: the kernel's zsmalloc, libzs's zsmalloc and
    zblock on the same objects).  docs/zswap.md says how the capture was made."""
    max_mib = min(ctx["max_mib"], 32)
    cmd = [ctx["zs"], "zswap", "--json", "--max", f"{max_mib}M"]
    if ctx["args"].backend:
        cmd += ["--backends", ",".join(dict.fromkeys(["zsmalloc", "zblock",
                                                        ctx["args"].backend]))]
    j = run_json(cmd + ctx["paths"], timeout=900)
    rep.results["zswap"] = j
    runs = [("corpus", j, cmd)]
    # The source tree's copy, or the one beside the build the zs binary is in.
    capture = next((c for c in (os.path.normpath(ZSWAP_CAPTURE),
                                os.path.join(os.path.dirname(os.path.dirname(ctx["zs"])), "tests",
                                             "data", "zswap-build-sizes.txt.xz"))
                    if os.path.exists(c)), None)
    if capture:
        ccmd = [ctx["zs"], "zswap", "--json", "--sizes", capture]
        jc = run_json(ccmd, timeout=900)
        rep.results["zswap_capture"] = jc
        runs.append(("capture", jc, ccmd))
    import matplotlib.pyplot as plt
    fig, axes = plt.subplots(1, len(runs), figsize=(6 * len(runs), 3.8), squeeze=False)
    md = ""
    for ax, (what, doc, c) in zip(axes.flat, runs):
        rows = []
        for r in doc["rows"]:
            ser = r.get("series", [])
            if ser:
                ax.plot([p[0] for p in ser], [p[1] for p in ser],
                        label=r["backend"] + (" (measured)" if r["backend"] == "kernel" else ""),
                        lw=2 if r["backend"] == "kernel" else 1.2,
                        ls="--" if r["backend"] == "kernel" else "-")
            kern = r["backend"] == "kernel"
            comp = r.get("compacted", {})
            fresh = comp.get("pool_pages", r["pool_pages"]) if kern else r["pool_pages"]
            after = r["pool_pages"] if kern else r.get("churn", {}).get("pool_pages", "-")
            rows.append([r["backend"], r["stored_pages"], r["Zswapped_kB"], fresh, after,
                         comp.get("pool_pages", "-"),
                         f"{r['stored_pages'] / after:.3f}" if isinstance(after, int) and after
                         else "-",
                         f"{r['store_ns']:.0f}" if "store_ns" in r else "-",
                         f"{r['load_ns']:.0f}" if "load_ns" in r else "-"])
        ax.set_xlabel("seconds of the build (the churn follows the kernel's samples)"
                      if what == "capture" else "churn operations")
        ax.set_ylabel("pool pages")
        ax.set_title("kernel-build capture: pool pages over the build" if what == "capture"
                     else f"corpus ({doc['pages']} pages): pool pages over the churn",
                     fontsize=10)
        ax.grid(alpha=0.3)
        ax.legend(fontsize=8)
        shown = " ".join(["zs"] + [os.path.basename(x) if x in ctx["paths"] or x == capture
                                   else x for x in c[1:]])
        if what == "capture":
            md += (f"`{shown}` (the capture is `tests/data/zswap-build-sizes.txt.xz`: "
                   f"{doc['workload']}, kernel {doc['kernel_version']}).  The kernel row is "
                   "measured: its fresh-fill and compacted columns are its pool after its own "
                   "compaction at the freeze, after churn its pool at the freeze; the libzs rows store "
                   "the same lzo sizes fresh (first columns) and through a churn with the "
                   "kernel's store, load and free counts per sample interval that ends with "
                   "the captured entries live.\n\n")
        else:
            md += (f"`{shown} CORPUS`: {doc['pages']} pages filled, {doc['churn_ops']} "
                   "seeded stores/loads/invalidates, compaction, then every page loaded back "
                   "and compared.\n\n")
        md += md_table(["backend", "stored_pages", "Zswapped kB", "pool pages: fresh fill",
                        "after churn", "after compaction", "Zswapped/Zswap after churn",
                        "store ns/page", "load ns/page"], rows) + "\n"
    md += rep.figure(fig, "zswap_pool_pages.png",
                     "pool pages per backend over the churn (left: the corpus; right: the "
                     "kernel-build capture, with the kernel's own pool as measured)")
    rep.section("zswap: backends under the kernel's zswap rules", md)
    return f"{len(runs)} runs"


STEPS = [  # (name, function, weight in expected quick seconds)
    ("corpus", step_corpus, 4),
    ("size classes", step_classes, 2),
    ("testmod per chain policy", step_testmod, 20),
    ("chain policy bench", step_chain_bench, 15),
    ("lock-mode release", step_release, 8),
    ("deferred free", step_deferred, 5),
    ("new vs legacy API", step_api, 2),
    ("zram store vs raw/kernel", step_zram, 5),
    ("backends x compressors", step_backends, 8),
    ("backend comparison", step_compare, 10),
    ("zswap", step_zswap, 8),
    ("which algorithm", step_algorithms, 10),
    ("threads", step_threads, 15),
]


def machine():
    cpu = "unknown"
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    cpu = line.split(":", 1)[1].strip()
                    break
    except OSError:
        pass
    return f"{os.cpu_count()} CPUs ({cpu}), kernel {platform.release()}, Python {platform.python_version()}"


def main(argv=None):
    ap = argparse.ArgumentParser(prog="zs report", description=__doc__.split("\n\n")[0])
    ap.add_argument("--zs", required=True, help="the zs binary")
    ap.add_argument("--bench-dir", help="where the bench_* programs are")
    ap.add_argument("--build-dir", help="a build tree: bench_* and libzs.so (the default of "
                    "--bench-dir, and of LIBZS_LIBRARY)")
    ap.add_argument("--quick", action="store_true", help="embedded corpus, short runs (< 2 min)")
    ap.add_argument("--data", nargs="+", action="extend", default=[], metavar="FILE|DIR",
                    help="pages of these files instead of the embedded corpus")
    ap.add_argument("--out", default="report", help="output directory (default ./report)")
    ap.add_argument("--only", default="", help="comma-separated step names to run (debugging)")
    pool = ap.add_argument_group("pool shape for the zram-store and backend-comparison steps "
                                 "(the class-table and testmod steps sweep the policies)")
    pool.add_argument("--page-size", help="compare at this page size only")
    pool.add_argument("--chain", type=int, choices=range(1, 17), metavar="1..16")
    # checked against the library's names (zs_*_names) once libzs is loaded, below
    pool.add_argument("--chain-policy", metavar="exhaustive|heuristic")
    pool.add_argument("--delta", type=int)
    pool.add_argument("--free-mode", metavar="pool|class|class-unlocked")
    pool.add_argument("--deferred", action="store_true")
    pool.add_argument("--backend", help="run the backend steps on zsmalloc and this kind")
    args = ap.parse_args(argv)
    pool_args = []
    for flag in ("page_size", "chain", "chain_policy", "delta", "free_mode"):
        v = getattr(args, flag)
        if v is not None:
            pool_args += ["--" + flag.replace("_", "-"), str(v)]
    if args.deferred:
        pool_args.append("--deferred")

    for d in args.data:
        if not os.path.exists(d):
            ap.error(f"--data {d}: no such file or directory")
    if not args.bench_dir and not args.build_dir:
        ap.error("--bench-dir or --build-dir is required")
    args.bench_dir = args.bench_dir or args.build_dir
    if args.build_dir:
        os.environ.setdefault("LIBZS_LIBRARY", os.path.join(args.build_dir, "libzs.so"))
    try:
        import matplotlib
        matplotlib.use("Agg")
    except ImportError:
        sys.exit("zs report: this Python has no matplotlib (install python3-matplotlib)")

    try:
        os.makedirs(args.out, exist_ok=True)
        probe = os.path.join(args.out, ".zs-report-write-test")
        with open(probe, "w"):
            pass
        os.unlink(probe)
    except OSError as e:
        sys.exit(f"zs report: cannot write to --out {args.out}: {e.strerror}")
    try:
        import libzs
    except ImportError as e:
        sys.exit(f"zs report: cannot load libzs (the Python package and its libzs.so): {e}")
    for opt, value, names in (("--chain-policy", args.chain_policy, libzs.CHAIN_POLICIES),
                              ("--free-mode", args.free_mode, libzs.FREE_MODES)):
        if value is not None and value not in names:
            ap.error(f"{opt}: '{value}' is not one of: {', '.join(names)}")
    rep = Report(args)
    only = [s.strip() for s in args.only.split(",") if s.strip()]
    steps = [s for s in STEPS if not only or any(o in s[0] for o in only)]
    if steps and steps[0][0] != "corpus":
        steps.insert(0, STEPS[0])
    prog = Progress([(n, w) for n, _, w in steps])
    t0 = time.monotonic()
    tmp = tempfile.mkdtemp(prefix="zs-report-")
    pool_kw = {k: v for k, v in (("chain", args.chain), ("delta", args.delta),
                                  ("chain_policy", args.chain_policy)) if v is not None}
    ctx = {"args": args, "zs": os.path.abspath(args.zs), "build": os.path.abspath(args.bench_dir),
           "tmp": tmp, "pool_args": pool_args, "pool_kw": pool_kw}
    status = []
    try:
        for name, fn, w in steps:
            prog.start(name)
            ts = time.monotonic()
            try:
                note = fn(rep, ctx)
                status.append((name, "ok", time.monotonic() - ts))
            except Unavailable as e:
                rep.section(name[0].upper() + name[1:], f"**not available**: {e}\n")
                note = f"not available: {e}"
                status.append((name, "not available", time.monotonic() - ts))
            except Exception as e:  # a bug in one step must not lose the others
                rep.section(name[0].upper() + name[1:],
                            f"**not available**: the report step failed: "
                            f"{type(e).__name__}: {e}\n")
                note = f"failed: {type(e).__name__}: {e}"
                status.append((name, "failed", time.monotonic() - ts))
            prog.finish(name, w, note)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    total = time.monotonic() - t0

    mode = "quick" if args.quick else "full"
    lines = [f"# libzs report ({mode})", "",
             f"Generated {datetime.datetime.now().strftime('%Y-%m-%d %H:%M')} by "
             f"`zs report{' --quick' if args.quick else ''}"
             f"{' --data ' + ' '.join(args.data) if args.data else ''}` in {total:.0f} s on "
             f"{machine()}.", "",
             "Every number below was measured in this run by the command shown with it; "
             "raw values are in `results.json`.", "", "## Contents", ""]
    for title, _ in rep.sections:
        anchor = "".join(c for c in title.lower()
                         if c in "abcdefghijklmnopqrstuvwxyz0123456789 -").replace(" ", "-")
        lines.append(f"- [{title}](#{anchor})")
    lines.append("")
    for title, md in rep.sections:
        lines += [f"## {title}", "", md.rstrip(), ""]
    lines += ["## Steps", "", md_table(["step", "status", "seconds"],
                                       [[n, s, f"{t:.1f}"] for n, s, t in status])]
    with open(os.path.join(args.out, "report.md"), "w") as f:
        f.write("\n".join(lines))
    rep.results["steps"] = status
    with open(os.path.join(args.out, "results.json"), "w") as f:
        json.dump(rep.results, f, indent=1, default=str)
    sys.stderr.write(f"zs report: wrote {os.path.join(args.out, 'report.md')} and "
                     f"{len(rep.figures)} plots in {total:.0f} s\n")
    bad = [n for n, s, _ in status if s == "failed"]
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
