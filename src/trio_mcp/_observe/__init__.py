"""What the server counts and logs about the requests it answers.

`Observer` is the one seam: the endpoint builds one when metrics or the access
log are on (`observer_for`) and None otherwise, so with both off a request
costs one ``is not None`` test where it ends. The HTTP server reaches it
through the endpoint's ``observer`` attribute (`_http._handler.HTTPObserver`),
so no layer below imports this package. Counting (`_metrics`) and the log's
buffer (`_access_log`) are plain Python objects; prometheus_client is imported
only by `_exposition`, when a scrape path is configured.
"""

from ._observer import Observer, observer_for

__all__ = ["Observer", "observer_for"]
