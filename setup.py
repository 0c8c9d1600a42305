"""Build the compiled hot path; all metadata lives in pyproject.toml.

TRIO_MCP_NO_EXTENSIONS=1 (or a non-CPython interpreter) builds a pure-Python
wheel without importing Cython. A failed compile fails the build: a wheel job
must never publish a pure wheel by accident.
"""

import os
import sys

from setuptools import Extension, setup
from setuptools.command.build_ext import build_ext

NO_EXTENSIONS = bool(os.environ.get("TRIO_MCP_NO_EXTENSIONS")) or (
    sys.implementation.name != "cpython"
)
CYTHON_TRACE = bool(os.environ.get("TRIO_MCP_CYTHON_TRACE"))
DEBUG_BUILD = bool(os.environ.get("TRIO_MCP_DEBUG_BUILD"))
MODULES = ["_httphead", "_headers", "_sentinel", "_sse"]


class cythonizing_build_ext(build_ext):
    def finalize_options(self) -> None:
        if self.distribution.ext_modules and not getattr(self, "_cythonized", False):
            from Cython.Build import cythonize

            self.distribution.ext_modules[:] = cythonize(
                self.distribution.ext_modules,
                include_path=["ext"],
                compiler_directives={
                    "language_level": 3,
                    "embedsignature": True,
                    "freethreading_compatible": True,
                    "linetrace": CYTHON_TRACE,
                },
            )
            self._cythonized = True
        super().finalize_options()


def _extensions() -> list[Extension]:
    macros = [("CYTHON_TRACE_NOGIL", "1")] if CYTHON_TRACE else []
    if os.name == "nt":
        cflags: list[str] = []
    else:
        cflags = ["-O0", "-g3", "-UNDEBUG"] if DEBUG_BUILD else ["-O2"]
    return [
        Extension(
            f"trio_mcp.{name}",
            [f"ext/trio_mcp/{name}.pyx"],
            define_macros=macros,
            extra_compile_args=cflags,
        )
        for name in MODULES
    ]


setup(
    cmdclass={"build_ext": cythonizing_build_ext},
    ext_modules=[] if NO_EXTENSIONS else _extensions(),
)
