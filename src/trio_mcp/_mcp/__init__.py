"""The MCP endpoint on the trio shell: routing, the transports of each era,
the request runner, fan-out and the streams."""
