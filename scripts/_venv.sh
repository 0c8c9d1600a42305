# Sourced by scripts/test and scripts/serve: make a virtualenv and install trio-mcp into it.
#   TRIO_MCP_VENV    where the venv lives (default: .venv in the checkout)
#   TRIO_MCP_WHEEL   install this wheel instead of building the checkout
#   PYTHON           the interpreter to make the venv with (default: python3)
#   PIP_CONSTRAINT   pins for pip (default: the newest trio/outcome pair the trio
#                    tweaks are tested on, .ci/trio-*-outcome-*.txt)
set -euo pipefail
REPO="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
if [ -z "${PIP_CONSTRAINT:-}" ]; then
    PIP_CONSTRAINT="$(ls "$REPO"/.ci/trio-*-outcome-*.txt | sort -V | tail -n 1)"
    export PIP_CONSTRAINT
fi
VENV="${TRIO_MCP_VENV:-$REPO/.venv}"
if [ ! -x "$VENV/bin/python" ]; then
    "${PYTHON:-python3}" -m venv "$VENV"
    "$VENV/bin/python" -m pip install -q --upgrade pip
fi
PY="$VENV/bin/python"
install_trio_mcp() {  # $1: extras, e.g. "[test]" or ""
    local extras="$1"
    local target="$REPO"
    # A regular (not editable) install: the tests then run against what a user
    # gets, built from this checkout with the compiled hot path.
    [ -n "${TRIO_MCP_WHEEL:-}" ] && target="$TRIO_MCP_WHEEL"
    "$PY" -m pip uninstall -q -y trio-mcp >/dev/null 2>&1 || true
    "$PY" -m pip install -q "trio-mcp${extras} @ file://$(realpath "$target")"
}
