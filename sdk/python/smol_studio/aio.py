"""The asyncio client: ``async with smol_studio.connect_async() as smol:``. The same calls as the blocking client,
awaited; a thin transport (asyncio streams, a pool of keep-alive connections) over the same protocol
(``_protocol.py``, ``_calls.py``), so any number of calls can run at once on one event loop."""

from __future__ import annotations

import asyncio
import collections
import contextlib
import dataclasses
import json
import os
import posixpath
import time
from typing import (
    Any,
    AsyncIterable,
    AsyncIterator,
    Awaitable,
    Callable,
    Deque,
    Dict,
    Generator,
    Iterable,
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
    Up,
    Vm,
    VmNetwork,
    build_tree,
    event_from_json,
    fspath,
    ref_of,
)
from .client import IDLE_SECONDS, RECV_SIZE, OnProgress

T = TypeVar("T")
Stream = Tuple[asyncio.StreamReader, asyncio.StreamWriter]
AsyncStdin = Union[bytes, str, Iterable[bytes], AsyncIterable[bytes], None]


async def open_stream(target: Target, timeout: Optional[float]) -> Stream:
    try:
        if target.socket_path is not None:
            opening = asyncio.open_unix_connection(target.socket_path, limit=RECV_SIZE)
        else:
            context = insecure_context() if target.tls else None
            opening = asyncio.open_connection(target.host, target.port, ssl=context, limit=RECV_SIZE)
        reader, writer = await asyncio.wait_for(opening, timeout)
        if target.tls:
            # The pin is the check (_pins.py): before a byte of the request, so before the token, is written.
            try:
                check_pin(writer.get_extra_info("ssl_object"), target.describe(), target.fingerprint, target.pins)
            except BaseException:
                _close(writer)
                raise
        return reader, writer
    except (OSError, asyncio.TimeoutError) as error:
        raise EngineUnavailable(f"cannot reach the engine at {target.describe()}: {error or 'timed out'}") from error


def _close(writer: asyncio.StreamWriter) -> None:
    with contextlib.suppress(Exception):
        writer.close()


class _Stale(Exception):
    pass


async def _each(source: Union[Iterable[bytes], AsyncIterable[bytes]]) -> AsyncIterator[bytes]:
    if hasattr(source, "__aiter__"):
        async for chunk in source:  # type: ignore[union-attr]
            yield bytes(chunk)
    else:
        for chunk in source:  # type: ignore[union-attr]
            yield bytes(chunk)


class AsyncTransport:
    """HTTP exchanges and WebSockets over asyncio streams; idle connections are kept for the next request."""

    def __init__(self, target: Target, timeout: Optional[float] = None) -> None:
        self.target = target
        self.timeout = timeout
        self._idle: List[Tuple[asyncio.StreamReader, asyncio.StreamWriter, HttpConnection, float]] = []

    async def aclose(self) -> None:
        idle, self._idle = self._idle, []
        for _, writer, _, _ in idle:
            _close(writer)

    async def _checkout(self) -> Tuple[asyncio.StreamReader, asyncio.StreamWriter, HttpConnection, bool]:
        now = time.monotonic()
        while self._idle:
            reader, writer, conn, since = self._idle.pop()
            if now - since < IDLE_SECONDS and not reader.at_eof():
                return reader, writer, conn, True
            _close(writer)
        reader, writer = await open_stream(self.target, self.timeout)
        return reader, writer, HttpConnection(self.target), False

    async def request(self, request: HttpRequest) -> HttpResponse:
        while True:
            reader, writer, conn, reused = await self._checkout()
            try:
                if self.timeout is None:
                    response = await self._exchange(reader, writer, conn, request, reused)
                else:
                    response = await asyncio.wait_for(self._exchange(reader, writer, conn, request, reused), self.timeout)
            except _Stale:
                _close(writer)
                continue
            except asyncio.TimeoutError:
                _close(writer)
                raise EngineUnavailable(
                    f"the engine at {self.target.describe()} did not answer {request.method} {request.path} "
                    f"within {self.timeout:g} s"
                ) from None
            except BaseException:
                _close(writer)
                raise
            if conn.reusable():
                self._idle.append((reader, writer, conn, time.monotonic()))
            else:
                _close(writer)
            return response

    async def _exchange(
        self,
        reader: asyncio.StreamReader,
        writer: asyncio.StreamWriter,
        conn: HttpConnection,
        request: HttpRequest,
        reused: bool,
    ) -> HttpResponse:
        collector = ResponseCollector()
        got_any = False
        try:
            writer.write(conn.start(request))
            await writer.drain()
            if request.stream is not None:
                try:
                    async for chunk in _each(request.stream):
                        writer.write(conn.send_chunk(chunk))
                        await writer.drain()
                    writer.write(conn.end())
                    await writer.drain()
                except (BrokenPipeError, ConnectionResetError):
                    pass  # the engine answered (an error) before taking it all
            while not collector.done:
                data = await reader.read(RECV_SIZE)
                if not data and not got_any and reused:
                    raise _Stale()
                got_any = got_any or bool(data)
                collector.add(conn.feed(data))
        except (BrokenPipeError, ConnectionResetError) as error:
            if reused and not got_any:
                raise _Stale() from None
            raise EngineUnavailable(f"the connection to the engine at {self.target.describe()} broke: {error}") from None
        return collector.response()

    async def call(self, call: Call[T]) -> T:
        return call.parse(await self.request(call.request))

    async def websocket(self, path: str) -> "AsyncWebSocket":
        ws = AsyncWebSocket(self, path)
        await ws._open()
        return ws


class AsyncWebSocket:
    """A WebSocket on its own connection: whole messages in order."""

    def __init__(self, transport: AsyncTransport, path: str) -> None:
        self._transport = transport
        self.session = WsSession(transport.target, path)
        self._pending: Deque[WsEvent] = collections.deque()
        self._reader: Optional[asyncio.StreamReader] = None
        self._writer: Optional[asyncio.StreamWriter] = None
        self.closed = False

    async def _open(self) -> None:
        self._reader, self._writer = await open_stream(self._transport.target, self._transport.timeout)
        try:
            self._writer.write(self.session.handshake())
            while not self.session.open:
                await self._read()
        except BaseException:
            _close(self._writer)
            raise
        while self._pending and isinstance(self._pending[0], WsOpened):
            self._pending.popleft()

    async def _read(self) -> None:
        assert self._reader is not None
        try:
            data = await self._reader.read(RECV_SIZE)
        except (ConnectionResetError, BrokenPipeError):
            data = b""
        events = self.session.feed(data or None)
        self._send_raw(self.session.take_outgoing())
        self._pending.extend(events)

    async def next(self, timeout: Optional[float] = None) -> WsEvent:
        """The next message or the close; ``asyncio.TimeoutError`` after ``timeout`` seconds."""
        deadline = None if timeout is None else time.monotonic() + timeout
        while not self._pending:
            if self.closed:
                return WsClosed(1006, "the stream was closed")
            if deadline is None:
                await self._read()
            else:
                await asyncio.wait_for(self._read(), max(0.0, deadline - time.monotonic()))
        event = self._pending.popleft()
        if isinstance(event, WsClosed):
            self.closed = True
        return event

    def _send_raw(self, data: bytes) -> None:
        if data and self._writer is not None and not self._writer.is_closing():
            self._writer.write(data)

    async def drain(self) -> None:
        if self._writer is not None and not self._writer.is_closing():
            with contextlib.suppress(ConnectionError):
                await self._writer.drain()

    async def send_text(self, text: str) -> None:
        self._send_raw(self.session.send_text(text))
        await self.drain()

    async def send_json(self, message: Dict[str, Any]) -> None:
        self._send_raw(self.session.send_json(message))
        await self.drain()

    async def send_bytes(self, payload: bytes) -> None:
        self._send_raw(self.session.send_bytes(payload))
        await self.drain()

    async def ping(self, payload: bytes) -> None:
        """Its ``WsPong(payload)`` comes after every message the engine sent before the ping reached it."""
        self._send_raw(self.session.ping(payload))
        await self.drain()

    async def aclose(self) -> None:
        if self.closed and (self._writer is None or self._writer.is_closing()):
            return
        self.closed = True
        self._send_raw(self.session.close())
        if self._writer is not None:
            await self.drain()
            _close(self._writer)


# ---- streams ----


class AsyncExecStream:
    """A command running in the guest: ``async for fd, chunk in stream`` (fd 1 stdout, 2 stderr); then ``result``."""

    def __init__(self, ws: AsyncWebSocket, session: ExecSession, tty: bool = False) -> None:
        self._ws = ws
        self._session = session
        self._tty = tty
        self.result: Optional[ExecResult] = None

    @property
    def started(self) -> bool:
        return self._session.started

    async def __aiter__(self) -> AsyncIterator[Tuple[int, bytes]]:
        while self.result is None:
            for event in self._session.handle(await self._ws.next()):
                if isinstance(event, ExecOutput):
                    yield event.fd, event.data
                elif isinstance(event, ExecExited):
                    self.result = event.result
        await self._ws.aclose()

    async def write(self, data: Union[bytes, str]) -> None:
        raw = data.encode("utf-8") if isinstance(data, str) else bytes(data)
        for at in range(0, len(raw), 1 << 16):
            await self._ws.send_bytes(raw[at : at + (1 << 16)])

    async def close_stdin(self) -> None:
        await self._ws.send_json({"type": "eof"})

    async def signal(self, name: str = "SIGINT") -> None:
        await self._ws.send_json({"type": "signal", "signal": name})

    async def resize(self, rows: int, cols: int) -> None:
        """Resizes its terminal (started with ``tty``); ``ValueError`` without one or for a size out of 1-1000."""
        await self._ws.send_json(resize_message((rows, cols), self._tty))

    async def wait(self) -> ExecResult:
        async for _ in self:
            pass
        assert self.result is not None
        return self.result

    async def aclose(self) -> None:
        await self._ws.aclose()

    async def __aenter__(self) -> "AsyncExecStream":
        return self

    async def __aexit__(self, *exc: Any) -> None:
        await self.aclose()


class AsyncConsoleStream:
    """A VM's live console: ``async for`` its ``ConsoleScreen`` and ``ConsoleOutput`` events; ``write`` types."""

    def __init__(self, ws: AsyncWebSocket, vm: str) -> None:
        self._ws = ws
        self.vm = vm

    async def next(self, timeout: Optional[float] = None) -> ConsoleEvent:
        while True:
            try:
                events = console_event(await self._ws.next(timeout))
            except asyncio.TimeoutError:
                raise WaitTimeout(f"{self.vm}'s console said nothing within {timeout:g} s") from None
            if events:
                return events[0]

    async def __aiter__(self) -> AsyncIterator[ConsoleEvent]:
        while True:
            event = await self.next()
            yield event
            if isinstance(event, ConsoleClosed):
                return

    async def write(self, data: Union[bytes, str]) -> None:
        if isinstance(data, str):
            await self._ws.send_text(data)
        else:
            await self._ws.send_bytes(bytes(data))

    async def wait_for(self, pattern: Union[str, Pattern[str]], timeout: float = 30.0) -> Any:
        matcher = OutputMatcher(pattern)
        deadline = time.monotonic() + timeout
        while True:
            left = deadline - time.monotonic()
            try:
                if left <= 0:
                    raise WaitTimeout("")
                event = await self.next(left)
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

    async def aclose(self) -> None:
        await self._ws.aclose()

    async def __aenter__(self) -> "AsyncConsoleStream":
        return self

    async def __aexit__(self, *exc: Any) -> None:
        await self.aclose()


class AsyncEventStream:
    """Every engine event from the moment it was opened, in order: ``async for``, or ``await next(timeout)``."""

    def __init__(self, ws: AsyncWebSocket) -> None:
        self._ws = ws

    async def next(self, timeout: Optional[float] = None) -> Event:
        while True:
            try:
                message = await self._ws.next(timeout)
            except asyncio.TimeoutError:
                raise WaitTimeout(f"no engine event within {timeout:g} s") from None
            if isinstance(message, WsClosed):
                raise StreamClosed(f"the event stream ended ({message.reason or message.code})")
            if isinstance(message, WsMessage) and message.text is not None:
                return event_from_json(json.loads(message.text))

    async def follow(self, request_id: str, on_progress: OnProgress, work: Awaitable[T]) -> T:
        """Awaits ``work`` while ``on_progress`` gets every ``Progress`` event of ``request_id`` in order, the last
        one before this returns (a ping after the work; its pong comes after every event sent before). It may be a
        coroutine function. An error of ``on_progress`` is raised once the work is done; the other events are
        dropped."""
        follower = ProgressFollower(request_id)
        failed: List[Exception] = []

        async def deliver() -> None:
            with contextlib.suppress(ProtocolError, OSError):
                while not follower.done:
                    progress = follower.take(await self._ws.next())
                    if progress is None or failed:
                        continue
                    try:
                        answer = on_progress(progress)
                        if asyncio.iscoroutine(answer):
                            await answer
                    except Exception as error:  # noqa: BLE001 (the caller's, raised after the work)
                        failed.append(error)

        delivering = asyncio.ensure_future(deliver())
        try:
            result = await work
        except BaseException:
            delivering.cancel()
            raise
        await self._ws.ping(follower.mark)
        await delivering
        if failed:
            raise failed[0]
        return result

    async def wait_for(self, predicate: Callable[[Event], bool], timeout: float = 30.0) -> Event:
        deadline = time.monotonic() + timeout
        while True:
            left = deadline - time.monotonic()
            if left <= 0:
                raise WaitTimeout(f"no matching engine event within {timeout:g} s")
            event = await self.next(left)
            if predicate(event):
                return event

    async def __aiter__(self) -> AsyncIterator[Event]:
        while True:
            try:
                yield await self.next()
            except StreamClosed:
                return

    async def aclose(self) -> None:
        await self._ws.aclose()

    async def __aenter__(self) -> "AsyncEventStream":
        return self

    async def __aexit__(self, *exc: Any) -> None:
        await self.aclose()


# ---- the client ----


class AsyncSmol:
    """The asyncio client of one engine; every call is a coroutine, and any number may run at once."""

    def __init__(self, transport: AsyncTransport, home: Optional[str] = None) -> None:
        self.transport = transport
        self.home = home
        self._episodes = calls.EpisodeList()

    async def aclose(self) -> None:
        await self.transport.aclose()

    async def __aenter__(self) -> "AsyncSmol":
        return self

    async def __aexit__(self, *exc: Any) -> None:
        await self.aclose()

    def _call(self, call: Call[T]) -> Awaitable[T]:
        return self.transport.call(call)

    # -- the engine --

    async def health(self) -> Health:
        return await self._call(calls.health())

    async def openapi(self) -> Dict[str, Any]:
        return await self._call(calls.openapi())

    async def smolfiles(self) -> List[SmolfileExample]:
        return await self._call(calls.smolfiles())

    async def gc(self) -> GcResult:
        return await self._call(calls.gc())

    # -- images --

    async def images(self) -> List[Image]:
        return await self._call(calls.images())

    async def pull_image(self, reference: str, force: bool = False) -> PulledImage:
        return await self._call(calls.pull_image(reference, force))

    async def remove_image(self, reference: str) -> RemovedImages:
        return await self._call(calls.remove_image(reference))

    async def prune_images(self) -> RemovedImages:
        return await self._call(calls.prune_images())

    async def listen(self, host: str = "127.0.0.1", port: int = 0, tls: bool = False) -> Listener:
        return await self._call(calls.listen(host, port, tls))

    async def unlisten(self, port: int) -> None:
        await self._call(calls.unlisten(port))

    async def host(self) -> HostReport:
        return await self._call(calls.host())

    async def tokens(self) -> List[TokenInfo]:
        return await self._call(calls.tokens())

    async def create_token(self, name: str, scope: str = "full") -> CreatedToken:
        return await self._call(calls.create_token(name, scope))

    async def remove_token(self, name: str) -> None:
        await self._call(calls.remove_token(name))

    async def shutdown(self) -> None:
        await self._call(calls.shutdown())

    # -- remote engines this engine reaches (as Smol's) --

    async def engines(self) -> List[RemoteEngine]:
        return await self._call(calls.engines())

    async def probe_engine(self, url: str) -> EngineProbe:
        return await self._call(calls.probe_engine(url))

    async def add_engine(self, name: str, url: str, token: str, fingerprint: Optional[str] = None) -> AddedEngine:
        return await self._call(calls.add_engine(name, url, token, fingerprint))

    async def remove_engine(self, name: str) -> None:
        await self._call(calls.remove_engine(name))

    def through(self, name: str) -> "AsyncSmol":
        """As ``Smol.through``: the remote engine ``name`` reached through this one; ``await aclose()`` when done."""
        if self.transport.target.through is not None:
            raise ValueError(f"through: this client already goes through {self.transport.target.through}")
        target = dataclasses.replace(self.transport.target, through=name)
        return AsyncSmol(AsyncTransport(target, self.transport.timeout))

    # -- episodes --

    async def up(self, smolfile: "Union[str, os.PathLike[str]]", name: Optional[str] = None) -> Up:
        return await self._call(calls.up(fspath(smolfile), name))

    async def up_text(self, text: str, directory: Optional[str] = None, name: Optional[str] = None) -> Up:
        return await self._call(calls.up_text(text, directory, name))

    async def check_smolfile(self, text: str, directory: Optional[str] = None) -> SmolfileCheck:
        return await self._call(calls.check_smolfile(text, directory))

    async def up_from(
        self,
        machine_file: "Union[str, os.PathLike[str]]",
        name: Optional[str] = None,
        *,
        request_id: Optional[str] = None,
        on_progress: Optional[OnProgress] = None,
    ) -> Up:
        path = fspath(machine_file)
        return await self._following(lambda rid: calls.up_from(path, name, rid), request_id, on_progress)

    async def inspect(self, machine_file: "Union[str, os.PathLike[str]]") -> Inspected:
        return await self._call(calls.inspect(fspath(machine_file)))

    async def pack(
        self,
        source: Ref,
        machine_file: "Union[str, os.PathLike[str]]",
        *,
        request_id: Optional[str] = None,
        on_progress: Optional[OnProgress] = None,
    ) -> Packed:
        """As ``Smol.pack``; ``on_progress`` may be a coroutine function."""
        path = fspath(machine_file)
        return await self._following(lambda rid: calls.pack(source, path, rid), request_id, on_progress)

    async def _following(
        self, make: Callable[[Optional[str]], Call[T]], request_id: Optional[str], on_progress: Optional[OnProgress]
    ) -> T:
        if on_progress is None:
            return await self._call(make(request_id))
        rid = request_id or calls.new_request_id()
        call = make(rid)
        async with await self.events() as events:  # subscribed before the request goes
            return await events.follow(rid, on_progress, self._call(call))

    async def episodes(self) -> List[Episode]:
        """As ``Smol.episodes``: asked with the last list's ETag, a 304 while nothing changed; each list its own."""
        return await self._call(self._episodes.call())

    async def episode(self, ref: Ref) -> Episode:
        return await self._call(calls.episode(ref))

    async def destroy(self, episode: Ref) -> None:
        await self._call(calls.destroy(episode))

    # -- VMs --

    async def vms(self) -> List[Vm]:
        return await self._call(calls.vms())

    async def vm(self, ref: Ref) -> Vm:
        return await self._call(calls.vm(ref))

    async def stop(self, vm: Ref) -> Vm:
        return await self._call(calls.lifecycle("stop", vm))

    async def start(self, vm: Ref) -> Vm:
        return await self._call(calls.lifecycle("start", vm))

    async def pause(self, vm: Ref) -> Vm:
        return await self._call(calls.lifecycle("pause", vm))

    async def resume(self, vm: Ref) -> Vm:
        return await self._call(calls.lifecycle("resume", vm))

    async def reset(self, vm: Ref) -> Vm:
        return await self._call(calls.lifecycle("reset", vm))

    async def remove_vm(self, vm: Ref) -> None:
        await self._call(calls.remove_vm(vm))

    async def memory(self, vm: Ref) -> MemoryStats:
        return await self._call(calls.memory(vm))

    async def metrics(self, vm: Ref) -> MetricsHistory:
        return await self._call(calls.metrics(vm))

    async def network(self, vm: Ref, after: Optional[int] = None) -> VmNetwork:
        """The VM's network (docs/network.md, "Seen from the host"): its forwarded ports (``vm.ports`` has them
        too), refusal counters and last refusals, only those after seq ``after`` when given. A VM without a network
        answers ``enabled=False``."""
        return await self._call(calls.network(vm, after))

    # -- snapshots --

    async def snapshots(self, episode: Ref) -> List[Snapshot]:
        return await self._call(calls.snapshots(episode))

    async def snapshot_tree(self, episode: Ref) -> List[SnapshotNode]:
        return build_tree(await self.snapshots(episode))

    async def snapshot(self, ref: Ref) -> Snapshot:
        return await self._call(calls.snapshot(ref))

    async def update_snapshot(self, ref: Ref, name: Optional[str] = None, note: Optional[str] = None) -> Snapshot:
        return await self._call(calls.update_snapshot(ref, name, note))

    async def label_snapshot(self, ref: Ref, labels: Mapping[str, Optional[LabelValue]]) -> Snapshot:
        return await self._call(calls.update_snapshot(ref, None, None, labels))

    async def label_vm(self, vm: Ref, labels: Mapping[str, Optional[LabelValue]]) -> Vm:
        return await self._call(calls.update_vm(vm, labels))

    async def diff(self, from_ref: Ref, to_ref: Ref) -> Diff:
        """As ``Smol.diff``: what changed between two snapshots of one episode (docs/diff.md)."""
        return await self._call(calls.diff(from_ref, to_ref))

    async def delete_snapshot(self, ref: Ref) -> None:
        await self._call(calls.delete_snapshot(ref))

    async def checkpoint(self, vm: Ref, name: Optional[str] = None, note: Optional[str] = None) -> Snapshot:
        return await self._call(calls.checkpoint(vm, name, note))

    async def fork(self, ref: Ref, n: int = 1, from_: Optional[str] = None) -> ForkResult:
        return await self._call(calls.fork(ref, n, from_))

    async def restore(self, vm: Ref, snapshot: Ref) -> RestoreResult:
        return await self._call(calls.restore(vm, snapshot))

    # -- the console --

    async def write(self, vm: Ref, text: str) -> None:
        await self._call(calls.write(vm, text))

    async def logs(self, vm: Ref, tail: Optional[int] = None) -> Logs:
        return await self._call(calls.logs(vm, tail))

    async def screen(self, vm: Ref) -> Screen:
        return await self._call(calls.screen(vm))

    async def recording(self, vm: Ref) -> str:
        return await self._call(calls.recording(vm))

    async def console(self, vm: Ref) -> AsyncConsoleStream:
        vm_id = ref_of(vm, "vm")
        return AsyncConsoleStream(await self.transport.websocket(console_path(vm_id)), vm_id)

    async def wait_for_output(self, vm: Ref, pattern: Union[str, Pattern[str]], timeout: float = 30.0) -> Any:
        async with await self.console(vm) as console:
            return await console.wait_for(pattern, timeout)

    # -- commands and files in the guest --

    async def exec_stream(
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
    ) -> AsyncExecStream:
        request = exec_request(argv, env, workdir, timeout, stdin, user, tty)
        session = ExecSession(ref_of(vm, "vm"))
        ws = await self.transport.websocket(session.path())
        await ws.send_json(request)
        return AsyncExecStream(ws, session, tty is not None)

    async def terminal(
        self,
        vm: Ref,
        argv: Optional[List[str]] = None,
        *,
        rows: int = 24,
        cols: int = 80,
        env: Optional[Dict[str, str]] = None,
        workdir: Optional[str] = None,
        user: Optional[str] = None,
    ) -> AsyncExecStream:
        """A shell (or ``argv``) on a pseudo-terminal in the guest (Smol.terminal's twin)."""
        return await self.exec_stream(
            vm,
            argv or ["sh"],
            env={"TERM": "xterm-256color", **(env or {})},
            workdir=workdir,
            user=user,
            tty=(rows, cols),
        )

    async def exec(
        self,
        vm: Ref,
        argv: List[str],
        *,
        stdin: AsyncStdin = None,
        env: Optional[Dict[str, str]] = None,
        workdir: Optional[str] = None,
        user: Optional[str] = None,
        timeout: Optional[float] = None,
        on_stdout: Optional[Callable[[bytes], None]] = None,
        on_stderr: Optional[Callable[[bytes], None]] = None,
    ) -> ExecResult:
        """As ``Smol.exec``; ``stdin`` may also be an async iterable of bytes."""
        stream = await self.exec_stream(
            vm, argv, env=env, workdir=workdir, user=user, timeout=timeout, stdin=stdin is not None
        )
        out: List[bytes] = []
        err: List[bytes] = []
        pump: Optional[asyncio.Task] = None
        async with stream:
            if isinstance(stdin, (bytes, bytearray, memoryview, str)):
                await stream.write(stdin if isinstance(stdin, str) else bytes(stdin))
                await stream.close_stdin()
            elif stdin is not None:
                source = stdin

                async def feed() -> None:
                    async for chunk in _each(source):  # type: ignore[arg-type]
                        await stream.write(chunk)
                    await stream.close_stdin()

                pump = asyncio.ensure_future(feed())
            try:
                async for fd, chunk in stream:
                    if fd == 2:
                        (on_stderr or err.append)(chunk)
                    else:
                        (on_stdout or out.append)(chunk)
            except StreamClosed:
                if pump is not None and pump.done() and pump.exception() is not None:
                    raise pump.exception() from None  # type: ignore[misc]
                raise
            finally:
                if pump is not None and not pump.done():
                    pump.cancel()
        assert stream.result is not None
        r = stream.result
        return ExecResult(r.exit_code, r.signal, r.timed_out, b"".join(out), b"".join(err))

    async def read_file(self, vm: Ref, path: str) -> bytes:
        return await self._call(calls.read_file(vm, path))

    async def write_file(
        self,
        vm: Ref,
        path: str,
        data: Union[bytes, str, Iterable[bytes], AsyncIterable[bytes]],
        mode: Optional[int] = None,
    ) -> int:
        return await self._call(calls.write_file(vm, path, data, mode))  # type: ignore[arg-type]

    async def _copy_tools(self, vm: str) -> "tuple[list[str], str]":
        for busybox in copying.BUSYBOXES:
            try:
                if (await self.exec(vm, [busybox, "true"], user=copying.AS_ROOT)).exit_code == 0:
                    return copying.tools(busybox)
            except BadRequest:
                pass  # not there: the next
        return copying.tools(None)

    async def copy_in(self, vm: Ref, source: "Union[str, os.PathLike[str]]", target: str) -> CopyResult:
        """As ``Smol.copy_in``; the tar is made in a thread and read off the loop."""
        vm_ref = ref_of(vm, "vm")
        copying.check_guest_path(vm_ref, target)
        source = os.fspath(source)
        packer = copying.TarPacker(source)
        sh, tar = await self._copy_tools(vm_ref)
        into = (await self.exec(vm_ref, [*sh, "-c", copying.IS_DIRECTORY, "sh", target], user=copying.AS_ROOT)).ok
        directory, name = copying.into_guest(source, target, into)
        chunks = packer.chunks(name)

        async def stream() -> AsyncIterator[bytes]:
            loop = asyncio.get_running_loop()
            end = object()
            while True:
                chunk = await loop.run_in_executor(None, next, chunks, end)
                if chunk is end:
                    return
                yield chunk  # type: ignore[misc]

        try:
            result = await self.exec(
                vm_ref, [*sh, "-c", copying.extract_script(tar), "sh", directory], stdin=stream(), user=copying.AS_ROOT
            )
        finally:
            copying.close_quietly(chunks)
        if result.exit_code != 0:
            what = f"copying {source} to {vm_ref}:{target}"
            raise copying.failure(what, result.exit_code, result.signal, result.stderr)
        return CopyResult(packer.entries, packer.bytes)

    async def copy_out(self, vm: Ref, source: str, target: "Union[str, os.PathLike[str]]") -> CopyResult:
        """As ``Smol.copy_out``; the tar is unpacked in a thread, fed off the loop."""
        vm_ref = ref_of(vm, "vm")
        copying.check_guest_path(vm_ref, source)
        target = os.fspath(target)
        sh, tar = await self._copy_tools(vm_ref)
        directory, name = copying.out_of_guest(source, target)
        what = f"{vm_ref}:{source}"
        top = source.rstrip("/")
        unpacker = copying.TarUnpacker(directory, posixpath.basename(top), name, what)
        loop = asyncio.get_running_loop()
        stderr: List[bytes] = []
        ok = False
        try:
            stream = await self.exec_stream(
                vm_ref,
                [*sh, "-c", copying.create_script(tar), "sh", posixpath.dirname(top) or "/", posixpath.basename(top)],
                user=copying.AS_ROOT,
            )
            async with stream:
                async for fd, chunk in stream:
                    if fd == 2:
                        stderr.append(chunk)
                    else:
                        await loop.run_in_executor(None, unpacker.feed, chunk)
            assert stream.result is not None
            r = stream.result
            ok = r.exit_code == 0
            if not ok:
                raise copying.failure(f"copying {what} to {target}", r.exit_code, r.signal, b"".join(stderr))
        finally:
            if not ok:
                await loop.run_in_executor(None, unpacker.finish, False)
        return await loop.run_in_executor(None, unpacker.finish)

    # -- events --

    async def events(self) -> AsyncEventStream:
        """Every engine event from now on (subscribed when this returns): ``async with await smol.events() as ev``."""
        return AsyncEventStream(await self.transport.websocket(EVENTS_PATH))

    # -- shapes a harness wants --

    async def run(
        self,
        smolfile: "Union[str, os.PathLike[str]]",
        argv: List[str],
        *,
        stdin: AsyncStdin = None,
        env: Optional[Dict[str, str]] = None,
        workdir: Optional[str] = None,
        user: Optional[str] = None,
        timeout: Optional[float] = None,
    ) -> ExecResult:
        async with self.episode_scope(smolfile) as started:
            return await self.exec(started.vm, argv, stdin=stdin, env=env, workdir=workdir, user=user, timeout=timeout)

    @contextlib.asynccontextmanager
    async def episode_scope(
        self, smolfile: "Union[str, os.PathLike[str]]", name: Optional[str] = None
    ) -> AsyncIterator[Up]:
        """``async with smol.episode_scope(path) as ep:``; the episode is destroyed at exit, also when it raises."""
        started = await self.up(smolfile, name)
        try:
            yield started
        finally:
            try:
                await self.destroy(started.episode.id)
            except NotFound:
                pass

    async def _remove_all(self, children: List[Vm]) -> None:
        async def remove(child: Vm) -> None:
            try:
                await self.remove_vm(child.id)
            except NotFound:
                pass

        await asyncio.gather(*(remove(c) for c in children))

    async def fork_map(self, vm: Ref, n: int, fn: Callable[[Vm, int], Awaitable[T]], *, keep: bool = False) -> List[T]:
        """Forks ``vm`` ``n`` times and awaits ``fn(child, index)`` for all children at once; results in order.
        The children are removed afterwards unless ``keep``; the first error is raised after all finished."""
        children = (await self.fork(vm, n)).children
        try:
            results = await asyncio.gather(*(fn(child, i) for i, child in enumerate(children)), return_exceptions=True)
            for result in results:
                if isinstance(result, BaseException):
                    raise result
            return list(results)  # type: ignore[arg-type]
        finally:
            if not keep:
                await self._remove_all(children)

    async def fork_verify(self, vm: Ref, fn: Callable[[Vm], Awaitable[T]], *, keep: bool = False) -> "asyncio.Task[T]":
        """Forks ``vm`` once now and runs ``fn(child)`` on the copy as a task while the episode goes on."""
        child = (await self.fork(vm, 1)).children[0]

        async def grade() -> T:
            try:
                return await fn(child)
            finally:
                if not keep:
                    await self._remove_all([child])

        return asyncio.ensure_future(grade())


class _Connecting:
    """What ``connect_async`` returns: ``await`` it for the client, or ``async with`` it (closed at exit)."""

    def __init__(self, factory: Callable[[], Awaitable[AsyncSmol]]) -> None:
        self._factory = factory
        self._client: Optional[AsyncSmol] = None

    def __await__(self) -> Generator[Any, None, AsyncSmol]:
        return self._factory().__await__()

    async def __aenter__(self) -> AsyncSmol:
        self._client = await self._factory()
        return self._client

    async def __aexit__(self, *exc: Any) -> None:
        if self._client is not None:
            await self._client.aclose()


def connect_async(
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
) -> _Connecting:
    """As ``connect``, for asyncio: ``async with connect_async() as smol:`` or ``smol = await connect_async()``."""

    async def factory() -> AsyncSmol:
        remote = remote_engine(None if home is None else os.fspath(home), url, engine)
        if remote is not None:
            where = None if pins is None else os.fspath(pins)
            client = AsyncSmol(AsyncTransport(remote_target(remote, token, fingerprint, where), request_timeout))
            await client.health()
            return client
        where = smol_home(home)
        client = AsyncSmol(AsyncTransport(Target.unix(socket_path(where)), request_timeout), where)
        if await _answers(client):
            return client
        if not start:
            raise EngineUnavailable(no_engine(where))
        launcher = EngineLauncher(where, smol)
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if await _answers(client):
                return client
            failure = launcher.failure()
            if failure:
                raise EngineUnavailable(failure)
            await asyncio.sleep(0.05)
        raise EngineUnavailable(launcher.timed_out(timeout))

    return _Connecting(factory)


async def _answers(client: AsyncSmol) -> bool:
    try:
        await client.health()
        return True
    except (EngineUnavailable, ProtocolError, SmolError, OSError):
        return False
