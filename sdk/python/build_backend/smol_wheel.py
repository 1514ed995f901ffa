"""The PEP 517 build backend of the smol-studio package (pyproject.toml names it): builds the pure-Python wheel (and
an editable one, PEP 660, and an sdist) with the standard library alone, so ``pip install ./sdk/python`` needs no
network to fetch a backend. Metadata comes from pyproject.toml's [project] table."""

from __future__ import annotations

import base64
import hashlib
import io
import os
import re
import tarfile
import zipfile
from typing import Any, Dict, List, Optional, Tuple

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PACKAGE = "smol_studio"


def _project() -> Dict[str, Any]:
    with open(os.path.join(ROOT, "pyproject.toml"), "rb") as f:
        raw = f.read()
    try:
        import tomllib  # Python 3.11+
    except ImportError:
        return _parse_project(raw.decode("utf-8"))
    return tomllib.loads(raw.decode("utf-8"))["project"]


def _parse_project(text: str) -> Dict[str, Any]:
    """The [project] table of our own pyproject.toml on Python < 3.11 (no tomllib): strings, lists of strings and
    inline tables of strings, one key a line; anything else is an error that names the line."""
    project: Dict[str, Any] = {}
    table = None
    for number, line in enumerate(text.splitlines(), 1):
        line = line.split(" #")[0].strip()
        if not line or line.startswith("#"):
            continue
        if line.startswith("["):
            table = line.strip("[] ")
            continue
        if table != "project":
            continue
        key, _, value = (part.strip() for part in line.partition("="))
        if value.startswith('"'):
            project[key] = value.strip('"')
        elif value.startswith("["):
            project[key] = re.findall(r'"([^"]*)"', value)
        elif value.startswith("{"):
            project[key] = dict(re.findall(r'(\w+)\s*=\s*"([^"]*)"', value))
        else:
            raise ValueError(f"pyproject.toml:{number}: cannot read {key} = {value} without tomllib (Python 3.11)")
    return project


def _dist_name(project: Dict[str, Any]) -> str:
    return re.sub(r"[-_.]+", "_", project["name"]).lower()


def _metadata(project: Dict[str, Any]) -> str:
    lines = [
        "Metadata-Version: 2.1",
        f"Name: {project['name']}",
        f"Version: {project['version']}",
        f"Summary: {project.get('description', '')}",
    ]
    if "requires-python" in project:
        lines.append(f"Requires-Python: {project['requires-python']}")
    license_ = project.get("license")
    if isinstance(license_, dict) and "text" in license_:
        lines.append(f"License: {license_['text']}")
    for requirement in project.get("dependencies", []):
        lines.append(f"Requires-Dist: {requirement}")
    readme = project.get("readme")
    body = ""
    if isinstance(readme, str):
        with open(os.path.join(ROOT, readme), encoding="utf-8") as f:
            body = f.read()
        lines.append("Description-Content-Type: text/markdown")
    return "\n".join(lines) + "\n\n" + body


def _package_files() -> List[Tuple[str, str]]:
    """(path in the wheel, file on disk) for every file of the package, no caches."""
    files = []
    for folder, dirs, names in os.walk(os.path.join(ROOT, PACKAGE)):
        dirs[:] = sorted(d for d in dirs if d != "__pycache__")
        for name in sorted(names):
            if name.endswith((".pyc", ".pyo")):
                continue
            full = os.path.join(folder, name)
            files.append((os.path.relpath(full, ROOT).replace(os.sep, "/"), full))
    return files


def _record_line(path: str, data: bytes) -> str:
    digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
    return f"{path},sha256={digest},{len(data)}"


def _write_wheel(directory: str, contents: List[Tuple[str, bytes]]) -> str:
    project = _project()
    name = _dist_name(project)
    info = f"{name}-{project['version']}.dist-info"
    wheel_name = f"{name}-{project['version']}-py3-none-any.whl"
    contents = contents + [
        (f"{info}/METADATA", _metadata(project).encode("utf-8")),
        (
            f"{info}/WHEEL",
            b"Wheel-Version: 1.0\nGenerator: smol_wheel\nRoot-Is-Purelib: true\nTag: py3-none-any\n",
        ),
        (f"{info}/top_level.txt", f"{PACKAGE}\n".encode()),
    ]
    record = [_record_line(path, data) for path, data in contents] + [f"{info}/RECORD,,"]
    contents.append((f"{info}/RECORD", ("\n".join(record) + "\n").encode()))
    with zipfile.ZipFile(os.path.join(directory, wheel_name), "w", zipfile.ZIP_DEFLATED) as wheel:
        for path, data in contents:
            info_ = zipfile.ZipInfo(path, date_time=(2026, 1, 1, 0, 0, 0))
            info_.external_attr = 0o644 << 16
            info_.compress_type = zipfile.ZIP_DEFLATED
            wheel.writestr(info_, data)
    return wheel_name


def build_wheel(wheel_directory: str, config_settings: Optional[dict] = None, metadata_directory: Optional[str] = None) -> str:
    contents = []
    for path, full in _package_files():
        with open(full, "rb") as f:
            contents.append((path, f.read()))
    return _write_wheel(wheel_directory, contents)


def build_editable(
    wheel_directory: str, config_settings: Optional[dict] = None, metadata_directory: Optional[str] = None
) -> str:
    """PEP 660: a wheel whose .pth file puts this directory on sys.path, so edits take effect at once."""
    return _write_wheel(wheel_directory, [(f"__editable__.{PACKAGE}.pth", (ROOT + "\n").encode())])


def build_sdist(sdist_directory: str, config_settings: Optional[dict] = None) -> str:
    project = _project()
    base = f"{_dist_name(project)}-{project['version']}"
    name = f"{base}.tar.gz"
    members = [("pyproject.toml", os.path.join(ROOT, "pyproject.toml")), ("README.md", os.path.join(ROOT, "README.md"))]
    members += [("build_backend/smol_wheel.py", os.path.abspath(__file__))] + _package_files()
    pkg_info = _metadata(project).encode("utf-8")
    with tarfile.open(os.path.join(sdist_directory, name), "w:gz", format=tarfile.PAX_FORMAT) as tar:
        for path, full in members:
            tar.add(full, arcname=f"{base}/{path}", recursive=False)
        info = tarfile.TarInfo(f"{base}/PKG-INFO")
        info.size = len(pkg_info)
        tar.addfile(info, io.BytesIO(pkg_info))
    return name


def get_requires_for_build_wheel(config_settings: Optional[dict] = None) -> List[str]:
    return []


def get_requires_for_build_editable(config_settings: Optional[dict] = None) -> List[str]:
    return []


def get_requires_for_build_sdist(config_settings: Optional[dict] = None) -> List[str]:
    return []
