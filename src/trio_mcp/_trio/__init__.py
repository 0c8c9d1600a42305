"""The trio shell: a generic HTTP/1.1 server on trio that knows nothing of MCP.

It only moves bytes, owns tasks and applies time limits; what to answer is
its `Handler`'s (``_http/_handler.py``). Enter at `_server.serve`, or from a
script at `_run.run`.
"""
