"""
Build hook of the libzs Python package: `pip install ./python` (and `pip
wheel ./python`) compiles libzs.so from the repository this directory sits
in and ships it inside the package (libzs/libzs.so), so a fresh virtual
environment needs nothing else and no LIBZS_LIBRARY.  Everything else is
declared in pyproject.toml.

The library is built by the project's own CMake (library only: no tests,
tools, examples or install rules) in setuptools' build_temp.  LIBZS_PREBUILT
(a path to a libzs.so) copies that file instead, for CI runs that have just
built the library anyway.  Needs cmake, a C compiler and the compressors'
development files (liblz4, libzstd, liblzo2), as the C build does.
"""
import os
import shutil
import subprocess

from setuptools import setup
from setuptools.command.build_py import build_py
from setuptools.dist import Distribution

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)


def build_libzs(build_temp):
    """Configure and build the shared library; returns the built file's path."""
    if not os.path.isfile(os.path.join(ROOT, "CMakeLists.txt")):
        raise RuntimeError(f"libzs sources not found at {ROOT} (build from the repository's "
                           "python/ folder, or set LIBZS_PREBUILT to a libzs.so)")
    cmake = shutil.which("cmake")
    if not cmake:
        raise RuntimeError("cmake is needed to build libzs (or set LIBZS_PREBUILT to a libzs.so)")
    bdir = os.path.abspath(os.path.join(build_temp, "libzs-cmake"))
    subprocess.check_call([cmake, "-S", ROOT, "-B", bdir, "-DCMAKE_BUILD_TYPE=Release",
                           "-DZS_BUILD_TESTS=OFF", "-DZS_EXAMPLES=OFF", "-DZS_INSTALL=OFF"])
    jobs = os.environ.get("CMAKE_BUILD_PARALLEL_LEVEL", "2")
    subprocess.check_call([cmake, "--build", bdir, "--target", "zs_shared", "-j", jobs])
    return os.path.realpath(os.path.join(bdir, "libzs.so"))


class BuildPyWithLib(build_py):
    def run(self):
        super().run()
        src = os.environ.get("LIBZS_PREBUILT") or build_libzs(self.get_finalized_command(
            "build_ext").build_temp)
        dst = os.path.join(self.build_lib, "libzs", "libzs.so")
        os.makedirs(os.path.dirname(dst), exist_ok=True)
        shutil.copyfile(os.path.realpath(src), dst)


class BinaryDistribution(Distribution):
    """The package carries a compiled library: its wheel is platform-specific."""

    def has_ext_modules(self):
        return True


setup(cmdclass={"build_py": BuildPyWithLib}, distclass=BinaryDistribution)
