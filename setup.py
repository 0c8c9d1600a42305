"""Build the compiled hot path; all metadata lives in pyproject.toml.

TRIO_MCP_NO_EXTENSIONS=1 (or a non-CPython interpreter) builds a pure-Python
wheel without importing Cython.

When the compiled build fails (no C compiler, as on slim container images; no
Python headers; Cython missing or failing), the install goes on with the
pure-Python build and a warning that says what failed and how to get the
compiled one, as an install of the sdist should work wherever Python does.
TRIO_MCP_REQUIRE_EXTENSIONS=1 makes that failure fail the build instead: the
wheel jobs set it, so a wheel job never publishes a pure wheel by accident. So
does asking for `build_ext` itself (`python setup.py build_ext --inplace` in a
checkout), whose only work is the compiled modules.
"""

import ast
import os
import sys
from pathlib import Path

from setuptools import Extension, setup
from setuptools.command.build_ext import build_ext
from setuptools.command.build_py import build_py
from setuptools.errors import BaseError, CCompilerError

NO_EXTENSIONS = bool(os.environ.get("TRIO_MCP_NO_EXTENSIONS")) or (
    sys.implementation.name != "cpython"
)
REQUIRE_EXTENSIONS = bool(os.environ.get("TRIO_MCP_REQUIRE_EXTENSIONS")) or (
    "build_ext" in sys.argv[1:]
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


#: Where a pure-Python build made after a failed compiled build says why, inside
#: the package (trio_mcp._speedups reads it to explain why it runs pure).
FALLBACK_NOTE = "_pure_build.txt"


class CompiledBuildFailed(Exception):
    """The compiled hot path cannot be built; the message says what failed.

    Not a distutils error, so that setup() lets it out instead of exiting.
    """


class cythonizing_build_ext(build_ext):
    """Cythonizes when finalized; turns any failure into CompiledBuildFailed."""

    def finalize_options(self) -> None:
        try:
            self._cythonize()
        except ImportError as error:
            raise CompiledBuildFailed(f"Cython is not installed ({error})") from error
        except Exception as error:  # Cython's CompileError, or any other: a failed build
            raise CompiledBuildFailed(
                f"Cython could not translate the sources: {type(error).__name__}: {error}"
            ) from error
        super().finalize_options()

    def run(self) -> None:
        try:
            super().run()
        except (CCompilerError, BaseError, OSError) as error:  # e.g. no MSVC found
            raise CompiledBuildFailed(f"building the extensions failed: {error}") from error

    def build_extension(self, ext: Extension) -> None:
        # Extensions build in parallel threads: after one failure the others
        # are skipped, since the build falls back to pure Python as a whole.
        if getattr(self, "_failure", None) is not None:
            return
        try:
            super().build_extension(ext)
        except (CCompilerError, BaseError, OSError, ValueError) as error:
            self._failure = CompiledBuildFailed(f"compiling {ext.name} failed: {_reason(error)}")
            raise self._failure from error

    def _cythonize(self) -> None:
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


def _reason(error: BaseException) -> str:
    """What went wrong, said plainly when the compiler is not there (distutils
    wraps that FileNotFoundError in a CompileError)."""
    cause: BaseException | None = error
    while cause is not None:
        if isinstance(cause, FileNotFoundError) and cause.filename:
            return f"the C compiler `{cause.filename}` was not found"
        cause = cause.__cause__ or cause.__context__
    return str(error)


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


def _fallback_warning(failure: CompiledBuildFailed) -> str:
    if REQUIRE_EXTENSIONS:
        outcome = (
            "TRIO_MCP_REQUIRE_EXTENSIONS is set (or build_ext was asked for), so the\n"
            "build fails instead of falling back to the pure-Python build."
        )
    else:
        outcome = (
            "Installing the pure-Python build instead: it behaves the same, but serves\n"
            "fewer requests per second. `trio-mcp --version` says which build is\n"
            "installed; TRIO_MCP_REQUIRE_EXTENSIONS=1 at build time makes this an error."
        )
    rule = "*" * 78
    return (
        f"{rule}\ntrio-mcp: the compiled build failed: {failure}\n{outcome}\n"
        "To get the compiled build, install a wheel for your platform, if there is one:\n"
        "    pip install --force-reinstall --no-deps --only-binary=trio-mcp trio-mcp\n"
        "or install a C compiler and the Python headers (Debian, Ubuntu: apt-get install\n"
        "gcc python3-dev) and build from the sdist, not from a wheel pip cached before:\n"
        "    TRIO_MCP_REQUIRE_EXTENSIONS=1 pip install --force-reinstall --no-deps \\\n"
        f"        --no-cache-dir --no-binary=trio-mcp trio-mcp\n{rule}"
    )


class noting_build_py(build_py):
    """Leaves FALLBACK_NOTE in the built package: a pure build made because the
    compiled one failed says so at run time, where pip hides the build's output."""

    reason = ""

    def run(self) -> None:
        super().run()
        package = Path(self.build_lib, "trio_mcp")
        if package.is_dir():
            (package / FALLBACK_NOTE).write_text(self.reason + "\n", encoding="utf-8")


def main() -> None:
    if NO_EXTENSIONS:
        setup()
        return
    try:
        setup(cmdclass={"build_ext": cythonizing_build_ext}, ext_modules=_extensions())
    except CompiledBuildFailed as failure:
        if REQUIRE_EXTENSIONS:
            raise SystemExit(_fallback_warning(failure)) from None
        print(_fallback_warning(failure), file=sys.stderr, flush=True)
        noting_build_py.reason = str(failure)
        setup(cmdclass={"build_py": noting_build_py})


main()
