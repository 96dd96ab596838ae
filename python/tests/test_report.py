# The report script: its parsers and table helper, and a real (small) run of
# `zs report --only classes` that must write report.md and the PNGs.
import importlib.util
import os
import subprocess

import pytest

# report.py is the zs tool's script (tools/report/), not part of the libzs package.
_REPORT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "tools", "report",
                       "report.py")
_spec = importlib.util.spec_from_file_location("zs_report", _REPORT)
assert _spec is not None and _spec.loader is not None, _REPORT
report = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(report)


def test_report_is_not_in_the_package():
    import libzs
    assert not os.path.exists(os.path.join(os.path.dirname(libzs.__file__), "report.py"))


def test_md_table():
    t = report.md_table(["a", "b"], [[1, 2.5], ["x", 12345]])
    assert t.splitlines()[0] == "| a | b |" and "12,345" in t


def test_report_reads_json_not_text():
    # The report reads the benchmarks' --json; a regular expression over their text broke
    # whenever a column moved.
    import ast
    tree = ast.parse(open(report.__file__).read())
    imported = {a.name for n in ast.walk(tree) if isinstance(n, (ast.Import, ast.ImportFrom))
                for a in n.names}
    assert "re" not in imported and "regex" not in imported


def test_bench_release_tables():
    j = {"rows": [{"pages": "cached", "threads": 2, "objects": 1000, "oversubscribed": False,
                   "modes": {"pool_lock": {"median_ms": 2.0, "min_ms": 1.5, "max_ms": 3.0,
                                           "ns_per_free": 2000},
                             "class_index": {"median_ms": 1.0, "min_ms": 0.9, "max_ms": 1.2,
                                             "ns_per_free": 1000}}}]}
    t = report._bench_release_tables(j)
    assert t["data"]["cached"]["pool_lock"][2] == 2.0
    assert t["spread"]["cached"]["class_index"][2] == (0.9, 1.2)
    assert t["objects"]["cached"][2] == 1000


def test_report_bench_steps_run(build_dir, tmp_path):
    # bench_release, bench_deferred and bench_zram through the report: their JSON is what the
    # sections are built from.
    pytest.importorskip("matplotlib")
    out = tmp_path / "rep"
    p = subprocess.run([os.path.join(build_dir, "zs"), "report", "--quick", "--only",
                        "lock-mode,deferred,zram store", "--out", str(out)],
                       capture_output=True, text=True, timeout=600)
    assert p.returncode == 0, p.stderr
    md = (out / "report.md").read_text()
    assert "not available" not in md.split("## zs_free lock modes")[1].split("\n## ")[0]
    assert "| cached | 1 | pool lock (kernel today) |" in md
    assert "| cached | zs_free (sync) |" in md
    assert "| lz4 | 1 |" in md and "MB/s" in md


def test_report_classes_run(build_dir, tmp_path):
    pytest.importorskip("matplotlib")
    out = tmp_path / "rep"
    p = subprocess.run([os.path.join(build_dir, "zs"), "report", "--quick", "--only", "classes",
                        "--out", str(out)], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                       text=True, timeout=300)
    assert p.returncode == 0, p.stderr
    md = (out / "report.md").read_text()
    assert "## Size classes" in md and "classes_waste.png" in md
    assert (out / "classes_waste.png").stat().st_size > 10000
    assert (out / "corpus.png").exists()
    assert "%" in p.stderr  # progress lines


def test_report_bad_args(build_dir):
    p = subprocess.run([os.path.join(build_dir, "zs"), "report", "--data", "/nonexistent"],
                       stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    assert p.returncode != 0 and "nonexistent" in p.stderr


def test_report_numbers_come_from_the_run(build_dir, tmp_path):
    # corpus.png's huge-class line is the pool's huge_class_size for the run's pool shape,
    # not a constant (it was a hard-coded 3264 while the pool said 3625).
    pytest.importorskip("matplotlib")
    import json
    import libzs
    for chain in (8, 4):
        out = tmp_path / f"rep{chain}"
        p = subprocess.run([os.path.join(build_dir, "zs"), "report", "--quick", "--only",
                            "corpus", "--chain", str(chain), "--out", str(out)],
                           capture_output=True, text=True, timeout=300)
        assert p.returncode == 0, p.stderr
        res = json.loads((out / "results.json").read_text())
        with libzs.Pool(chain=chain) as pool:
            huge = pool.huge_class_size()
        assert res["corpus"]["huge_class_size_4k"] == huge
        assert f"({huge} B" in (out / "report.md").read_text()
    assert "3264" not in open(report.__file__).read()


def _fake(backend, ws, compact_mem, live):
    ph = {"mem_bytes": compact_mem, "live_bytes": live}
    return {"workload": ws, "page_size": 4096, "backend": backend,
            "paged": backend in ("zsmalloc", "zblock"), "fill": ph, "churn": ph, "compact": ph}


def test_quick_report_explains_rows_against_the_readme():
    res = [_fake("zsmalloc", "heap", 5080000, 3800000), _fake("malloc", "heap", 4770000, 0),
           _fake("zsmalloc", "mix", 20000000, 19000000), _fake("malloc", "mix", 28000000, 0)]
    note = report._compare_vs_readme(res, quick=True)
    assert "malloc holds less than zsmalloc" in note
    assert "heap, 4K: malloc" in note and "mix, 4K" not in note
    assert report._compare_vs_readme(res[2:], quick=True) == ""


def test_log_axis_where_bars_differ_100x():
    # deferred.png: ~0.1 ms bars next to 3-15 ms ones were invisible on a linear axis
    assert report._needs_log_axis([0.1, 9, 4.1, 12, 3])
    assert not report._needs_log_axis([9, 4.1, 12, 3])
    assert not report._needs_log_axis([0, 0])


def test_backend_memory_is_memory_in_use(build_dir, tmp_path):
    # mimalloc's own counter reported its reserved 32 MiB arena for every compressor;
    # malloc kinds are measured by RSS growth, and the table says which measure it is.
    pytest.importorskip("matplotlib")
    import json
    import libzs
    kind = "mimalloc" if "mimalloc" in libzs.backend_kinds(all=True) else "malloc"
    out = tmp_path / "rep"
    p = subprocess.run([os.path.join(build_dir, "zs"), "report", "--quick", "--only",
                        "backends x", "--backend", kind, "--out", str(out)],
                       capture_output=True, text=True, timeout=600)
    assert p.returncode == 0, p.stderr
    rows = json.loads((out / "results.json").read_text())["backends_zram"]
    rs = [r for r in rows if r["backend"] == kind]
    assert len(rs) == 3
    for r in rs:
        assert r["memory_measure"].startswith("RSS growth") and r["memory"] == r["rss_growth"]
        assert 0 < r["memory"] < r["orig_data_size"]
    assert len({r["memory"] for r in rs}) > 1        # differs by compressor, as in-use memory does
    assert "memory measured as" in (out / "report.md").read_text()
