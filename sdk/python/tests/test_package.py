"""The package as a user gets it: ``pip install ./sdk/python`` into a fresh virtual environment with no index at all
(offline), then imported from there, typed (py.typed), on the interpreter that runs the tests."""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
import venv

from conftest import ROOT

PACKAGE_DIR = os.path.join(ROOT, "sdk", "python")


def test_pip_installs_it_offline_into_a_venv() -> None:
    with tempfile.TemporaryDirectory(prefix="smol-py-venv-") as where:
        # System site packages: the one dependency (wsproto, with h11) comes from Debian's python3-wsproto.
        venv.EnvBuilder(system_site_packages=True, with_pip=True).create(where)
        python = os.path.join(where, "bin", "python")
        env = {**os.environ, "PIP_NO_INDEX": "1", "PIP_DISABLE_PIP_VERSION_CHECK": "1", "PYTHONNOUSERSITE": "1"}
        install = subprocess.run(
            [python, "-m", "pip", "install", "--no-index", PACKAGE_DIR],
            capture_output=True,
            text=True,
            env=env,
            timeout=300,
        )
        assert install.returncode == 0, install.stdout + install.stderr
        probe = subprocess.run(
            [
                python,
                "-c",
                "import os, smol_studio, importlib.metadata as m; "
                "print(smol_studio.__file__); print(m.version('smol-studio')); "
                "print(os.path.exists(os.path.join(os.path.dirname(smol_studio.__file__), 'py.typed')))",
            ],
            capture_output=True,
            text=True,
            cwd=where,
            env=env,
            timeout=60,
        )
        assert probe.returncode == 0, probe.stderr
        file, version, typed = probe.stdout.split()
        assert file.startswith(where) and version == "0.1.0" and typed == "True"


def test_the_package_imports_on_this_interpreter() -> None:
    import smol_studio

    assert sys.version_info >= (3, 9)
    assert smol_studio.connect and smol_studio.connect_async and smol_studio.AsyncSmol


def test_pins_are_keyed_as_the_cli_keys_them_ipv6_in_brackets() -> None:
    from smol_studio._protocol import Target

    assert Target.url("https://[::1]:7443/?token=t").describe() == "[::1]:7443"
    assert Target.url("https://10.0.0.2:7443/?token=t").describe() == "10.0.0.2:7443"
    assert Target.url("https://node-a/?token=t").describe() == "node-a:443"
