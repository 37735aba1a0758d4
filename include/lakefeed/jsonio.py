"""Parsing stored JSON (feed metadata, Delta commits, sink messages, Variables, checkpoints) with errors
that name where it lives, whatever the parser's failure: bad syntax, bad bytes, or nesting too deep."""

from __future__ import annotations

import json
from typing import Any


def parse_json(text: str | bytes, where: str, error: type[Exception] = ValueError, **options: Any) -> Any:
    """The value ``text`` holds; ``error`` naming ``where`` when it is not JSON. Deeply nested input makes
    Python's parser raise ``RecursionError``: that is malformed input too, not a crash."""
    try:
        return json.loads(text, **options)
    except RecursionError:
        raise error(f"{where}: malformed JSON (nested too deeply)") from None
    except ValueError as exc:  # JSONDecodeError and UnicodeDecodeError are ValueErrors
        raise error(f"{where}: malformed JSON ({exc})") from None


def json_object(text: str | None, where: str, error: type[Exception] = ValueError) -> dict[str, Any] | None:
    """The object ``text`` holds, None for no text; ``error`` naming ``where`` when it is not an object."""
    if text is None or text == "":
        return None
    document = parse_json(text, where, error)
    if not isinstance(document, dict):
        raise error(f"{where} must be a JSON object")
    return document
