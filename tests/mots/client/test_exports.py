"""The SDK package's names: every one importable from ``mots.client``, and each imported only when
asked for, so one module of it (a model file) does not bring the HTTP clients along."""

from __future__ import annotations

import subprocess
import sys

import mots.client


def test_every_exported_name_resolves() -> None:
    for name in mots.client.__all__:
        assert getattr(mots.client, name).__name__ == name


def test_loading_a_model_file_does_not_import_the_http_clients() -> None:
    code = (
        "import sys, mots.client.model_file; "
        "print(sorted(m for m in sys.modules if m.startswith('mots.client')))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "['mots.client', 'mots.client.model_file']"
