"""Build the compiled hot path; all metadata lives in pyproject.toml.

TRIO_MCP_NO_EXTENSIONS=1 (or a non-CPython interpreter) builds a pure-Python
wheel without importing Cython. A failed compile fails the build: a wheel job
must never publish a pure wheel by accident.
"""

import ast
import os
import sys
from pathlib import Path

from setuptools import Extension, setup
from setuptools.command.build_ext import build_ext

NO_EXTENSIONS = bool(os.environ.get("TRIO_MCP_NO_EXTENSIONS")) or (
    sys.implementation.name != "cpython"
)
CYTHON_TRACE = bool(os.environ.get("TRIO_MCP_CYTHON_TRACE"))
DEBUG_BUILD = bool(os.environ.get("TRIO_MCP_DEBUG_BUILD"))


def _module_lists() -> tuple[list[str], list[str]]:
    """The compiled modules as trio_mcp/_speedups.py lists them (read, not
    imported: importing it would run its import-time choice):

    - COMPILED_MODULES, leaf functions over buffers hand-written in ext/, each
      with a _name_py.py twin;
    - SOURCE_COMPILED_MODULES, the request path compiled from its unchanged .py
      (which stays its own twin).
    """
    tree = ast.parse(Path("src/trio_mcp/_speedups.py").read_text(encoding="utf-8"))
    lists = {
        node.targets[0].id: list(ast.literal_eval(node.value))
        for node in tree.body
        if isinstance(node, ast.Assign)
        and isinstance(node.targets[0], ast.Name)
        and node.targets[0].id in ("COMPILED_MODULES", "SOURCE_COMPILED_MODULES")
    }
    return lists["COMPILED_MODULES"], lists["SOURCE_COMPILED_MODULES"]


MODULES, SOURCE_MODULES = _module_lists()


class cythonizing_build_ext(build_ext):
    def finalize_options(self) -> None:
        if self.distribution.ext_modules and not getattr(self, "_cythonized", False):
            from Cython.Build import cythonize

            directives = {
                "language_level": 3,
                "embedsignature": True,
                "freethreading_compatible": True,
                "linetrace": CYTHON_TRACE,
            }
            # Every core translates and compiles (the request path's modules are
            # large); `build_ext -j N` still decides when given.
            cores = os.cpu_count() or 1
            if self.parallel is None:
                self.parallel = cores
            leaves = [e for e in self.distribution.ext_modules if e.sources[0].endswith(".pyx")]
            sources = [e for e in self.distribution.ext_modules if e not in leaves]
            self.distribution.ext_modules[:] = cythonize(
                leaves, include_path=["ext"], compiler_directives=directives, nthreads=cores
            ) + cythonize(
                sources,
                nthreads=cores,
                # the generated C stays out of src/
                build_dir="build/cython",
                # Annotations stay hints, as in CPython: the .py is the twin, and
                # typed arguments would reject values the pure module accepts.
                # Not yet reviewed for running without the GIL (no free-threaded
                # wheels are built): such an interpreter re-enables the GIL.
                compiler_directives={
                    **directives,
                    "annotation_typing": False,
                    "freethreading_compatible": False,
                },
            )
            self._cythonized = True
        super().finalize_options()


def _extensions() -> list[Extension]:
    macros = [("CYTHON_TRACE_NOGIL", "1")] if CYTHON_TRACE else []
    if os.name == "nt":
        cflags: list[str] = []
    elif DEBUG_BUILD:
        cflags = ["-O0", "-g3", "-UNDEBUG"]
    else:
        # -O3, as CPython compiles itself; on ELF, -fno-plt makes each call into
        # libpython one indirect call instead of a jump through the PLT. Together
        # 1.1% fewer instructions per tools/call and 1.4% per 2026 call than -O2
        # (benchmarks/README.md).
        cflags = ["-O3", "-g0"]
        if sys.platform.startswith("linux"):
            cflags.append("-fno-plt")
    sources = {name: f"ext/trio_mcp/{name}.pyx" for name in MODULES}
    sources |= {name: f"src/trio_mcp/{name.replace('.', '/')}.py" for name in SOURCE_MODULES}
    return [
        Extension(
            f"trio_mcp.{name}",
            [source],
            define_macros=macros,
            extra_compile_args=cflags,
        )
        for name, source in sources.items()
    ]


setup(
    cmdclass={"build_ext": cythonizing_build_ext},
    ext_modules=[] if NO_EXTENSIONS else _extensions(),
)
