"""Layer 5: the application API (`Server`, its records, `Context`, schemas and
content). Imports no trio."""
