"""Lets the examples run from a checkout without installing the package (pip install ./sdk/python does it properly)."""

import os
import sys

ROOT = os.path.normpath(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))
try:
    import smol_studio  # noqa: F401
except ImportError:
    sys.path.insert(0, os.path.join(ROOT, "sdk", "python"))


def smolfile_arg() -> str:
    """The Smolfile to use: the first argument, else smolfiles/shell.smolfile (the Linux guest with its agent)."""
    return sys.argv[1] if len(sys.argv) > 1 else os.path.join(ROOT, "smolfiles", "shell.smolfile")
