"""Environment variables read on every launch, at the cost of one dict lookup.

``os.environ.get`` costs four Python calls; a GPU launch reads up to three variables (the GPU code
choices of launch_plan.py, ``ADOFFLOAD_SYNC_LAUNCH`` of launch_run.py), which was a tenth of a tiny
launch. ``environment_value(environment_key(name))`` reads os.environ's own dict where it has one
(kept in step with assignments to os.environ, which A/B runs make in-process) and calls
os.environ.get elsewhere; the value is raw (bytes on POSIX) or None.
"""
from __future__ import annotations

import os

_ENVIRON_DATA = getattr(os.environ, "_data", None)
_ENCODE_KEY = getattr(os.environ, "encodekey", None)
if isinstance(_ENVIRON_DATA, dict) and callable(_ENCODE_KEY):
    environment_value = _ENVIRON_DATA.get
    environment_key = _ENCODE_KEY
else:
    environment_value = os.environ.get

    def environment_key(name: str):
        return name
