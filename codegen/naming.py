"""How names from the rules become Python names in generated code."""

from __future__ import annotations

import re


def snake_case(name: str) -> str:
    """`GDNAttnBackend` → `gdn_attn_backend`, `LinearAttnBackends` → `linear_attn_backends`."""
    s = re.sub(r"([A-Z]+)([A-Z][a-z])", r"\1_\2", name)
    s = re.sub(r"([a-z0-9])([A-Z])", r"\1_\2", s)
    return s.lower()


def camel_case(name: str) -> str:
    """`runner` → `Runner`, `launch_site` → `LaunchSite`."""
    return "".join(part[:1].upper() + part[1:] for part in name.split("_") if part)
