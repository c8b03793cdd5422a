"""Structured logs: one JSON object per line in daemon mode, ``key=value`` pairs on a console.

Loggers are the standard library's; structured fields travel in ``extra={"fields": {...}}``.
Event names are snake_case; third-party loggers (py4j, APScheduler) are routed through the
same handler at WARNING.
"""

from __future__ import annotations

import json
import logging
import sys
from datetime import UTC, datetime
from typing import Any

__all__ = ["JsonFormatter", "configure_logging"]


class JsonFormatter(logging.Formatter):
    """``{"ts", "level", "logger", "event", ...fields}`` per line."""

    def format(self, record: logging.LogRecord) -> str:
        doc: dict[str, Any] = {
            "ts": datetime.fromtimestamp(record.created, UTC).isoformat(timespec="milliseconds"),
            "level": record.levelname.lower(),
            "logger": record.name,
            "event": record.getMessage(),
        }
        doc.update(getattr(record, "fields", {}) or {})
        if record.exc_info:
            doc["exc_info"] = self.formatException(record.exc_info)
        return json.dumps(doc, default=str)


class ConsoleFormatter(logging.Formatter):
    """``event key=value ...`` for people."""

    def format(self, record: logging.LogRecord) -> str:
        fields = " ".join(f"{k}={v}" for k, v in (getattr(record, "fields", {}) or {}).items())
        return f"{record.levelname.lower():7s} {record.getMessage()} {fields}".rstrip()


def configure_logging(fmt: str = "json", level: int = logging.INFO) -> None:
    """Install the handler on the root logger (idempotent)."""
    root = logging.getLogger()
    for h in list(root.handlers):
        if getattr(h, "_trimtab", False):
            root.removeHandler(h)
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(JsonFormatter() if fmt == "json" else ConsoleFormatter())
    handler._trimtab = True  # type: ignore[attr-defined]
    root.addHandler(handler)
    root.setLevel(logging.WARNING)
    logging.getLogger("trimtab").setLevel(level)
    for name in ("py4j", "apscheduler"):
        logging.getLogger(name).setLevel(logging.WARNING)
