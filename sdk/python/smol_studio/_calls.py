"""Every request/response call of the API (src/api/routes.ts), once: which request it is and how its answer
becomes a typed result. Both clients run these through their transport; neither builds a request of its own."""

from __future__ import annotations

import json
import math
import uuid
from dataclasses import dataclass
from typing import Any, Callable, Dict, Generic, Iterable, List, Mapping, Optional, Tuple, TypeVar, Union

from ._errors import api_error
from ._protocol import API_PREFIX, HttpRequest, HttpResponse, quote
from ._types import (
    AddedEngine,
    CreatedToken,
    Diff,
    EngineProbe,
    Episode,
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
    Packed,
    PulledImage,
    Ref,
    RemoteEngine,
    RemovedImages,
    RestoreResult,
    Screen,
    SmolfileCheck,
    SmolfileExample,
    Snapshot,
    TokenInfo,
    Up,
    Vm,
    VmNetwork,
    ref_of,
)

T = TypeVar("T")


@dataclass
class Call(Generic[T]):
    request: HttpRequest
    parse: Callable[[HttpResponse], T]


def _json(parse: Callable[[Any], T]) -> Callable[[HttpResponse], T]:
    return lambda response: parse(response.json())


def _nothing(response: HttpResponse) -> None:
    response.raise_for_status()


def _call(method: str, path: str, parse: Callable[[Any], T], body: Any = None) -> Call[T]:
    return Call(HttpRequest(method, API_PREFIX + path, json_body=body), _json(parse))


def _void(method: str, path: str, body: Any = None) -> Call[None]:
    return Call(HttpRequest(method, API_PREFIX + path, json_body=body), _nothing)


def _drop_none(**fields: Any) -> dict:
    return {k: v for k, v in fields.items() if v is not None}


def health() -> Call[Health]:
    return _call("GET", "/health", Health.from_json)


def openapi() -> Call[Dict[str, Any]]:
    return _call("GET", "/openapi.json", lambda j: dict(j))


def up(smolfile: str, name: Optional[str]) -> Call[Up]:
    return _call("POST", "/episodes", Up.from_json, _drop_none(smolfile=smolfile, name=name))


def up_text(text: str, directory: Optional[str], name: Optional[str]) -> Call[Up]:
    return _call("POST", "/episodes", Up.from_json, _drop_none(text=text, directory=directory, name=name))


def up_from(machine_file: str, name: Optional[str], request_id: Optional[str] = None) -> Call[Up]:
    body = _drop_none(path=machine_file, name=name, requestId=request_id)
    return _call("POST", "/machines", Up.from_json, body)


def inspect(machine_file: str) -> Call[Inspected]:
    return _call("POST", "/machines/inspect", Inspected.from_json, {"path": machine_file})


def pack(source: Ref, machine_file: str, request_id: Optional[str] = None) -> Call[Packed]:
    body = _drop_none(source=ref_of(source, "source"), path=machine_file, requestId=request_id)
    return _call("POST", "/machines/pack", Packed.from_json, body)


def new_request_id() -> str:
    """A ``requestId`` for a pack or open whose progress the caller follows (the CLI's are ``cli-<uuid>``)."""
    return f"py-{uuid.uuid4().hex}"


class EpisodeList:
    """The last episode list a client got, with its ETag, so that the next ``episodes()`` asks with If-None-Match:
    while nothing the list shows has changed the engine answers 304 with no body (docs/engine.md, "Listing
    episodes") and the kept list is parsed again, so every call returns objects of its own that no caller can
    change the next answer through. One per client (and per ``through`` client: each engine has its own tags)."""

    def __init__(self) -> None:
        #: (ETag, body): replaced whole, so a thread reads either the old pair or the new one, never half of each.
        self._kept: Optional[Tuple[str, bytes]] = None

    def call(self) -> Call[List[Episode]]:
        # The pair this request's tag names, taken now: another call may replace it before this one is answered.
        kept = self._kept
        headers = (("If-None-Match", kept[0]),) if kept is not None else ()

        def parse(response: HttpResponse) -> List[Episode]:
            if response.status == 304 and kept is not None:
                body = kept[1]
            else:
                response.raise_for_status()
                body = response.body
                etag = response.headers.get("etag")
                self._kept = (etag, body) if etag else None
            try:
                listed = json.loads(body.decode("utf-8"))
            except ValueError as error:
                raise api_error(response.status, f"the engine answered malformed JSON: {error}") from None
            return [Episode.from_json(e) for e in listed["episodes"]]

        return Call(HttpRequest("GET", API_PREFIX + "/episodes", headers=headers), parse)


def episode(ref: Ref) -> Call[Episode]:
    return _call("GET", f"/episodes/{quote(ref_of(ref, 'episode'))}", Episode.from_json)


def vms() -> Call[List[Vm]]:
    return _call("GET", "/vms", lambda j: [Vm.from_json(v) for v in j["vms"]])


def vm(ref: Ref) -> Call[Vm]:
    return _call("GET", f"/vms/{quote(ref_of(ref, 'vm'))}", Vm.from_json)


def snapshots(episode_ref: Ref) -> Call[List[Snapshot]]:
    path = f"/episodes/{quote(ref_of(episode_ref, 'episode'))}/snapshots"
    return _call("GET", path, lambda j: [Snapshot.from_json(s) for s in j["snapshots"]])


def snapshot(ref: Ref) -> Call[Snapshot]:
    return _call("GET", f"/snapshots/{quote(ref_of(ref, 'snapshot'))}", Snapshot.from_json)


def update_snapshot(
    ref: Ref, name: Optional[str], note: Optional[str], labels: Optional[Mapping[str, Optional[LabelValue]]] = None
) -> Call[Snapshot]:
    body = _drop_none(name=name, note=note, labels=None if labels is None else labels_change(labels))
    return _call("PATCH", f"/snapshots/{quote(ref_of(ref, 'snapshot'))}", Snapshot.from_json, body)


def update_vm(ref: Ref, labels: Mapping[str, Optional[LabelValue]]) -> Call[Vm]:
    return _call("PATCH", f"/vms/{quote(ref_of(ref, 'vm'))}", Vm.from_json, {"labels": labels_change(labels)})


def labels_change(labels: Mapping[str, Optional[LabelValue]]) -> Dict[str, Optional[LabelValue]]:
    """Labels to set (a value) or remove (``None``), checked for their types here (``ValueError`` naming the key);
    the engine checks the rest (key characters, lengths, how many) and answers ``BadRequest`` naming the rule."""
    if not isinstance(labels, Mapping):
        raise ValueError(f"labels: expected a mapping of keys to values, got {type(labels).__name__}")
    change: Dict[str, Optional[LabelValue]] = {}
    for key, value in labels.items():
        if not isinstance(key, str):
            raise ValueError(f"labels: a key is a string, got {key!r}")
        number = isinstance(value, (int, float)) and not isinstance(value, bool)
        if not (value is None or isinstance(value, str) or (number and math.isfinite(value))):  # type: ignore[arg-type]
            raise ValueError(f"labels: {key}: a label is a finite number, a string or None (remove), got {value!r}")
        change[key] = value
    return change


def diff(from_ref: Ref, to_ref: Ref) -> Call[Diff]:
    query = f"?from={quote(ref_of(from_ref, 'from_ref'))}&to={quote(ref_of(to_ref, 'to_ref'))}"
    return _call("GET", f"/diff{query}", Diff.from_json)


def delete_snapshot(ref: Ref) -> Call[None]:
    return _void("DELETE", f"/snapshots/{quote(ref_of(ref, 'snapshot'))}")


def checkpoint(vm_ref: Ref, name: Optional[str], note: Optional[str]) -> Call[Snapshot]:
    body = _drop_none(name=name, note=note)
    return _call("POST", f"/vms/{quote(ref_of(vm_ref, 'vm'))}/checkpoint", Snapshot.from_json, body)


def fork(ref: Ref, n: int, from_: Optional[str] = None) -> Call[ForkResult]:
    """From a VM (it keeps running) or a snapshot: ``from_`` ("vm" or "snapshot") says which; without it a Snapshot
    object, or a string that starts with ``sn-``, forks the snapshot, as the TypeScript SDK decides."""
    if isinstance(n, bool) or not isinstance(n, int):
        raise TypeError(f"n: expected an int (the engine takes 1 to 1024), got {n!r}")
    if from_ is None:
        from_ = "snapshot" if isinstance(ref, Snapshot) or (isinstance(ref, str) and ref.startswith("sn-")) else "vm"
    if from_ not in ("vm", "snapshot"):
        raise ValueError(f"from_: expected 'vm' or 'snapshot', got {from_!r}")
    base = "snapshots" if from_ == "snapshot" else "vms"
    return _call("POST", f"/{base}/{quote(ref_of(ref))}/fork", ForkResult.from_json, {"count": n})


def restore(vm_ref: Ref, snapshot_ref: Ref) -> Call[RestoreResult]:
    path = f"/vms/{quote(ref_of(vm_ref, 'vm'))}/restore"
    return _call("POST", path, RestoreResult.from_json, {"snapshot": ref_of(snapshot_ref, "snapshot")})


def lifecycle(verb: str, vm_ref: Ref) -> Call[Vm]:
    """stop, start, pause, resume or reset: the VM as it is afterwards."""
    return _call("POST", f"/vms/{quote(ref_of(vm_ref, 'vm'))}/{verb}", Vm.from_json)


def remove_vm(vm_ref: Ref, force: bool = True) -> Call[None]:
    return _void("DELETE", f"/vms/{quote(ref_of(vm_ref, 'vm'))}?force={'true' if force else 'false'}")


def destroy(episode_ref: Ref, force: bool = True) -> Call[None]:
    return _void("DELETE", f"/episodes/{quote(ref_of(episode_ref, 'episode'))}?force={'true' if force else 'false'}")


def memory(vm_ref: Ref) -> Call[MemoryStats]:
    return _call("GET", f"/vms/{quote(ref_of(vm_ref, 'vm'))}/memory", MemoryStats.from_json)


def metrics(vm_ref: Ref) -> Call[MetricsHistory]:
    return _call("GET", f"/vms/{quote(ref_of(vm_ref, 'vm'))}/metrics", MetricsHistory.from_json)


def network(vm_ref: Ref, after: Optional[int]) -> Call[VmNetwork]:
    if after is not None and (not isinstance(after, int) or isinstance(after, bool) or after < 0):
        raise ValueError(f"after: expected a refusal's seq (an int of at least 0), got {after!r}")
    query = f"?after={after}" if after is not None else ""
    return _call("GET", f"/vms/{quote(ref_of(vm_ref, 'vm'))}/network{query}", VmNetwork.from_json)


def logs(vm_ref: Ref, tail: Optional[int]) -> Call[Logs]:
    query = f"?tail={int(tail)}" if tail else ""
    return _call("GET", f"/vms/{quote(ref_of(vm_ref, 'vm'))}/logs{query}", Logs.from_json)


def screen(vm_ref: Ref) -> Call[Screen]:
    return _call("GET", f"/vms/{quote(ref_of(vm_ref, 'vm'))}/screen", Screen.from_json)


def recording(vm_ref: Ref) -> Call[str]:
    def parse(response: HttpResponse) -> str:
        response.raise_for_status()
        return response.body.decode("utf-8")

    return Call(HttpRequest("GET", f"{API_PREFIX}/vms/{quote(ref_of(vm_ref, 'vm'))}/recording"), parse)


def write(vm_ref: Ref, text: str) -> Call[None]:
    if not isinstance(text, str):
        raise TypeError(f"text: expected str, got {type(text).__name__}")
    return _void("POST", f"/vms/{quote(ref_of(vm_ref, 'vm'))}/console", {"data": text})


def gc() -> Call[GcResult]:
    return _call("POST", "/gc", GcResult.from_json)


def smolfiles() -> Call[List[SmolfileExample]]:
    return _call("GET", "/smolfiles", lambda j: [SmolfileExample.from_json(e) for e in j["examples"]])


def check_smolfile(text: str, directory: Optional[str]) -> Call[SmolfileCheck]:
    return _call("POST", "/smolfiles/check", SmolfileCheck.from_json, _drop_none(text=text, directory=directory))


def images() -> Call[List[Image]]:
    return _call("GET", "/images", lambda j: [Image.from_json(i) for i in j["images"]])


def pull_image(reference: str, force: bool) -> Call[PulledImage]:
    body = {"reference": reference, **({"force": True} if force else {})}
    return _call("POST", "/images", PulledImage.from_json, body)


def remove_image(reference: str) -> Call[RemovedImages]:
    return _call("DELETE", f"/images?reference={quote(reference)}", RemovedImages.from_json)


def prune_images() -> Call[RemovedImages]:
    return _call("POST", "/images/prune", RemovedImages.from_json)


def listen(host: str, port: int, tls: bool = False) -> Call[Listener]:
    body = {"host": host, "port": port, **({"tls": True} if tls else {})}
    return _call("POST", "/engine/listeners", Listener.from_json, body)


def unlisten(port: int) -> Call[None]:
    return _void("DELETE", f"/engine/listeners?port={int(port)}")


def host() -> Call[HostReport]:
    return _call("GET", "/host", HostReport.from_json)


def tokens() -> Call[List[TokenInfo]]:
    return _call("GET", "/tokens", lambda j: [TokenInfo.from_json(t) for t in j["tokens"]])


def create_token(name: str, scope: str) -> Call[CreatedToken]:
    return _call("POST", "/tokens", CreatedToken.from_json, {"name": name, "scope": scope})


def remove_token(name: str) -> Call[None]:
    if not isinstance(name, str) or not name:
        raise ValueError(f"name: expected a token's name, got {name!r}")
    return _void("DELETE", f"/tokens/{quote(name)}")


def engines() -> Call[List[RemoteEngine]]:
    return _call("GET", "/engines", lambda j: [RemoteEngine.from_json(e) for e in j["engines"]])


def _engine_url(url: str) -> str:
    if not isinstance(url, str) or not url.startswith(("http://", "https://")):
        raise ValueError(f"url: expected an engine URL such as https://10.0.0.2:7443, got {url!r}")
    return url


def probe_engine(url: str) -> Call[EngineProbe]:
    return _call("POST", "/engines/probe", EngineProbe.from_json, {"url": _engine_url(url)})


def add_engine(name: str, url: str, token: str, fingerprint: Optional[str]) -> Call[AddedEngine]:
    if not isinstance(name, str) or not name:
        raise ValueError(f"name: expected the name to add the engine under, got {name!r}")
    if not isinstance(token, str) or not token:
        raise ValueError(f"token: expected a token of that engine (smol token create there), got {token!r}")
    body = _drop_none(name=name, url=_engine_url(url), token=token, fingerprint=fingerprint)
    return _call("POST", "/engines", AddedEngine.from_json, body)


def remove_engine(name: str) -> Call[None]:
    if not isinstance(name, str) or not name:
        raise ValueError(f"name: expected an added engine's name, got {name!r}")
    return _void("DELETE", f"/engines/{quote(name)}")


def shutdown() -> Call[None]:
    return _void("POST", "/engine/shutdown")


def _file_path(vm_ref: Ref, path: str) -> str:
    if not isinstance(path, str) or not path.startswith("/"):
        raise ValueError(f"path: expected an absolute path in the guest, got {path!r}")
    return f"{API_PREFIX}/vms/{quote(ref_of(vm_ref, 'vm'))}/files?path={quote(path)}"


def read_file(vm_ref: Ref, path: str) -> Call[bytes]:
    def parse(response: HttpResponse) -> bytes:
        response.raise_for_status()
        return response.body

    return Call(HttpRequest("GET", _file_path(vm_ref, path)), parse)


def write_file(vm_ref: Ref, path: str, data: Union[bytes, str, Iterable[bytes]], mode: Optional[int]) -> Call[int]:
    """Writes ``data`` (bytes, str as UTF-8, or an iterable of bytes chunks streamed as they come): its byte count."""
    where = _file_path(vm_ref, path)
    if mode is not None:
        if not 0 <= mode <= 0o7777:
            raise ValueError(f"mode: expected a file mode such as 0o644, got {mode!r}")
        where += f"&mode={mode:04o}"
    if isinstance(data, str):
        data = data.encode("utf-8")
    if isinstance(data, (bytes, bytearray, memoryview)):
        request = HttpRequest("PUT", where, raw=bytes(data), content_type="application/octet-stream")
    else:
        request = HttpRequest("PUT", where, stream=data, content_type="application/octet-stream")
    return Call(request, _json(lambda j: int(j["bytes"])))
