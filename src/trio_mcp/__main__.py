"""``python -m trio_mcp``: the same as the ``trio-mcp`` command."""

from ._cli import main

main()
