"""``LaunchConfig`` overrides given on a probe's command line (``--config`` / ``--variations``), checked
before anything runs: each a JSON object of known fields, each value of its field's type, so that a typo
or a wrong type is a usage error naming the field, never a traceback deep inside a GPU run.

Shared by the GDN prefill probes (``gdn_prefill_probe``, ``gdn_intra_probe``, ``gdn_kernel_times``,
``gdn_windows_timeline``, ``gdn_prefill_profile``). A probe that takes keys beside the fields (the prefill
probe's ``seg_scale`` / ``segments``) names them in ``extra``, each with its own check.
"""

from __future__ import annotations

import json
import types
import typing
from collections.abc import Callable, Mapping

from stampgen.kernels.gdn import chunk

# A key beside the LaunchConfig fields: (what it takes, in words; whether a value is one)
Extra = tuple[str, Callable[[object], bool]]


def _accepts(hint, value) -> bool:
    """Whether ``value`` (from JSON) is of a ``LaunchConfig`` field's type ``hint``."""
    if typing.get_origin(hint) is typing.Literal:
        return value in typing.get_args(hint)
    if typing.get_origin(hint) in (types.UnionType, typing.Union):
        return any(_accepts(arm, value) for arm in typing.get_args(hint))
    if hint is type(None):
        return value is None
    if isinstance(value, bool):  # JSON's true / false: a bool field's only
        return hint is bool
    return isinstance(value, int if hint is int else (int, float) if hint is float else hint)


def load_json(text: str, kind: type, name: str):
    """``text`` as JSON of type ``kind`` (``name``: "object", "list"; a ``ValueError`` naming what is
    wrong)."""
    try:
        value = json.loads(text)
    except json.JSONDecodeError as err:
        raise ValueError(f"not a JSON {name} ({err.msg})") from None
    if not isinstance(value, kind):
        raise ValueError(f"not a JSON {name}: {text!r}")
    return value


def checked_overrides(config, extra: Mapping[str, Extra] | None = None) -> dict:
    """``config`` (parsed JSON) as ``LaunchConfig`` field overrides: an object of known fields (or keys of
    ``extra``), each of its field's type (a ``ValueError`` naming what is wrong)."""
    extra = extra or {}
    if not isinstance(config, dict):
        raise ValueError(f"not a JSON object: {json.dumps(config)}")
    hints = typing.get_type_hints(chunk.LaunchConfig)
    unknown = sorted(set(config) - set(hints) - set(extra))
    if unknown:
        besides = f"; beside them {', '.join(extra)}" if extra else ""
        raise ValueError(
            f"unknown field(s) {', '.join(unknown)}; LaunchConfig has {', '.join(hints)}{besides}"
        )
    for field, value in config.items():
        if field in extra:
            takes, ok = extra[field]
            if not ok(value):
                raise ValueError(f"{field} takes {takes}, got {value!r}")
            continue
        hint = hints[field]
        if not _accepts(hint, value):
            raise ValueError(
                f"{field} takes {hint.__name__ if isinstance(hint, type) else hint}, got {value!r}"
            )
    return config


def parse_variations(text: str, extra: Mapping[str, Extra] | None = None) -> list[dict]:
    """A ``--variations`` argument: a JSON list of overrides, each checked as ``--config`` is (a
    ``ValueError`` naming what is wrong)."""
    return [checked_overrides(item, extra) for item in load_json(text, list, "list")]


def parse_config(text: str | None) -> dict | None:
    """A ``--config`` argument: one JSON object of ``LaunchConfig`` fields (None: none given)."""
    if text is None:
        return None
    return checked_overrides(load_json(text, dict, "object"))
