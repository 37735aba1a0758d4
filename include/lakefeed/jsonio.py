"""Reading a JSON object from stored text (Variables, checkpoints) with an error that names where it lives."""

from __future__ import annotations

import json
from typing import Any


def json_object(text: str | None, where: str, error: type[Exception] = ValueError) -> dict[str, Any] | None:
    """The object ``text`` holds, None for no text; ``error`` naming ``where`` when it is not an object."""
    if text is None or text == "":
        return None
    try:
        document = json.loads(text)
    except json.JSONDecodeError as exc:
        raise error(f"{where} is not JSON ({exc})") from None
    if not isinstance(document, dict):
        raise error(f"{where} must be a JSON object")
    return document
