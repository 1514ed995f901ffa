"""The engine's protocol without I/O (docs/engine.md, "API"): HTTP/1.1 exchanges through h11 and WebSocket sessions
through wsproto, both sans-IO, and the three streams spoken over WebSockets (exec, console, events).

Nothing here touches a socket: each class takes the bytes that arrived and gives back the bytes to send and what
happened. The blocking client (``client.py``) and the asyncio client (``aio.py``) are thin transports that move
bytes between these classes and a socket; everything they say to the engine is decided here and in ``_calls.py``.
"""

from __future__ import annotations

import codecs
import json
import os
import re
import urllib.parse
from dataclasses import dataclass
from typing import Any, Dict, Iterable, List, Optional, Tuple, Union

import h11
from wsproto import ConnectionType, WSConnection
from wsproto import events as ws_events

from ._errors import SmolError, StreamClosed, api_error, error_from_body
from ._types import ExecResult, Progress, event_from_json

API_PREFIX = "/api/v1"
USER_AGENT = "smol-studio-python/0.1"


@dataclass(frozen=True)
class Target:
    """Where the engine listens: its Unix socket (``socket_path``), or a TCP listener with its token."""

    socket_path: Optional[str] = None
    host: str = "127.0.0.1"
    port: int = 0
    tls: bool = False
    token: Optional[str] = None
    #: TLS: the certificate's SHA-256 fingerprint to accept; without it, the one pinned on first use in ``pins`` (a
    #: path; the client's engines file when None). Never a CA check (docs/remote.md, "Pinning").
    fingerprint: Optional[str] = None
    pins: Optional[str] = None
    #: A remote engine that this one reaches for the app (``add_engine``): every request and WebSocket goes to
    #: ``/api/v1/engines/NAME/…`` here, which this engine forwards to that one over its pinned TLS with its token
    #: (docs/remote.md, "The app with several engines"). None: this engine's own API.
    through: Optional[str] = None

    def route(self, path: str) -> str:
        """``path`` (``/api/v1/…``) as it is sent: through ``/api/v1/engines/NAME`` when ``through`` is set."""
        if self.through is None or not path.startswith(API_PREFIX + "/"):
            return path
        return f"{API_PREFIX}/engines/{quote(self.through)}{path[len(API_PREFIX):]}"

    @classmethod
    def unix(cls, socket_path: str) -> "Target":
        return cls(socket_path=socket_path)

    @classmethod
    def url(
        cls, url: str, token: Optional[str] = None, fingerprint: Optional[str] = None, pins: Optional[str] = None
    ) -> "Target":
        """A TCP listener's URL (``http://127.0.0.1:PORT``); its token from ``token`` or the URL's ``?token=``."""
        parts = urllib.parse.urlsplit(url)
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise ValueError(f"url: expected http://HOST:PORT or https://HOST:PORT, got {url!r}")
        if token is None:
            token = (urllib.parse.parse_qs(parts.query).get("token") or [None])[0]
        if not token:
            raise ValueError(f"url: {url} needs a token (token=..., or ?token= in the URL as smol serve prints it)")
        tls = parts.scheme == "https"
        port = parts.port or (443 if tls else 80)
        return cls(host=parts.hostname, port=port, tls=tls, token=token, fingerprint=fingerprint, pins=pins)

    @property
    def host_header(self) -> str:
        if self.socket_path is not None:
            return "localhost"
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"{host}:{self.port}"

    def auth_headers(self) -> List[Tuple[str, str]]:
        return [("Authorization", f"Bearer {self.token}")] if self.token else []

    def describe(self) -> str:
        """The socket's path, or ``host:port`` as pins are keyed (an IPv6 host in brackets, as the CLI keys it)."""
        return self.socket_path if self.socket_path is not None else self.host_header


def quote(segment: str) -> str:
    """One path segment, percent-encoded (encodeURIComponent's set)."""
    return urllib.parse.quote(segment, safe="-_.!~*'()")


# ---- HTTP ----


@dataclass
class HttpRequest:
    method: str
    path: str
    #: The JSON body (None: none), or raw bytes with ``raw``.
    json_body: Any = None
    raw: Optional[bytes] = None
    #: A streamed raw body (chunked), for file uploads of any size.
    stream: Optional[Iterable[bytes]] = None
    content_type: Optional[str] = None
    #: Headers of its own (``If-None-Match``), after the ones every request has.
    headers: Tuple[Tuple[str, str], ...] = ()

    def body_bytes(self) -> Optional[bytes]:
        if self.raw is not None:
            return self.raw
        if self.json_body is not None:
            return json.dumps(self.json_body, separators=(",", ":")).encode("utf-8")
        return None


@dataclass
class HttpResponse:
    status: int
    reason: str
    headers: Dict[str, str]
    body: bytes

    @property
    def content_type(self) -> str:
        return self.headers.get("content-type", "")

    def raise_for_status(self) -> None:
        if self.status >= 400:
            raise error_from_body(self.status, self.body, self.reason)

    def json(self) -> Any:
        self.raise_for_status()
        if not self.body:
            return None
        try:
            return json.loads(self.body.decode("utf-8"))
        except ValueError as error:
            raise api_error(self.status, f"the engine answered malformed JSON: {error}") from None


class ProtocolError(SmolError):
    """The engine's answer broke HTTP or WebSocket framing, or the connection ended mid-answer."""


@dataclass(frozen=True)
class ResponseHead:
    status: int
    reason: str
    headers: Dict[str, str]


@dataclass(frozen=True)
class BodyChunk:
    data: bytes


@dataclass(frozen=True)
class ResponseEnd:
    pass


HttpEvent = Union[ResponseHead, BodyChunk, ResponseEnd]


class HttpConnection:
    """One keep-alive HTTP/1.1 connection's protocol state (h11): requests in, bytes out; bytes in, events out."""

    def __init__(self, target: Target) -> None:
        self.target = target
        self._h11 = h11.Connection(h11.CLIENT)
        self.broken = False

    def start(self, request: HttpRequest) -> bytes:
        """The request's head, and its whole body unless it is streamed (then ``send_chunk`` and ``end``)."""
        body = request.body_bytes()
        headers: List[Tuple[str, str]] = [("Host", self.target.host_header), ("User-Agent", USER_AGENT)]
        headers += self.target.auth_headers()
        headers.append(("Accept", "application/json"))
        if request.stream is not None:
            headers.append(("Content-Type", request.content_type or "application/octet-stream"))
            headers.append(("Transfer-Encoding", "chunked"))
        elif body is not None:
            ctype = request.content_type or ("application/json" if request.raw is None else "application/octet-stream")
            headers.append(("Content-Type", ctype))
            headers.append(("Content-Length", str(len(body))))
        else:
            headers.append(("Content-Length", "0"))
        headers += request.headers
        target = self.target.route(request.path)
        out = self._h11.send(h11.Request(method=request.method, target=target, headers=headers)) or b""
        if request.stream is None:
            if body:
                out += self._h11.send(h11.Data(data=body)) or b""
            out += self._h11.send(h11.EndOfMessage()) or b""
        return out

    def send_chunk(self, data: bytes) -> bytes:
        return (self._h11.send(h11.Data(data=data)) or b"") if data else b""

    def end(self) -> bytes:
        return self._h11.send(h11.EndOfMessage()) or b""

    def feed(self, data: bytes) -> List[HttpEvent]:
        """What ``data`` (b"": the connection ended) completes of the answer."""
        try:
            self._h11.receive_data(data)
            out: List[HttpEvent] = []
            while True:
                event = self._h11.next_event()
                if event is h11.NEED_DATA or event is h11.PAUSED:
                    return out
                if isinstance(event, h11.InformationalResponse):
                    continue
                if isinstance(event, h11.Response):
                    headers = {k.decode("latin-1").lower(): v.decode("latin-1") for k, v in event.headers}
                    out.append(ResponseHead(event.status_code, event.reason.decode("latin-1"), headers))
                elif isinstance(event, h11.Data):
                    out.append(BodyChunk(bytes(event.data)))
                elif isinstance(event, h11.EndOfMessage):
                    out.append(ResponseEnd())
                    return out
                elif isinstance(event, h11.ConnectionClosed):
                    self.broken = True
                    raise ProtocolError(f"the engine at {self.target.describe()} closed the connection mid-answer")
        except h11.RemoteProtocolError as error:
            self.broken = True
            raise ProtocolError(f"the engine at {self.target.describe()} broke HTTP/1.1: {error}") from None

    def reusable(self) -> bool:
        """After a whole exchange: ready for the next request on the same connection (keep-alive)."""
        if self.broken or self._h11.our_state is not h11.DONE or self._h11.their_state is not h11.DONE:
            return False
        try:
            self._h11.start_next_cycle()
        except h11.LocalProtocolError:
            return False
        return True


class ResponseCollector:
    """Gathers an answer's events into an ``HttpResponse``."""

    def __init__(self) -> None:
        self.head: Optional[ResponseHead] = None
        self.chunks: List[bytes] = []
        self.done = False

    def add(self, events: List[HttpEvent]) -> None:
        for event in events:
            if isinstance(event, ResponseHead):
                self.head = event
            elif isinstance(event, BodyChunk):
                self.chunks.append(event.data)
            else:
                self.done = True

    def response(self) -> HttpResponse:
        assert self.head is not None
        return HttpResponse(self.head.status, self.head.reason, self.head.headers, b"".join(self.chunks))


# ---- WebSocket ----


@dataclass(frozen=True)
class WsOpened:
    pass


@dataclass(frozen=True)
class WsMessage:
    """One whole message: ``text`` for a text message, else ``data``."""

    text: Optional[str] = None
    data: Optional[bytes] = None


@dataclass(frozen=True)
class WsClosed:
    code: int
    reason: str


@dataclass(frozen=True)
class WsPong:
    """The answer to this side's ``ping``: the engine sent it after everything it had sent before the ping came."""

    payload: bytes


WsEvent = Union[WsOpened, WsMessage, WsClosed, WsPong]


class WsSession:
    """A client WebSocket's protocol state (wsproto): the handshake, whole messages in and out, close.

    A refused upgrade (the engine answers an HTTP error instead, with its ``{error}`` body) raises that error as an
    ``ApiError`` from ``feed``."""

    def __init__(self, target: Target, path: str) -> None:
        self.target = target
        self.path = path
        self._ws = WSConnection(ConnectionType.CLIENT)
        self._out = bytearray()
        self._text: List[str] = []
        self._bytes: List[bytes] = []
        self._reject_status: Optional[int] = None
        self._reject_body = bytearray()
        self._pings: List[bytes] = []
        self.open = False
        self.closed = False

    def handshake(self) -> bytes:
        headers = [(k.encode("latin-1"), v.encode("latin-1")) for k, v in self.target.auth_headers()]
        headers.append((b"User-Agent", USER_AGENT.encode()))
        target = self.target.route(self.path)
        return self._ws.send(ws_events.Request(host=self.target.host_header, target=target, extra_headers=headers))

    def send_text(self, text: str) -> bytes:
        return self._ws.send(ws_events.TextMessage(data=text)) if self.open and not self.closed else b""

    def send_json(self, message: Dict[str, Any]) -> bytes:
        return self.send_text(json.dumps(message, separators=(",", ":")))

    def send_bytes(self, data: bytes) -> bytes:
        return self._ws.send(ws_events.BytesMessage(data=data)) if self.open and not self.closed else b""

    def ping(self, payload: bytes) -> bytes:
        """A ping; its pong comes back from ``feed`` as ``WsPong(payload)`` (others' pongs are dropped)."""
        if not self.open or self.closed:
            return b""
        self._pings.append(payload)
        return self._ws.send(ws_events.Ping(payload=payload))

    def close(self, reason: str = "") -> bytes:
        """Starts the closing handshake (or nothing when it is over or never began)."""
        if not self.open or self.closed:
            return b""
        self.closed = True
        try:
            return self._ws.send(ws_events.CloseConnection(code=1000, reason=reason))
        except Exception:  # wsproto refuses when the other side already closed: nothing to say then
            return b""

    def take_outgoing(self) -> bytes:
        """Bytes wsproto wants sent in reply to what came in (pongs, the close reply)."""
        out = bytes(self._out)
        self._out.clear()
        return out

    def feed(self, data: Optional[bytes]) -> List[WsEvent]:
        """What ``data`` (None: the connection ended) brought; replies wait in ``take_outgoing``."""
        try:
            self._ws.receive_data(data)
        except Exception as error:  # wsproto raises its own RemoteProtocolError
            raise ProtocolError(f"the engine's WebSocket at {self.path} broke the protocol: {error}") from None
        out: List[WsEvent] = []
        for event in self._ws.events():
            if isinstance(event, ws_events.AcceptConnection):
                self.open = True
                out.append(WsOpened())
            elif isinstance(event, ws_events.RejectConnection):
                self._reject_status = event.status_code
                if not event.has_body:
                    raise error_from_body(event.status_code, b"")
            elif isinstance(event, ws_events.RejectData):
                self._reject_body += event.data
                if event.body_finished:
                    raise error_from_body(self._reject_status or 0, bytes(self._reject_body))
            elif isinstance(event, ws_events.TextMessage):
                self._text.append(event.data)
                if event.message_finished:
                    out.append(WsMessage(text="".join(self._text)))
                    self._text.clear()
            elif isinstance(event, ws_events.BytesMessage):
                self._bytes.append(bytes(event.data))
                if event.message_finished:
                    out.append(WsMessage(data=b"".join(self._bytes)))
                    self._bytes.clear()
            elif isinstance(event, ws_events.Ping):
                self._out += self._ws.send(event.response())
            elif isinstance(event, ws_events.Pong):
                payload = bytes(event.payload)
                if payload in self._pings:
                    self._pings.remove(payload)
                    out.append(WsPong(payload))
            elif isinstance(event, ws_events.CloseConnection):
                if not self.closed:
                    self.closed = True
                    try:
                        self._out += self._ws.send(event.response())
                    except Exception:
                        pass
                out.append(WsClosed(event.code, event.reason or ""))
        if data is None and not any(isinstance(e, WsClosed) for e in out):
            if self._reject_status is not None:
                raise error_from_body(self._reject_status, bytes(self._reject_body))
            if not self.open:
                raise ProtocolError(f"the engine closed {self.path} before answering the WebSocket handshake")
            self.closed = True
            out.append(WsClosed(1006, "the connection closed"))
        return out


# ---- the three streams ----


class ProgressFollower:
    """One request's ``Progress`` events on an event stream, up to the pong of the ping (``mark``) its client sends
    once the request has answered: the engine sends that pong after every event it sent before the ping came, so the
    last progress is in by then. ``take`` gives each message's progress of ``request_id`` (None for the others) and
    sets ``done`` at the pong or the stream's end."""

    def __init__(self, request_id: str) -> None:
        self.request_id = request_id
        self.mark = os.urandom(8)
        self.done = False

    def take(self, message: WsEvent) -> Optional[Progress]:
        if isinstance(message, WsClosed) or (isinstance(message, WsPong) and message.payload == self.mark):
            self.done = True
            return None
        if not isinstance(message, WsMessage) or message.text is None:
            return None
        event = event_from_json(json.loads(message.text))
        return event if isinstance(event, Progress) and event.request == self.request_id else None


def exec_request(
    argv: List[str],
    env: Optional[Dict[str, str]],
    workdir: Optional[str],
    timeout: Optional[float],
    stdin: bool,
    user: Optional[str] = None,
    tty: Optional[Tuple[int, int]] = None,
) -> Dict[str, Any]:
    """The exec stream's first message (an ExecRequest); bad arguments raise ``ValueError`` naming the argument."""
    if isinstance(argv, (str, bytes)) or not argv or not all(isinstance(a, str) for a in argv):
        raise ValueError(f"argv: expected a non-empty list of strings (no shell: ['sh', '-c', '...']), got {argv!r}")
    request: Dict[str, Any] = {"argv": list(argv)}
    if env:
        for name in env:
            if not name or "=" in name or "\0" in name:
                raise ValueError(f"env: {name!r} is not a variable name (no '=' or NUL)")
        request["env"] = dict(env)
    if workdir is not None:
        request["cwd"] = workdir
    if user is not None:
        if not isinstance(user, str) or not re.fullmatch(r"[^:\0]+(:[^:\0]+)?", user) or len(user) > 256:
            raise ValueError(f"user: expected a name, uid, name:group or uid:gid, got {user!r}")
        request["user"] = user
    if timeout is not None:
        if timeout <= 0:
            raise ValueError(f"timeout: expected seconds > 0, got {timeout!r}")
        request["timeoutMs"] = max(1, int(timeout * 1000 + 0.999))
    if stdin:
        request["stdin"] = True
    if tty is not None:
        rows, cols = terminal_size(tty, "tty")
        request["tty"] = {"rows": rows, "cols": cols}
    return request


TTY_MAX = 1000


def terminal_size(size: Tuple[int, int], where: str) -> Tuple[int, int]:
    """``(rows, cols)``, each a whole number 1 to 1000; else ``ValueError`` naming ``where`` and the size."""
    try:
        rows, cols = size
    except (TypeError, ValueError):
        raise ValueError(f"{where}: expected (rows, cols), got {size!r}") from None
    for n in (rows, cols):
        if isinstance(n, bool) or not isinstance(n, int) or not 1 <= n <= TTY_MAX:
            raise ValueError(f"{where}: a terminal of {rows!r} rows and {cols!r} columns (each 1 to {TTY_MAX})")
    return rows, cols


def resize_message(size: Tuple[int, int], has_terminal: bool) -> Dict[str, Any]:
    """The exec stream's resize message; ``ValueError`` for a command without a terminal or a bad size."""
    if not has_terminal:
        raise ValueError("resize: this command has no terminal (start it with tty=(rows, cols))")
    rows, cols = terminal_size(size, "resize")
    return {"type": "resize", "rows": rows, "cols": cols}


@dataclass(frozen=True)
class ExecStarted:
    pass


@dataclass(frozen=True)
class ExecOutput:
    #: 1 for stdout, 2 for stderr.
    fd: int
    data: bytes


@dataclass(frozen=True)
class ExecExited:
    result: ExecResult


ExecEvent = Union[ExecStarted, ExecOutput, ExecExited]


class ExecSession:
    """The exec WebSocket's messages (routes.ts, ``execStream``) as events; an error ends it with an exception."""

    def __init__(self, vm: str) -> None:
        self.vm = vm
        self.started = False
        self.exited = False

    def path(self) -> str:
        return f"{API_PREFIX}/vms/{quote(self.vm)}/exec"

    def handle(self, event: WsEvent) -> List[ExecEvent]:
        if isinstance(event, WsOpened):
            return []
        if isinstance(event, WsClosed):
            if self.exited:
                return []
            raise StreamClosed(f"the exec stream of {self.vm} ended before the command did ({event.reason or event.code})")
        if event.data is not None:
            if not event.data:
                return []
            return [ExecOutput(2 if event.data[0] == 2 else 1, event.data[1:])]
        try:
            message = json.loads(event.text or "")
        except ValueError:
            raise ProtocolError("the engine sent a malformed exec message") from None
        kind = message.get("type")
        if kind == "started":
            self.started = True
            return [ExecStarted()]
        if kind == "exit":
            self.exited = True
            return [
                ExecExited(
                    ExecResult(
                        exit_code=message.get("exitCode"),
                        signal=message.get("signal"),
                        timed_out=bool(message.get("timedOut")),
                    )
                )
            ]
        if kind == "error":
            # The stream's errors carry no code; as the TypeScript client does, they are the guest's refusals (400).
            self.exited = True
            raise api_error(400, str(message.get("message", "exec failed")))
        return []


@dataclass(frozen=True)
class ConsoleScreen:
    """The current screen (xterm escape sequences): first, and again after a resync."""

    data: str
    reason: str


@dataclass(frozen=True)
class ConsoleOutput:
    data: bytes


@dataclass(frozen=True)
class ConsoleClosed:
    reason: str


ConsoleEvent = Union[ConsoleScreen, ConsoleOutput, ConsoleClosed]


def console_path(vm: str) -> str:
    return f"{API_PREFIX}/vms/{quote(vm)}/console"


def console_event(event: WsEvent) -> List[ConsoleEvent]:
    if isinstance(event, WsOpened):
        return []
    if isinstance(event, WsClosed):
        return [ConsoleClosed(event.reason or f"the connection closed ({event.code})")]
    if event.data is not None:
        return [ConsoleOutput(event.data)]
    try:
        message = json.loads(event.text or "")
    except ValueError:
        raise ProtocolError("the engine sent a malformed console message") from None
    kind = message.get("type")
    if kind == "screen":
        return [ConsoleScreen(str(message.get("data", "")), str(message.get("reason", "attach")))]
    if kind == "closed":
        return [ConsoleClosed(str(message.get("reason", "closed")))]
    if kind == "error":
        raise api_error(400, str(message.get("message", "the console refused the input")))
    return []


EVENTS_PATH = f"{API_PREFIX}/events"


class OutputMatcher:
    """``wait_for_output``'s state: the console's text since the call (its screen first) searched for a pattern."""

    def __init__(self, pattern: "Union[str, re.Pattern[str]]") -> None:
        self.pattern: "re.Pattern[str]" = pattern if isinstance(pattern, re.Pattern) else re.compile(pattern)
        self.text = ""
        self._decoder = codecs.getincrementaldecoder("utf-8")("replace")

    def add(self, event: ConsoleEvent) -> "Optional[re.Match[str]]":
        """The match once the text has one, else None."""
        if isinstance(event, ConsoleScreen):
            self.text += event.data
        elif isinstance(event, ConsoleOutput):
            self.text += self._decoder.decode(event.data)
        else:
            return None
        return self.pattern.search(self.text)

    def tail(self) -> str:
        return self.text[-300:]
