"""The sdist installs where there is no C compiler (slim container images):
the pure-Python build, with a warning that says what failed; and with
TRIO_MCP_REQUIRE_EXTENSIONS=1 at build time the install fails instead.

Each install goes into a fresh virtualenv, offline: pip with
``--no-build-isolation`` (setuptools and Cython come from the running
environment, which the test extra gives them) and ``--no-deps`` (trio, orjson...
come from the running environment too, through a ``.pth`` file). The compiler
is made unavailable as on a machine without one: ``CC`` names a program that
does not exist, and ``PATH`` holds only the virtualenv's scripts.

The sdist is ``$TRIO_MCP_SDIST`` when set (.ci/run passes the one it built),
else it is built from the source tree beside these tests; with neither there is
nothing to install, and the tests say so in their skip reason.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import sysconfig
from pathlib import Path

import orjson
import pytest
import trio
from _support import connect_when_up, free_port, initialize_body, mcp_post

pytestmark = pytest.mark.skipif(
    sys.platform == "win32",
    reason="MSVC is found without CC or PATH; these tests hide a Unix C compiler",
)

REPO = Path(__file__).resolve().parents[2]

#: Building the sdist's pure wheel cythonizes every module first (the compiler
#: is only found missing after that): about 15 s on a quiet 2-core machine.
INSTALL_TIMEOUT_S = 300

#: What CC names instead of a compiler: like gcc on a slim image, it is not there.
MISSING_COMPILER = "trio-mcp-test-no-c-compiler"

#: The first line of the build's warning when the compiler is missing (the
#: extensions compile in parallel: any of them may be the one that fails first).
NO_COMPILER = re.compile(
    r"trio-mcp: the compiled build failed: compiling trio_mcp\.\S+ failed: "
    rf"the C compiler `{MISSING_COMPILER}` was not found"
)

SERVER_APP = """\
import trio_mcp

server = trio_mcp.Server("pure-install")


@server.tool()
def add(a: int, b: int) -> int:
    return a + b
"""


def _environment(venv: Path, **extra: str) -> dict[str, str]:
    """The environment of a machine with no C compiler, and nothing of ours
    (the build mode, PYTHONPATH, pip settings) leaking in from the test run."""
    dropped = ("TRIO_MCP_", "PIP_", "PYTHON", "CC", "CXX", "LDSHARED", "CFLAGS", "CPPFLAGS")
    env = {name: value for name, value in os.environ.items() if not name.startswith(dropped)}
    # sysconfig's CC may be an absolute path, which a PATH without /usr/bin would not hide.
    env |= {"PATH": str(venv / "bin"), "CC": MISSING_COMPILER, "PIP_CONFIG_FILE": os.devnull}
    return env | extra


def _site_packages(venv: Path) -> Path:
    found = list(venv.glob("lib/python3*/site-packages"))
    assert len(found) == 1, found
    return found[0]


def _fresh_venv(path: Path) -> Path:
    """A virtualenv that sees the running environment's packages after its own."""
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(path)], check=True)
    shared = {sysconfig.get_path("purelib"), sysconfig.get_path("platlib")}
    # A path line in a .pth file: that folder's own .pth files (an editable
    # install's finder) are not run, so only installed packages are shared.
    (_site_packages(path) / "shared-with-the-test-run.pth").write_text("\n".join(sorted(shared)))
    return path


def _install(sdist: Path, venv: Path, **env: str) -> subprocess.CompletedProcess[str]:
    command = [str(venv / "bin" / "python"), "-m", "pip", "install", "-v", "--no-index"]
    command += ["--no-build-isolation", "--no-deps", "--ignore-installed", "--no-cache-dir"]
    return subprocess.run(
        [*command, str(sdist)],
        env=_environment(venv, **env),
        capture_output=True,
        text=True,
        timeout=INSTALL_TIMEOUT_S,
    )


@pytest.fixture(scope="module")
def sdist(tmp_path_factory: pytest.TempPathFactory) -> Path:
    given = os.environ.get("TRIO_MCP_SDIST")
    if given:
        return Path(given).resolve()
    if not (REPO / "setup.py").exists():
        pytest.skip(f"no sdist to install: TRIO_MCP_SDIST is unset and {REPO} has no setup.py")
    # Built from a copy, so that the checkout gets no egg-info; the copy holds
    # what MANIFEST.in takes, and no build products.
    tree = tmp_path_factory.mktemp("source")
    for name in ("setup.py", "pyproject.toml", "MANIFEST.in", "README.md"):
        shutil.copy2(REPO / name, tree / name)
    skipped = shutil.ignore_patterns("__pycache__", "*.so", "*.pyd", "*.c", "*.html", "*.egg-info")
    for name in ("src", "ext", "tests", "benchmarks", "examples"):
        shutil.copytree(REPO / name, tree / name, ignore=skipped)
    out = tmp_path_factory.mktemp("sdist")
    build = "import sys; from setuptools import build_meta; build_meta.build_sdist(sys.argv[1])"
    subprocess.run(
        [sys.executable, "-c", build, str(out)],
        cwd=tree,
        # the sdist is the same either way, and so Cython does not run here
        env={**os.environ, "TRIO_MCP_NO_EXTENSIONS": "1"},
        check=True,
        capture_output=True,
        timeout=INSTALL_TIMEOUT_S,
    )
    (built,) = out.glob("trio_mcp-*.tar.gz")
    return built


@pytest.fixture(scope="module")
def pure_install(
    sdist: Path, tmp_path_factory: pytest.TempPathFactory
) -> tuple[Path, subprocess.CompletedProcess[str]]:
    venv = _fresh_venv(tmp_path_factory.mktemp("install") / "venv")
    return venv, _install(sdist, venv)


def test_without_a_compiler_the_sdist_installs_the_pure_build_and_warns(
    pure_install: tuple[Path, subprocess.CompletedProcess[str]],
) -> None:
    venv, result = pure_install
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    output = result.stdout + result.stderr
    # The compiled build was really tried, and failed for want of a compiler.
    assert NO_COMPILER.search(output)
    assert "Installing the pure-Python build instead" in output
    assert "--only-binary=trio-mcp" in output and "--no-binary=trio-mcp" in output
    assert re.search(r"filename=trio_mcp-\S+-py3-none-any\.whl", output)
    package = _site_packages(venv) / "trio_mcp"
    assert (package / "_speedups.py").exists()
    assert not [*package.rglob("*.so")]
    assert "the C compiler" in (package / "_pure_build.txt").read_text()


def test_the_pure_install_imports_and_says_which_build_it_is(
    pure_install: tuple[Path, subprocess.CompletedProcess[str]],
) -> None:
    venv, result = pure_install
    assert result.returncode == 0
    python = str(venv / "bin" / "python")
    show = (
        "import json, trio_mcp, trio_mcp._speedups as s;"
        "print(json.dumps([trio_mcp.__file__, s.USING_EXTENSIONS, s.build_description()]))"
    )
    shown = subprocess.run(
        [python, "-I", "-c", show], env=_environment(venv), capture_output=True, text=True
    )
    assert shown.returncode == 0, shown.stderr
    module_file, using_extensions, description = json.loads(shown.stdout)
    assert module_file.startswith(str(_site_packages(venv)))
    assert using_extensions is False
    assert description.startswith("pure Python (the compiled build failed when installed: ")

    # Requiring the extensions at run time points to a wheel or the sdist, not a checkout.
    required = subprocess.run(
        [python, "-I", "-c", "import trio_mcp"],
        env=_environment(venv, TRIO_MCP_REQUIRE_EXTENSIONS="1"),
        capture_output=True,
        text=True,
    )
    assert required.returncode != 0
    assert (
        "this is the pure-Python build, made because the compiled build failed" in required.stderr
    )
    assert "pip install --force-reinstall --no-deps --only-binary=trio-mcp" in required.stderr
    assert "build_ext --inplace" not in required.stderr

    helped = subprocess.run(
        [str(venv / "bin" / "trio-mcp"), "--help"],
        env=_environment(venv),
        capture_output=True,
        text=True,
    )
    assert helped.returncode == 0, helped.stderr
    assert "run" in helped.stdout


async def test_the_pure_install_serves_an_mcp_initialize(
    pure_install: tuple[Path, subprocess.CompletedProcess[str]], tmp_path: Path
) -> None:
    venv, result = pure_install
    assert result.returncode == 0
    (tmp_path / "app.py").write_text(SERVER_APP)
    port = free_port()
    command = [str(venv / "bin" / "python"), "-I", "-m", "trio_mcp", "run"]
    proc = subprocess.Popen(
        [*command, f"{tmp_path / 'app.py'}:server", "--port", str(port)],
        env=_environment(venv),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        with trio.fail_after(30):
            client = await connect_when_up(port)
            async with client:
                await client.send(mcp_post(initialize_body()))
                reply = await client.read_reply()
        assert reply.status == 200
        assert orjson.loads(reply.body)["result"]["serverInfo"]["name"] == "pure-install"
    finally:
        proc.kill()
        proc.wait()


def test_require_extensions_at_build_time_makes_the_failed_build_an_error(
    sdist: Path, tmp_path: Path
) -> None:
    venv = _fresh_venv(tmp_path / "venv")
    result = _install(sdist, venv, TRIO_MCP_REQUIRE_EXTENSIONS="1")
    output = result.stdout + result.stderr
    assert result.returncode != 0, output[-3000:]
    assert NO_COMPILER.search(output)
    assert "TRIO_MCP_REQUIRE_EXTENSIONS is set (or build_ext was asked for), so the" in output
    assert "Installing the pure-Python build instead" not in output
    assert not (_site_packages(venv) / "trio_mcp").exists()


def test_without_cython_the_sdist_installs_the_pure_build(sdist: Path, tmp_path: Path) -> None:
    # --no-build-isolation in an environment without Cython: the Cython
    # package the running environment has is hidden by one that cannot import.
    venv = _fresh_venv(tmp_path / "venv")
    hidden = _site_packages(venv) / "Cython"
    hidden.mkdir()
    (hidden / "__init__.py").write_text("raise ImportError('Cython is hidden by the test')\n")
    result = _install(sdist, venv)
    output = result.stdout + result.stderr
    assert result.returncode == 0, output[-3000:]
    assert (
        "trio-mcp: the compiled build failed: Cython is not installed "
        "(Cython is hidden by the test)" in output
    )
    assert "Installing the pure-Python build instead" in output
    assert (
        "Cython is not installed"
        in (_site_packages(venv) / "trio_mcp" / "_pure_build.txt").read_text()
    )
