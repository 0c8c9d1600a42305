"""Layer 2, sans-IO: HTTP/1.1 for the server side (bytes in, requests out;
responses in, bytes out). Imports no trio."""
