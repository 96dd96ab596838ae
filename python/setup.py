"""
Build hook of the libzs Python package: `pip install ./python` (and `pip
wheel ./python`) compiles libzs.so from the repository this directory sits
in and ships it inside the package (libzs/libzs.so), so a fresh virtual
environment needs nothing else and no LIBZS_LIBRARY.  It also compiles the
extension module libzs._ext (libzs/_ext.c: the per-object calls and
CompressedDict) against the public headers in include/ and that libzs.so,
for the stable ABI of Python 3.11+ (an abi3 module, one wheel for every
later CPython); the package loads libzs.so before the module, whose
dependency on the library's soname is then already met.  Everything else is
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
import sys

from setuptools import Extension, setup
from setuptools.command.build_ext import build_ext
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


_built = {}


def libzs_path(cmd):
    """The libzs.so to ship and link against: LIBZS_PREBUILT, else built once per run."""
    if "so" not in _built:
        _built["so"] = os.path.realpath(os.environ.get("LIBZS_PREBUILT") or build_libzs(
            cmd.get_finalized_command("build_ext").build_temp))
    return _built["so"]


class BuildPyWithLib(build_py):
    def run(self):
        super().run()
        dst = os.path.join(self.build_lib, "libzs", "libzs.so")
        os.makedirs(os.path.dirname(dst), exist_ok=True)
        shutil.copyfile(libzs_path(self), dst)


class BuildExtWithLib(build_ext):
    """Links _ext against the libzs.so the package ships (by path: its soname is recorded)."""

    def build_extension(self, ext):
        ext.extra_link_args = [libzs_path(self)] + list(ext.extra_link_args or [])
        super().build_extension(ext)


# Limited API (abi3): measured as fast as the full API for these calls (python/README.md).
# Python 3.11 is the first whose limited API has the buffer protocol.
LIMITED = sys.version_info >= (3, 11) and os.environ.get("LIBZS_FULL_API") != "1"
ext = Extension(
    "libzs._ext", ["libzs/_ext.c"],
    include_dirs=[os.path.join(ROOT, "include")],
    define_macros=[("Py_LIMITED_API", "0x030B0000")] if LIMITED else [],
    py_limited_api=LIMITED,
    extra_compile_args=["-std=c11", "-O2", "-Wall", "-Wextra", "-Werror"],
    extra_link_args=["-Wl,-rpath,$ORIGIN"],
)
options = {"bdist_wheel": {"py_limited_api": "cp311"}} if LIMITED else {}


class BinaryDistribution(Distribution):
    """The package carries a compiled library: its wheel is platform-specific."""

    def has_ext_modules(self):
        return True


setup(cmdclass={"build_py": BuildPyWithLib, "build_ext": BuildExtWithLib},
      distclass=BinaryDistribution, ext_modules=[ext], options=options)
