# The package's type hints (shipped with py.typed): mypy passes on python/ with the
# project's config, and a user's typed program using the public API checks
# clean while a wrong use is reported.  Skipped without mypy (scripts/deps.sh
# installs Debian's).
import os
import shutil
import subprocess

import pytest

from conftest import REPO

PY = os.path.join(REPO, "python")


def _mypy():
    exe = shutil.which("mypy")
    if not exe:
        pytest.skip("mypy is not installed")
    return exe


def test_package_passes_mypy():
    r = subprocess.run([_mypy(), "--config-file", "pyproject.toml", "--cache-dir", os.devnull,
                        "."], cwd=PY, capture_output=True, text=True)
    assert r.returncode == 0, r.stdout + r.stderr


def test_user_code_is_checked(tmp_path):
    good = tmp_path / "good.py"
    good.write_text(
        "import libzs\n"
        "with libzs.Pool() as p:\n"
        "    h: int = p.malloc(10)\n"
        "    p.write(h, bytearray(10))\n"
        "    buf = bytearray(10)\n"
        "    n: int = p.read_into(h, buf)\n"
        "    data: bytes = p.read(h)\n"
        "    info: libzs.ClassInfo = p.class_info(0)\n"
        "    infos: list = p.class_info()\n"
        "z = libzs.ZramStore(slots=4)\n"
        "st: dict = z.stats()\n")
    bad = tmp_path / "bad.py"
    bad.write_text(
        "import libzs\n"
        "p = libzs.Pool()\n"
        "s: str = p.read(p.malloc(10))\n")
    env = dict(os.environ, MYPYPATH=PY)
    r = subprocess.run([_mypy(), "--cache-dir", os.devnull, str(good)], capture_output=True,
                       text=True, env=env, cwd=tmp_path)
    assert r.returncode == 0, r.stdout + r.stderr
    r = subprocess.run([_mypy(), "--cache-dir", os.devnull, str(bad)], capture_output=True,
                       text=True, env=env, cwd=tmp_path)
    assert r.returncode == 1 and "bad.py:3" in r.stdout and "bytes" in r.stdout, r.stdout
