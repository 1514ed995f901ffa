"""Exceptions. Every error the engine answers (``{"error": {"code", "message"}}``) is an ``ApiError`` carrying the
API's code and message, raised as the subclass for its code when there is one."""

from __future__ import annotations

import json
from typing import Dict, Optional, Type


class SmolError(Exception):
    """Anything this SDK raises on purpose."""


class EngineUnavailable(SmolError):
    """No engine answers (none runs and none may be started, it failed to start, or the connection broke)."""


class ApiError(SmolError):
    """An error the engine answered: ``code`` is the API's code (the HTTP status), ``message`` what it said, and
    ``reason`` the kind of failure when the engine names one (an errno-like name: ``EUNREACHABLE``, ``EBUSY``...),
    else None."""

    def __init__(self, code: int, message: str, reason: Optional[str] = None) -> None:
        super().__init__(f"{message} ({code})")
        self.code = code
        self.message = message
        self.reason = reason


class BadRequest(ApiError):
    """400: a malformed request (the message names the field and why), or a command or path the guest refused."""


class Unauthorized(ApiError):
    """401: the TCP listener wants its token."""


class Forbidden(ApiError):
    """403."""


class NotFound(ApiError):
    """404: no such episode, VM or snapshot."""


class Conflict(ApiError):
    """409: the VM is in the wrong state (``vm-… is suspended``), or has no agent."""


class Unavailable(ApiError):
    """503: the engine is stopping, or the guest agent does not answer."""


class BadGateway(ApiError):
    """502: a remote engine reached through this one (``Smol.through(name)``) did not answer (``reason``
    ``EUNREACHABLE``), presented another certificate than its pin (``ECERTCHANGED``) or refused the token it was added
    with (``EREMOTETOKEN``); the message names the engine (docs/remote.md, "The app with several engines")."""


class WaitTimeout(SmolError, TimeoutError):
    """``wait_for_output`` (or another wait) gave up; the message says what was seen last."""


class CopyFailed(SmolError):
    """``copy_in``/``copy_out``: the guest's tar failed (its message), or what it sent had an entry outside what was
    asked for, a ``..`` in a name, or a way out of the destination."""


class StreamClosed(SmolError):
    """A console, exec or event stream ended before what was waited for."""


_BY_CODE: Dict[int, Type[ApiError]] = {
    400: BadRequest,
    401: Unauthorized,
    403: Forbidden,
    404: NotFound,
    409: Conflict,
    502: BadGateway,
    503: Unavailable,
}


def api_error(code: int, message: str, reason: Optional[str] = None) -> ApiError:
    return _BY_CODE.get(code, ApiError)(code, message, reason)


def error_from_body(status: int, body: bytes, reason: Optional[str] = None) -> ApiError:
    """The error an answer of ``status`` with ``body`` says: its ``{error: {code, message}}``, else its text."""
    text = body.decode("utf-8", "replace")
    try:
        err = json.loads(text).get("error", {})
        if isinstance(err.get("message"), str):
            code = err.get("code")
            why = err.get("reason")
            return api_error(code if isinstance(code, int) else status, err["message"], why if isinstance(why, str) else None)
    except (ValueError, AttributeError):
        pass
    return api_error(status, text.strip() or f"{status} {reason or ''}".strip())
