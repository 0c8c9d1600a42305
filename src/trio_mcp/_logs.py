"""The process's log when trio-mcp runs it (``trio-mcp run``, ``run_mcp()``).

The library never configures logging on its own; these functions are what
the command line, and a script's ``run_mcp()`` when nothing is configured,
call. Records always go to stderr: with ``--transport stdio``, stdout is the
protocol's.
"""

from __future__ import annotations

import datetime
import json
import logging
import logging.config
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Final

TEXT_FORMAT: Final = "%(asctime)s %(levelname)s %(name)s %(message)s"


class JSONFormatter(logging.Formatter):
    """One JSON object a line: time (UTC, ISO 8601), level, logger, message,
    and the traceback as ``exception`` when there is one."""

    def format(self, record: logging.LogRecord) -> str:
        entry = {
            "time": datetime.datetime.fromtimestamp(record.created, datetime.timezone.utc)
            .isoformat(timespec="milliseconds")
            .replace("+00:00", "Z"),
            "level": record.levelname,
            "logger": record.name,
            "message": record.getMessage(),
        }
        if record.exc_info:
            entry["exception"] = self.formatException(record.exc_info)
        if record.stack_info:
            entry["stack"] = self.formatStack(record.stack_info)
        return json.dumps(entry, ensure_ascii=False)


def configure(level: str = "info", form: str = "text", config_file: str | None = None) -> None:
    """Set up the root logger, unless it has handlers already: to stderr at
    `level`, as ``text`` or ``json``; or as `config_file` says (``.json`` for
    dictConfig, else fileConfig). Raises ValueError, naming the file, for one
    that cannot be used."""
    if config_file is not None:
        try:
            if config_file.endswith(".json"):
                with open(config_file, encoding="utf-8") as file:
                    logging.config.dictConfig(json.load(file))
            else:
                logging.config.fileConfig(config_file, disable_existing_loggers=False)
        except (OSError, ValueError, KeyError, TypeError, AttributeError) as exc:
            raise ValueError(f"log_config {config_file}: {exc}") from None
        return
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(JSONFormatter() if form == "json" else logging.Formatter(TEXT_FORMAT))
    # (as logging.basicConfig: a root logger that has handlers is left as it is)
    logging.basicConfig(level=level.upper(), handlers=[handler])


@contextmanager
def default_logging() -> Iterator[None]:
    """While serving from a script: log trio-mcp's records of level info and
    above to stderr, unless logging is configured already (the root logger has
    a handler); taken away again after."""
    root = logging.getLogger()
    if root.handlers:
        yield
        return
    ours = logging.getLogger("trio_mcp")
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(logging.Formatter(TEXT_FORMAT))
    level = ours.level
    ours.addHandler(handler)
    if ours.getEffectiveLevel() > logging.INFO:
        ours.setLevel(logging.INFO)
    try:
        yield
    finally:
        ours.removeHandler(handler)
        ours.setLevel(level)
