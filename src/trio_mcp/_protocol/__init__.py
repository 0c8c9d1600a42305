"""Layers 3-4, sans-IO: the MCP rules. JSON-RPC, the protocol revisions, the
2026-07-28 envelope and sealed request state, sessions and event buffers, and
admission (Origin/Host, Accept, Content-Type). Imports no trio."""
