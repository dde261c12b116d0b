"""Import `stampgen` from this checkout when it is not installed (the GPU machine runs the scripts here
with its own packages). Import this module right after putting the repository root on sys.path."""

import importlib.util
import sys
import types
from pathlib import Path

if importlib.util.find_spec("stampgen") is None:
    namespace = types.ModuleType("stampgen")
    namespace.__path__ = [str(Path(__file__).resolve().parents[1])]
    sys.modules["stampgen"] = namespace
