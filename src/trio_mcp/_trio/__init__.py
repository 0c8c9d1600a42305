"""The I/O shell: the only part of trio-mcp that imports trio for I/O."""
