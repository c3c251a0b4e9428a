"""The test suite's environment: the tests' public secrets, admitted only with
``MOTS_ENVIRONMENT=test`` (no service accepts a built-in secret; the processes the tests start
inherit these)."""

from __future__ import annotations

import os

from mots.platform.settings import DEV_OPERATOR_TOKEN, DEV_TOKEN_SECRET

os.environ.setdefault("MOTS_ENVIRONMENT", "test")
os.environ.setdefault("MOTS_OPERATOR_TOKEN", DEV_OPERATOR_TOKEN)
os.environ.setdefault("MOTS_TOKEN_SECRET", DEV_TOKEN_SECRET)
