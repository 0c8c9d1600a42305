"""A JSON echo server on trio-mcp: the HTTP core without MCP, for tests and benchmarks.

    python examples/echo.py --port 8000

serves http://127.0.0.1:8000/mcp until SIGINT or SIGTERM, which drain it:
- POST /mcp answers with the request body, as application/json;
- GET and HEAD /mcp answer a small JSON status; OPTIONS answers 204 with Allow;
- other methods get 405 with Allow; other paths 404.
"""

from __future__ import annotations

import argparse
import logging

from trio_mcp import Request, Response, ServerConfig, method_not_allowed, run

ALLOWED = ("GET", "HEAD", "POST", "OPTIONS")
_JSON = [(b"content-type", b"application/json")]
_STATUS = Response(200, _JSON, b'{"server":"trio-mcp echo"}')
_OPTIONS = Response(204, [(b"allow", ", ".join(ALLOWED).encode())])
_NOT_FOUND = Response(404, [(b"content-type", b"text/plain")], b"not found\n")
_NOT_ALLOWED = method_not_allowed(ALLOWED)


async def echo(request: Request) -> Response:
    if request.target == "*":  # OPTIONS * asks about the server as a whole
        return _OPTIONS
    if request.path != "/mcp" and request.path != "/mcp/":
        return _NOT_FOUND
    method = request.method
    if method == "POST":
        return Response(200, _JSON, request.body)
    if method == "GET" or method == "HEAD":
        return _STATUS
    if method == "OPTIONS":
        return _OPTIONS
    return _NOT_ALLOWED


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=8000)
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s %(message)s")
    run(echo, ServerConfig(host=args.host, port=args.port))


if __name__ == "__main__":
    main()
