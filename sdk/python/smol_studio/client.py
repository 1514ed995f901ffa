"""The blocking client: ``smol_studio.connect()`` and ``Smol``. A thin transport (stdlib sockets, a small pool of
keep-alive connections, safe to share between threads) over the protocol in ``_protocol.py`` and ``_calls.py``."""

from __future__ import annotations

import collections
import concurrent.futures
import contextlib
import dataclasses
import json
import os
import posixpath
import socket
import threading
import time
from typing import (
    Any,
    Callable,
    Deque,
    Dict,
    Iterable,
    Iterator,
    List,
    Mapping,
    Optional,
    Pattern,
    Tuple,
    TypeVar,
    Union,
)

from . import _calls as calls
from . import _copy as copying
from ._calls import Call
from ._engine import EngineLauncher, no_engine, smol_home, socket_path
from ._pins import check_pin, insecure_context, remote_engine, remote_target
from ._copy import CopyResult
from ._errors import BadRequest, EngineUnavailable, NotFound, SmolError, StreamClosed, WaitTimeout
from ._protocol import (
    EVENTS_PATH,
    ConsoleClosed,
    ConsoleEvent,
    ExecExited,
    ExecOutput,
    ExecSession,
    HttpConnection,
    HttpRequest,
    HttpResponse,
    OutputMatcher,
    ProgressFollower,
    ProtocolError,
    ResponseCollector,
    Target,
    WsClosed,
    WsEvent,
    WsMessage,
    WsOpened,
    WsSession,
    console_event,
    console_path,
    exec_request,
    resize_message,
)
from ._types import (
    AddedEngine,
    CreatedToken,
    Diff,
    EngineProbe,
    Episode,
    Event,
    ExecResult,
    ForkResult,
    GcResult,
    Health,
    HostReport,
    Image,
    Inspected,
    LabelValue,
    Listener,
    Logs,
    MemoryStats,
    MetricsHistory,
    PulledImage,
    Ref,
    RemoteEngine,
    RemovedImages,
    RestoreResult,
    Screen,
    SmolfileCheck,
    SmolfileExample,
    SmolfileProblem,
    Snapshot,
    SnapshotNode,
    TokenInfo,
    Packed,
    Progress,
    Up,
    Vm,
    VmNetwork,
    build_tree,
    event_from_json,
    fspath,
    ref_of,
)

T = TypeVar("T")
StdinSource = Union[bytes, str, Iterable[bytes], None]
#: What ``pack`` and ``up_from`` call with each ``Progress`` event of their own request.
OnProgress = Callable[[Progress], Any]

#: An idle keep-alive connection older than this is dropped before the engine's 5 s keep-alive would drop it.
IDLE_SECONDS = 4.0
RECV_SIZE = 1 << 16


def open_socket(target: Target, timeout: Optional[float]) -> socket.socket:
    """A connected socket to the engine (its Unix socket, or TCP with TLS for https)."""
    try:
        if target.socket_path is not None:
            sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            sock.settimeout(timeout)
            try:
                sock.connect(target.socket_path)
            except BaseException:
                sock.close()
                raise
            return sock
        sock = socket.create_connection((target.host, target.port), timeout=timeout)
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        if target.tls:
            sock = insecure_context().wrap_socket(sock, server_hostname=target.host)
            try:
                check_pin(sock, target.describe(), target.fingerprint, target.pins)
            except BaseException:
                sock.close()
                raise
        return sock
    except OSError as error:
        raise EngineUnavailable(f"cannot reach the engine at {target.describe()}: {error}") from error


class _Stale(Exception):
    """A reused keep-alive connection the engine had closed before our request reached it."""


class SyncTransport:
    """HTTP exchanges and WebSockets over blocking sockets; idle connections are kept for the next request."""

    def __init__(self, target: Target, timeout: Optional[float] = None) -> None:
        self.target = target
        self.timeout = timeout
        self._idle: List[Tuple[socket.socket, HttpConnection, float]] = []
        self._lock = threading.Lock()
        self._closed = False

    def close(self) -> None:
        with self._lock:
            self._closed = True
            idle, self._idle = self._idle, []
        for sock, _, _ in idle:
            sock.close()

    def _checkout(self) -> Tuple[socket.socket, HttpConnection, bool]:
        now = time.monotonic()
        with self._lock:
            while self._idle:
                sock, conn, since = self._idle.pop()
                if now - since < IDLE_SECONDS:
                    return sock, conn, True
                sock.close()
        return open_socket(self.target, self.timeout), HttpConnection(self.target), False

    def _checkin(self, sock: socket.socket, conn: HttpConnection) -> None:
        if conn.reusable():
            with self._lock:
                if not self._closed:
                    self._idle.append((sock, conn, time.monotonic()))
                    return
        sock.close()

    def request(self, request: HttpRequest) -> HttpResponse:
        while True:
            sock, conn, reused = self._checkout()
            try:
                response = self._exchange(sock, conn, request, reused)
            except _Stale:
                sock.close()
                continue
            except BaseException:
                sock.close()
                raise
            self._checkin(sock, conn)
            return response

    def _exchange(self, sock: socket.socket, conn: HttpConnection, request: HttpRequest, reused: bool) -> HttpResponse:
        collector = ResponseCollector()
        got_any = False
        try:
            sock.sendall(conn.start(request))
            if request.stream is not None:
                try:
                    for chunk in request.stream:
                        sock.sendall(conn.send_chunk(bytes(chunk)))
                    sock.sendall(conn.end())
                except (BrokenPipeError, ConnectionResetError):
                    pass  # the engine answered (an error) before taking it all: the answer says why
            while not collector.done:
                data = sock.recv(RECV_SIZE)
                if not data and not got_any and reused:
                    raise _Stale()
                got_any = got_any or bool(data)
                collector.add(conn.feed(data))
        except (BrokenPipeError, ConnectionResetError) as error:
            if reused and not got_any:
                raise _Stale() from None
            raise EngineUnavailable(f"the connection to the engine at {self.target.describe()} broke: {error}") from None
        except socket.timeout:
            raise EngineUnavailable(
                f"the engine at {self.target.describe()} did not answer {request.method} {request.path} "
                f"within {self.timeout:g} s"
            ) from None
        return collector.response()

    def call(self, call: Call[T]) -> T:
        return call.parse(self.request(call.request))

    def websocket(self, path: str) -> "SyncWebSocket":
        return SyncWebSocket(self, path)


class SyncWebSocket:
    """A WebSocket on its own connection: whole messages in order; ``send_*`` may come from another thread."""

    def __init__(self, transport: SyncTransport, path: str) -> None:
        self.session = WsSession(transport.target, path)
        self._sock = open_socket(transport.target, transport.timeout)
        self._lock = threading.Lock()
        self._pending: Deque[WsEvent] = collections.deque()
        self.closed = False
        try:
            self._sock.sendall(self.session.handshake())
            while not self.session.open:
                self._read(None)
        except BaseException:
            self._sock.close()
            raise
        # The handshake's own event is not a message.
        while self._pending and isinstance(self._pending[0], WsOpened):
            self._pending.popleft()

    def _read(self, deadline: Optional[float]) -> None:
        if deadline is not None:
            left = deadline - time.monotonic()
            if left <= 0:
                raise socket.timeout()
            self._sock.settimeout(left)
        else:
            self._sock.settimeout(None)
        try:
            data = self._sock.recv(RECV_SIZE)
        except (ConnectionResetError, BrokenPipeError):
            data = b""
        with self._lock:
            events = self.session.feed(data or None)
            reply = self.session.take_outgoing()
        if reply:
            self._send_raw(reply)
        self._pending.extend(events)

    def next(self, timeout: Optional[float] = None) -> WsEvent:
        """The next message or the close; ``socket.timeout`` after ``timeout`` seconds."""
        deadline = None if timeout is None else time.monotonic() + timeout
        while not self._pending:
            if self.closed:
                return WsClosed(1006, "the stream was closed")
            self._read(deadline)
        event = self._pending.popleft()
        if isinstance(event, WsClosed):
            self.closed = True
        return event

    def _send_raw(self, data: bytes) -> None:
        try:
            self._sock.sendall(data)
        except OSError:
            pass  # it is gone; the next read says how

    def send_text(self, text: str) -> None:
        with self._lock:
            data = self.session.send_text(text)
        self._send_raw(data)

    def send_json(self, message: Dict[str, Any]) -> None:
        with self._lock:
            data = self.session.send_json(message)
        self._send_raw(data)

    def send_bytes(self, payload: bytes) -> None:
        with self._lock:
            data = self.session.send_bytes(payload)
        self._send_raw(data)

    def ping(self, payload: bytes) -> None:
        """Its ``WsPong(payload)`` comes after every message the engine sent before the ping reached it."""
        with self._lock:
            data = self.session.ping(payload)
        self._send_raw(data)

    def close(self) -> None:
        if self.closed:
            return
        self.closed = True
        with self._lock:
            data = self.session.close()
        self._send_raw(data)
        self._sock.close()


# ---- streams ----


def _chunks(data: Union[bytes, str]) -> Iterator[bytes]:
    raw = data.encode("utf-8") if isinstance(data, str) else bytes(data)
    for at in range(0, len(raw), 1 << 16):
        yield raw[at : at + (1 << 16)]


class ExecStream:
    """A command running in the guest: iterate for ``(fd, chunk)`` output (fd 1 stdout, 2 stderr) as it comes; then
    ``result`` says how it ended. ``write`` and ``close_stdin`` feed its stdin (opened with ``stdin=True``)."""

    def __init__(self, transport: SyncTransport, vm: str, request: Dict[str, Any]) -> None:
        self._session = ExecSession(vm)
        self._ws = transport.websocket(self._session.path())
        self._ws.send_json(request)
        self._tty = "tty" in request
        self.result: Optional[ExecResult] = None

    @property
    def started(self) -> bool:
        """Whether the agent ran the command (a signal before that reaches nothing)."""
        return self._session.started

    def __iter__(self) -> Iterator[Tuple[int, bytes]]:
        while self.result is None:
            for event in self._session.handle(self._ws.next()):
                if isinstance(event, ExecOutput):
                    yield event.fd, event.data
                elif isinstance(event, ExecExited):
                    self.result = event.result
        self._ws.close()

    def write(self, data: Union[bytes, str]) -> None:
        for chunk in _chunks(data):
            self._ws.send_bytes(chunk)

    def close_stdin(self) -> None:
        self._ws.send_json({"type": "eof"})

    def signal(self, name: str = "SIGINT") -> None:
        """Signals the command's process group (``SIGINT``, ``SIGTERM``, ``SIGKILL`` ...) and, on a terminal, its
        foreground job."""
        self._ws.send_json({"type": "signal", "signal": name})

    def resize(self, rows: int, cols: int) -> None:
        """Resizes its terminal (started with ``tty``); ``ValueError`` without one or for a size out of 1-1000."""
        self._ws.send_json(resize_message((rows, cols), self._tty))

    def wait(self) -> ExecResult:
        """Reads to the end (dropping output not read yet) and says how it ended."""
        for _ in self:
            pass
        assert self.result is not None
        return self.result

    def close(self) -> None:
        """Gives up on it: a command that started gets SIGHUP, as from a closed terminal."""
        self._ws.close()

    def __enter__(self) -> "ExecStream":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()


class ConsoleStream:
    """A VM's live console: iterate for ``ConsoleScreen`` (first) and ``ConsoleOutput`` events; ``write`` types."""

    def __init__(self, transport: SyncTransport, vm: str) -> None:
        self.vm = vm
        self._ws = transport.websocket(console_path(vm))

    def next(self, timeout: Optional[float] = None) -> ConsoleEvent:
        while True:
            try:
                events = console_event(self._ws.next(timeout))
            except socket.timeout:
                raise WaitTimeout(f"{self.vm}'s console said nothing within {timeout:g} s") from None
            if events:
                return events[0]

    def __iter__(self) -> Iterator[ConsoleEvent]:
        while True:
            event = self.next()
            yield event
            if isinstance(event, ConsoleClosed):
                return

    def write(self, data: Union[bytes, str]) -> None:
        if isinstance(data, str):
            self._ws.send_text(data)
        else:
            self._ws.send_bytes(bytes(data))

    def wait_for(self, pattern: Union[str, Pattern[str]], timeout: float = 30.0) -> Any:
        """The ``re.Match`` once the console's text since it attached (its screen first) matches ``pattern``."""
        matcher = OutputMatcher(pattern)
        deadline = time.monotonic() + timeout
        while True:
            left = deadline - time.monotonic()
            try:
                if left <= 0:
                    raise WaitTimeout("")
                event = self.next(left)
            except WaitTimeout:
                raise WaitTimeout(
                    f"{self.vm} did not print {matcher.pattern.pattern!r} within {timeout:g} s; "
                    f"it printed: {matcher.tail()!r}"
                ) from None
            if isinstance(event, ConsoleClosed):
                raise StreamClosed(f"{self.vm}'s console closed ({event.reason}) before it printed {matcher.pattern.pattern!r}")
            match = matcher.add(event)
            if match:
                return match

    def close(self) -> None:
        self._ws.close()

    def __enter__(self) -> "ConsoleStream":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()


class EventStream:
    """Every engine event from the moment it was opened, in order: iterate, or ``next(timeout)``."""

    def __init__(self, transport: SyncTransport) -> None:
        self._ws = transport.websocket(EVENTS_PATH)

    def next(self, timeout: Optional[float] = None) -> Event:
        while True:
            try:
                message = self._ws.next(timeout)
            except socket.timeout:
                raise WaitTimeout(f"no engine event within {timeout:g} s") from None
            if isinstance(message, WsClosed):
                raise StreamClosed(f"the event stream ended ({message.reason or message.code})")
            if isinstance(message, WsMessage) and message.text is not None:
                return event_from_json(json.loads(message.text))

    def follow(self, request_id: str, on_progress: OnProgress, work: Callable[[], T]) -> T:
        """Runs ``work`` (in a thread of its own) and gives ``on_progress``, in this thread, every ``Progress`` event
        of ``request_id`` in order, the last one before this returns: when ``work`` ends, a ping goes to the engine,
        whose pong comes after every event it sent before. An error of ``on_progress`` is raised once ``work`` is
        done (the work goes on in the engine either way); the stream is read to the pong, the other events dropped."""
        follower = ProgressFollower(request_id)
        outcome: "concurrent.futures.Future[T]" = concurrent.futures.Future()

        def run() -> None:
            try:
                outcome.set_result(work())
            except BaseException as error:  # raised in the caller's thread below
                outcome.set_exception(error)
            self._ws.ping(follower.mark)

        threading.Thread(target=run, name="smol-follow", daemon=True).start()
        failed: List[Exception] = []
        try:
            while not follower.done:
                progress = follower.take(self._ws.next())
                if progress is not None and not failed:
                    try:
                        on_progress(progress)
                    except Exception as error:  # noqa: BLE001 (the caller's, raised after the work)
                        failed.append(error)
        except (ProtocolError, OSError):
            pass  # the stream broke: no more progress, the work's own answer still comes
        result = outcome.result()
        if failed:
            raise failed[0]
        return result

    def wait_for(self, predicate: Callable[[Event], bool], timeout: float = 30.0) -> Event:
        """The first event from here on that ``predicate`` accepts."""
        deadline = time.monotonic() + timeout
        while True:
            left = deadline - time.monotonic()
            if left <= 0:
                raise WaitTimeout(f"no matching engine event within {timeout:g} s")
            event = self.next(left)
            if predicate(event):
                return event

    def __iter__(self) -> Iterator[Event]:
        while True:
            try:
                yield self.next()
            except StreamClosed:
                return

    def close(self) -> None:
        self._ws.close()

    def __enter__(self) -> "EventStream":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()


# ---- the client ----


class Smol:
    """A client of one engine. Make one with ``smol_studio.connect()``; safe to share between threads."""

    def __init__(self, transport: SyncTransport, home: Optional[str] = None) -> None:
        self.transport = transport
        #: The data dir (None for an engine reached by URL).
        self.home = home
        self._pool: Optional[concurrent.futures.ThreadPoolExecutor] = None
        self._pool_lock = threading.Lock()
        self._episodes = calls.EpisodeList()

    def close(self) -> None:
        """Ends this client's idle connections (a process need not call it to exit)."""
        if self._pool is not None:
            self._pool.shutdown(wait=True)
        self.transport.close()

    def __enter__(self) -> "Smol":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    def _call(self, call: Call[T]) -> T:
        return self.transport.call(call)

    # -- the engine --

    def health(self) -> Health:
        return self._call(calls.health())

    def openapi(self) -> Dict[str, Any]:
        """The engine's OpenAPI document (generated from its schema module)."""
        return self._call(calls.openapi())

    def smolfiles(self) -> List[SmolfileExample]:
        """The example Smolfiles that come with the engine, with absolute paths."""
        return self._call(calls.smolfiles())

    def gc(self) -> GcResult:
        return self._call(calls.gc())

    # -- images (docs/images.md) --

    def images(self) -> List[Image]:
        """The root disk images in the engine's guest cache (``smol image ls``)."""
        return self._call(calls.images())

    def pull_image(self, reference: str, force: bool = False) -> PulledImage:
        """Pulls an OCI image (``python:3.12-slim``, ``oci:DIR[:TAG]``, ...) and makes it a root disk
        (``smol image pull``); ``force`` converts it again even when the cache has it."""
        return self._call(calls.pull_image(reference, force))

    def remove_image(self, reference: str) -> RemovedImages:
        """Forgets a pulled reference (``smol image rm``)."""
        return self._call(calls.remove_image(reference))

    def prune_images(self) -> RemovedImages:
        """Removes every image no snapshot or VM sits on (``smol image prune``)."""
        return self._call(calls.prune_images())

    def listen(self, host: str = "127.0.0.1", port: int = 0, tls: bool = False) -> Listener:
        """Opens a TCP listener with a new token (``smol serve``); ``connect(url=listener.url)`` reaches it. ``tls``:
        HTTPS with the data dir's self-signed certificate (``smol serve --tls``), its ``fingerprint`` answered."""
        return self._call(calls.listen(host, port, tls))

    def unlisten(self, port: int) -> None:
        self._call(calls.unlisten(port))

    def host(self) -> HostReport:
        """What the host's KVM is and whether Linux guests run on it (``smol doctor``'s verdict)."""
        return self._call(calls.host())

    def tokens(self) -> List[TokenInfo]:
        """The data dir's named tokens (``smol token ls``); a full token only."""
        return self._call(calls.tokens())

    def create_token(self, name: str, scope: str = "full") -> CreatedToken:
        """A new named token (``smol token create``), ``full`` or ``read-only``; its secret ``token`` is given this
        once. ``connect(url=listener_url, token=created.token)`` uses it."""
        return self._call(calls.create_token(name, scope))

    def remove_token(self, name: str) -> None:
        """Revokes a named token at once, closing the streams it opened (``smol token rm``)."""
        self._call(calls.remove_token(name))

    def shutdown(self) -> None:
        """Suspends every running VM and ends the engine (the next one resumes them)."""
        self._call(calls.shutdown())

    # -- remote engines this engine reaches (docs/remote.md, "The app with several engines") --

    def engines(self) -> List[RemoteEngine]:
        """The remote engines this engine reaches for the app, by name (its engines file); never their tokens."""
        return self._call(calls.engines())

    def probe_engine(self, url: str) -> EngineProbe:
        """The certificate the engine at ``url`` presents, from a TLS handshake that sends nothing (no token):
        compare its ``fingerprint`` with the one ``smol serve`` printed there before ``add_engine``."""
        return self._call(calls.probe_engine(url))

    def add_engine(self, name: str, url: str, token: str, fingerprint: Optional[str] = None) -> AddedEngine:
        """Adds the engine at ``url`` under ``name``: its certificate must be ``fingerprint`` (else it is pinned on
        first use) and ``token`` must open its health there, else ``BadRequest`` saying which (``reason``
        ``EUNREACHABLE`` or ``EWRONGTOKEN``) and nothing is kept; a name already added is ``Conflict``. A full token
        only."""
        return self._call(calls.add_engine(name, url, token, fingerprint))

    def remove_engine(self, name: str) -> None:
        """Forgets an added engine (and its pin, unless another name reaches that address); ``NotFound`` if none."""
        self._call(calls.remove_engine(name))

    def through(self, name: str) -> "Smol":
        """A client of the remote engine ``name`` reached through this one (``/api/v1/engines/NAME/…``): every call,
        console, exec and event stream, with this client's token here and the added token there. Nothing is sent
        until a call; one the remote engine cannot answer raises ``BadGateway`` naming it. Close it when done."""
        if self.transport.target.through is not None:
            raise ValueError(f"through: this client already goes through {self.transport.target.through}")
        target = dataclasses.replace(self.transport.target, through=name)
        return Smol(SyncTransport(target, self.transport.timeout))

    # -- episodes --

    def up(self, smolfile: "Union[str, os.PathLike[str]]", name: Optional[str] = None) -> Up:
        """A new episode from a Smolfile; its first VM is running when this returns."""
        return self._call(calls.up(fspath(smolfile), name))

    def up_text(self, text: str, directory: Optional[str] = None, name: Optional[str] = None) -> Up:
        """A new episode from a Smolfile's text; relative paths start from ``directory`` (else they are errors)."""
        return self._call(calls.up_text(text, directory, name))

    def check_smolfile(self, text: str, directory: Optional[str] = None) -> SmolfileCheck:
        """A Smolfile's text checked as ``up_text`` checks it: every error and warning at its line."""
        return self._call(calls.check_smolfile(text, directory))

    def up_from(
        self,
        machine_file: "Union[str, os.PathLike[str]]",
        name: Optional[str] = None,
        *,
        request_id: Optional[str] = None,
        on_progress: Optional[OnProgress] = None,
    ) -> Up:
        """A new episode from a .smolmachine file (docs/smolmachine.md): its first VM goes on from the packed state.
        The file is checked whole first; a damaged one, a newer format or a CPU lacking its features is refused.
        ``request_id`` and ``on_progress`` as for ``pack`` (operation ``open``)."""
        path = fspath(machine_file)
        return self._following(lambda rid: calls.up_from(path, name, rid), request_id, on_progress)

    def inspect(self, machine_file: "Union[str, os.PathLike[str]]") -> Inspected:
        """What a .smolmachine file holds (its manifest, checked) and the CPU features the engine's host lacks to
        open it (``cpu_missing``); nothing is written. A damaged file or a newer format is refused (SmolError)."""
        return self._call(calls.inspect(fspath(machine_file)))

    def pack(
        self,
        source: Ref,
        machine_file: "Union[str, os.PathLike[str]]",
        *,
        request_id: Optional[str] = None,
        on_progress: Optional[OnProgress] = None,
    ) -> Packed:
        """Packs a VM (a running one is checkpointed first) or a snapshot into a .smolmachine file. ``request_id``
        (1-64 of ``A-Za-z0-9._-``) tags the pack's ``Progress`` events (``request``), so several packs at once, or
        several clients, tell theirs apart; ``on_progress`` is called, in this thread, with each of this pack's
        events as they come (a request id ``py-<uuid>`` is made when none is given), the last before this returns."""
        path = fspath(machine_file)
        return self._following(lambda rid: calls.pack(source, path, rid), request_id, on_progress)

    def _following(
        self, make: Callable[[Optional[str]], Call[T]], request_id: Optional[str], on_progress: Optional[OnProgress]
    ) -> T:
        if on_progress is None:
            return self._call(make(request_id))
        rid = request_id or calls.new_request_id()
        call = make(rid)
        with self.events() as events:  # subscribed before the request goes
            return events.follow(rid, on_progress, lambda: self._call(call))

    def episodes(self) -> List[Episode]:
        """Every episode. The client keeps the last list and its ETag and asks with If-None-Match, so a poller gets a
        304 with no body while nothing changed (a list of 1,000 episodes is 628 KB); each call's list is its own."""
        return self._call(self._episodes.call())

    def episode(self, ref: Ref) -> Episode:
        return self._call(calls.episode(ref))

    def destroy(self, episode: Ref) -> None:
        """Kills every VM of the episode and deletes it with its snapshots."""
        self._call(calls.destroy(episode))

    # -- VMs --

    def vms(self) -> List[Vm]:
        return self._call(calls.vms())

    def vm(self, ref: Ref) -> Vm:
        return self._call(calls.vm(ref))

    def stop(self, vm: Ref) -> Vm:
        """Suspends the VM to a snapshot and ends its process; ``start`` restores it."""
        return self._call(calls.lifecycle("stop", vm))

    def start(self, vm: Ref) -> Vm:
        return self._call(calls.lifecycle("start", vm))

    def pause(self, vm: Ref) -> Vm:
        return self._call(calls.lifecycle("pause", vm))

    def resume(self, vm: Ref) -> Vm:
        return self._call(calls.lifecycle("resume", vm))

    def reset(self, vm: Ref) -> Vm:
        """A clean machine from the Smolfile's base snapshot (a bare kernel boots afresh)."""
        return self._call(calls.lifecycle("reset", vm))

    def remove_vm(self, vm: Ref) -> None:
        """Kills the VM and forgets it; its snapshots stay with the episode."""
        self._call(calls.remove_vm(vm))

    def memory(self, vm: Ref) -> MemoryStats:
        return self._call(calls.memory(vm))

    def metrics(self, vm: Ref) -> MetricsHistory:
        """CPU (% of one host CPU) and memory over the last few minutes, oldest first."""
        return self._call(calls.metrics(vm))

    def network(self, vm: Ref, after: Optional[int] = None) -> VmNetwork:
        """The VM's network (docs/network.md, "Seen from the host"): its forwarded ports (``vm.ports`` has them
        too), refusal counters and last refusals, only those after seq ``after`` when given. A VM without a network
        answers ``enabled=False``."""
        return self._call(calls.network(vm, after))

    # -- snapshots --

    def snapshots(self, episode: Ref) -> List[Snapshot]:
        """The episode's snapshots in creation order (the timeline); ``parent`` links make the tree."""
        return self._call(calls.snapshots(episode))

    def snapshot_tree(self, episode: Ref) -> List[SnapshotNode]:
        """The episode's snapshots as the tree they form: its roots, each with its children."""
        return build_tree(self.snapshots(episode))

    def snapshot(self, ref: Ref) -> Snapshot:
        return self._call(calls.snapshot(ref))

    def update_snapshot(self, ref: Ref, name: Optional[str] = None, note: Optional[str] = None) -> Snapshot:
        """Renames a snapshot or changes its note."""
        return self._call(calls.update_snapshot(ref, name, note))

    def label_snapshot(self, ref: Ref, labels: Mapping[str, Optional[LabelValue]]) -> Snapshot:
        """Sets each label to its value and removes the ones set to None; the others stay (docs/labels.md)."""
        return self._call(calls.update_snapshot(ref, None, None, labels))

    def label_vm(self, vm: Ref, labels: Mapping[str, Optional[LabelValue]]) -> Vm:
        """Sets each label of the VM to its value and removes the ones set to None; the others stay."""
        return self._call(calls.update_vm(vm, labels))

    def diff(self, from_ref: Ref, to_ref: Ref) -> Diff:
        """What changed between two snapshots of one episode (docs/diff.md): per writable disk the files added,
        removed and changed (text diffs under a size cap), and the console output between the two points. Two
        snapshots of different episodes are a ``BadRequest``, an unknown one a ``NotFound``."""
        return self._call(calls.diff(from_ref, to_ref))

    def delete_snapshot(self, ref: Ref) -> None:
        self._call(calls.delete_snapshot(ref))

    def checkpoint(self, vm: Ref, name: Optional[str] = None, note: Optional[str] = None) -> Snapshot:
        """A snapshot of the VM (it keeps running); the VM's place in the tree moves to it."""
        return self._call(calls.checkpoint(vm, name, note))

    def fork(self, ref: Ref, n: int = 1, from_: Optional[str] = None) -> ForkResult:
        """``n`` new VMs from a running VM (which keeps running) or from a snapshot: ``from_="snapshot"`` for one
        named by its name, else a ``Snapshot`` or an ``sn-`` id is taken as a snapshot and anything else as a VM."""
        return self._call(calls.fork(ref, n, from_))

    def restore(self, vm: Ref, snapshot: Ref) -> RestoreResult:
        """Moves the VM to ``snapshot``, checkpointing where it was first (``saved_as``)."""
        return self._call(calls.restore(vm, snapshot))

    # -- the console --

    def write(self, vm: Ref, text: str) -> None:
        """Types ``text`` into the VM's console."""
        self._call(calls.write(vm, text))

    def logs(self, vm: Ref, tail: Optional[int] = None) -> Logs:
        return self._call(calls.logs(vm, tail))

    def screen(self, vm: Ref) -> Screen:
        return self._call(calls.screen(vm))

    def recording(self, vm: Ref) -> str:
        """The console recording (asciicast v2) with markers at checkpoints, forks and restores."""
        return self._call(calls.recording(vm))

    def console(self, vm: Ref) -> ConsoleStream:
        """The live console (attached when this returns): its screen first, then output as it comes."""
        return ConsoleStream(self.transport, ref_of(vm, "vm"))

    def wait_for_output(self, vm: Ref, pattern: Union[str, Pattern[str]], timeout: float = 30.0) -> Any:
        """The ``re.Match`` once the VM's console (its current screen, then what comes) matches ``pattern``;
        ``WaitTimeout`` after ``timeout`` seconds, saying what it printed."""
        with self.console(vm) as console:
            return console.wait_for(pattern, timeout)

    # -- commands and files in the guest (through its agent) --

    def exec_stream(
        self,
        vm: Ref,
        argv: List[str],
        *,
        env: Optional[Dict[str, str]] = None,
        workdir: Optional[str] = None,
        user: Optional[str] = None,
        timeout: Optional[float] = None,
        stdin: bool = False,
        tty: Optional[Tuple[int, int]] = None,
    ) -> ExecStream:
        """Starts a command (no shell) and gives its stream: output as it comes, stdin, signals, its exit. With
        ``tty=(rows, cols)`` it runs on a pseudo-terminal in the guest (input always taken, all output as fd 1,
        ``resize``): what ``terminal`` gives."""
        request = exec_request(argv, env, workdir, timeout, stdin, user, tty)
        return ExecStream(self.transport, ref_of(vm, "vm"), request)

    def terminal(
        self,
        vm: Ref,
        argv: Optional[List[str]] = None,
        *,
        rows: int = 24,
        cols: int = 80,
        env: Optional[Dict[str, str]] = None,
        workdir: Optional[str] = None,
        user: Optional[str] = None,
    ) -> ExecStream:
        """A shell (or ``argv``) on a pseudo-terminal in the guest, as ``smol exec -it VM -- sh``: ``write`` types
        keys (``"\\x03"`` is Ctrl-C, which reaches the foreground job), ``resize(rows, cols)``, iterate for what it
        shows, ``wait()`` for its exit status. TERM is xterm-256color unless ``env`` says otherwise."""
        return self.exec_stream(
            vm,
            argv or ["sh"],
            env={"TERM": "xterm-256color", **(env or {})},
            workdir=workdir,
            user=user,
            tty=(rows, cols),
        )

    def exec(
        self,
        vm: Ref,
        argv: List[str],
        *,
        stdin: StdinSource = None,
        env: Optional[Dict[str, str]] = None,
        workdir: Optional[str] = None,
        user: Optional[str] = None,
        timeout: Optional[float] = None,
        on_stdout: Optional[Callable[[bytes], None]] = None,
        on_stderr: Optional[Callable[[bytes], None]] = None,
    ) -> ExecResult:
        """Runs a command in the guest (no shell: ``['sh', '-c', '...']`` for one) and returns how it ended with what
        it wrote. ``on_stdout``/``on_stderr`` get the output as it comes instead. ``stdin``: bytes, str, or an
        iterable of bytes (a file opened ``'rb'``) streamed as it is read. ``timeout``: the agent kills it after
        that many seconds (``timed_out``, status 124). ``env``, ``workdir`` and ``user`` (name, uid, name:group or
        uid:gid; ``"0"`` is root) default to the episode's (its image's Env, WorkingDir and User under the
        Smolfile's); ``env`` adds to its env per name. A program that cannot start, or a user the guest's
        /etc/passwd lacks, raises ``BadRequest``."""
        stream = self.exec_stream(
            vm, argv, env=env, workdir=workdir, user=user, timeout=timeout, stdin=stdin is not None
        )
        out: List[bytes] = []
        err: List[bytes] = []
        pump_error: List[BaseException] = []
        pump: Optional[threading.Thread] = None
        with stream:
            if isinstance(stdin, (bytes, bytearray, memoryview, str)):
                stream.write(bytes(stdin) if not isinstance(stdin, str) else stdin)
                stream.close_stdin()
            elif stdin is not None:
                source = stdin

                def feed() -> None:
                    try:
                        for chunk in source:
                            stream.write(chunk)
                        stream.close_stdin()
                    except BaseException as error:  # reported below, in the caller's thread
                        pump_error.append(error)
                        stream.close()

                pump = threading.Thread(target=feed, name="smol-exec-stdin", daemon=True)
                pump.start()
            try:
                for fd, chunk in stream:
                    if fd == 2:
                        (on_stderr or err.append)(chunk)
                    else:
                        (on_stdout or out.append)(chunk)
            except StreamClosed:
                if pump_error:
                    raise pump_error[0] from None
                raise
        if pump is not None:
            pump.join(timeout=5)
        assert stream.result is not None
        r = stream.result
        return ExecResult(r.exit_code, r.signal, r.timed_out, b"".join(out), b"".join(err))

    def read_file(self, vm: Ref, path: str) -> bytes:
        """A file from the VM's guest."""
        return self._call(calls.read_file(vm, path))

    def write_file(
        self, vm: Ref, path: str, data: Union[bytes, str, Iterable[bytes]], mode: Optional[int] = None
    ) -> int:
        """Writes a file in the guest (its directories made); the old file stays until all of it arrived. ``data``:
        bytes, str (UTF-8) or an iterable of bytes streamed as it comes. Returns the bytes written."""
        return self._call(calls.write_file(vm, path, data, mode))

    def _copy_tools(self, vm: str) -> "tuple[list[str], str]":
        for busybox in copying.BUSYBOXES:
            try:
                if self.exec(vm, [busybox, "true"], user=copying.AS_ROOT).exit_code == 0:
                    return copying.tools(busybox)
            except BadRequest:
                pass  # not there: the next
        return copying.tools(None)

    def copy_in(self, vm: Ref, source: "Union[str, os.PathLike[str]]", target: str) -> CopyResult:
        """``smol cp SOURCE VM:TARGET``: a host file or directory into the guest, as ``docker cp``: into an existing
        directory ``target`` as ``target/<name>``, else as ``target`` (its directory made). Owners (numeric), modes,
        times and links are kept; it runs as root in the guest. Streams a tar through the agent's exec."""
        vm_ref = ref_of(vm, "vm")
        copying.check_guest_path(vm_ref, target)
        source = os.fspath(source)
        packer = copying.TarPacker(source)
        sh, tar = self._copy_tools(vm_ref)
        into = self.exec(vm_ref, [*sh, "-c", copying.IS_DIRECTORY, "sh", target], user=copying.AS_ROOT).ok
        directory, name = copying.into_guest(source, target, into)
        chunks = packer.chunks(name)
        try:
            result = self.exec(
                vm_ref, [*sh, "-c", copying.extract_script(tar), "sh", directory], stdin=chunks, user=copying.AS_ROOT
            )
        finally:
            copying.close_quietly(chunks)
        if result.exit_code != 0:
            what = f"copying {source} to {vm_ref}:{target}"
            raise copying.failure(what, result.exit_code, result.signal, result.stderr)
        return CopyResult(packer.entries, packer.bytes)

    def copy_out(self, vm: Ref, source: str, target: "Union[str, os.PathLike[str]]") -> CopyResult:
        """``smol cp VM:SOURCE TARGET``: a guest file or directory here, as ``docker cp``: into an existing directory
        ``target`` as ``target/<name>``, else as ``target``. Nothing is written outside ``target``'s directory,
        whatever the guest sends (``CopyFailed`` says what it tried); owners are kept when this runs as root."""
        vm_ref = ref_of(vm, "vm")
        copying.check_guest_path(vm_ref, source)
        target = os.fspath(target)
        sh, tar = self._copy_tools(vm_ref)
        directory, name = copying.out_of_guest(source, target)
        what = f"{vm_ref}:{source}"
        unpacker = copying.TarUnpacker(directory, posixpath.basename(source.rstrip("/")), name, what)
        try:
            result = self.exec(
                vm_ref,
                [*sh, "-c", copying.create_script(tar), "sh", posixpath.dirname(source.rstrip("/")) or "/",
                 posixpath.basename(source.rstrip("/"))],
                user=copying.AS_ROOT,
                on_stdout=unpacker.feed,
            )
        except BaseException:
            unpacker.finish(ok=False)
            raise
        if result.exit_code != 0:
            unpacker.finish(ok=False)
            raise copying.failure(f"copying {what} to {target}", result.exit_code, result.signal, result.stderr)
        return unpacker.finish()

    # -- events --

    def events(self) -> EventStream:
        """Every engine event from now on (subscribed when this returns), in order."""
        return EventStream(self.transport)

    # -- shapes a harness wants --

    def run(
        self,
        smolfile: "Union[str, os.PathLike[str]]",
        argv: List[str],
        *,
        stdin: StdinSource = None,
        env: Optional[Dict[str, str]] = None,
        workdir: Optional[str] = None,
        user: Optional[str] = None,
        timeout: Optional[float] = None,
    ) -> ExecResult:
        """``smol run``: a fresh episode, the command in it, the episode deleted; how the command ended."""
        with self.episode_scope(smolfile) as started:
            return self.exec(started.vm, argv, stdin=stdin, env=env, workdir=workdir, user=user, timeout=timeout)

    @contextlib.contextmanager
    def episode_scope(self, smolfile: "Union[str, os.PathLike[str]]", name: Optional[str] = None) -> Iterator[Up]:
        """``with smol.episode_scope(path) as ep:`` an episode (``ep.episode``, its first VM ``ep.vm``) that is
        destroyed when the block ends, also when it raises."""
        started = self.up(smolfile, name)
        try:
            yield started
        finally:
            try:
                self.destroy(started.episode.id)
            except NotFound:
                pass  # the body destroyed it itself

    def _executor(self) -> concurrent.futures.ThreadPoolExecutor:
        with self._pool_lock:
            if self._pool is None:
                self._pool = concurrent.futures.ThreadPoolExecutor(thread_name_prefix="smol")
            return self._pool

    def fork_map(self, vm: Ref, n: int, fn: Callable[[Vm, int], T], *, keep: bool = False) -> List[T]:
        """Forks ``vm`` ``n`` times and runs ``fn(child, index)`` in each child concurrently (a thread each);
        returns the results in order. The children are removed afterwards unless ``keep``; when a call raises,
        the others still finish, the children are removed, and the first error is raised."""
        children = self.fork(vm, n).children
        try:
            with concurrent.futures.ThreadPoolExecutor(max_workers=max(1, n), thread_name_prefix="smol-fork") as pool:
                futures = [pool.submit(fn, child, i) for i, child in enumerate(children)]
                concurrent.futures.wait(futures)
            return [f.result() for f in futures]
        finally:
            if not keep:
                self._remove_all(children)

    def _remove_all(self, children: List[Vm]) -> None:
        for child in children:
            try:
                self.remove_vm(child.id)
            except NotFound:
                pass

    def fork_verify(self, vm: Ref, fn: Callable[[Vm], T], *, keep: bool = False) -> "concurrent.futures.Future[T]":
        """Fork to verify: forks ``vm`` once now (a copy of its state at this moment) and runs ``fn(child)`` on the
        copy in the background while the episode goes on; the Future gives ``fn``'s result. The copy is removed
        afterwards unless ``keep``."""
        child = self.fork(vm, 1).children[0]

        def grade() -> T:
            try:
                return fn(child)
            finally:
                if not keep:
                    self._remove_all([child])

        return self._executor().submit(grade)


def connect(
    home: "Optional[Union[str, os.PathLike[str]]]" = None,
    *,
    url: Optional[str] = None,
    engine: Optional[str] = None,
    token: Optional[str] = None,
    fingerprint: Optional[str] = None,
    pins: "Optional[Union[str, os.PathLike[str]]]" = None,
    start: bool = True,
    timeout: float = 60.0,
    request_timeout: Optional[float] = None,
    smol: Optional[str] = None,
) -> Smol:
    """A blocking client of the data dir's engine (``home``, else ``$SMOL_HOME`` or the default), started in the
    background when none runs (``start=False``: raise ``EngineUnavailable`` instead); or of the engine at ``url``
    (a ``smol serve`` URL, its token in ``?token=``, ``token`` or ``$SMOL_TOKEN``), or of ``engine``, a URL or the
    name an engine was added under (``smol engine add NAME URL``; its token from the engines file unless ``token``);
    ``$SMOL_ENGINE`` when none of ``home``, ``url`` and ``engine`` is given. ``timeout``: how long a starting engine may take;
    ``request_timeout``: how long any one request may (None: no limit; ``up`` of a new image bakes its base).
    An ``https`` engine is trusted by its certificate's SHA-256 ``fingerprint``, else by the one pinned on first use
    in ``pins`` (the client's engines file, shared with the CLI, when None); another certificate raises
    ``CertificateChanged`` naming both (docs/remote.md)."""
    remote = remote_engine(None if home is None else os.fspath(home), url, engine)
    if remote is not None:
        where = None if pins is None else os.fspath(pins)
        client = Smol(SyncTransport(remote_target(remote, token, fingerprint, where), request_timeout))
        client.health()
        return client
    where = smol_home(home)
    client = Smol(SyncTransport(Target.unix(socket_path(where)), request_timeout), where)
    if _answers(client):
        return client
    if not start:
        raise EngineUnavailable(no_engine(where))
    launcher = EngineLauncher(where, smol)
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if _answers(client):
            return client
        failure = launcher.failure()
        if failure:
            raise EngineUnavailable(failure)
        time.sleep(0.05)
    raise EngineUnavailable(launcher.timed_out(timeout))


def _answers(client: Smol) -> bool:
    try:
        client.health()
        return True
    except (EngineUnavailable, ProtocolError, SmolError, OSError):
        return False
