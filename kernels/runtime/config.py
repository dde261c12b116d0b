"""Process configuration: what the operator asked for, one frozen record per config namespace of the rules.

``rules/linear_attn.rules`` declares two config namespaces, ``mamba`` and ``server``; each is a frozen
``msgspec.Struct`` here (:class:`MambaConfig`, :class:`ServerConfig`) with the leaves, and the defaults, the
rules give. A :class:`ProcessConfig` holds one of each and is shared, by reference, by every runner of the
process.

Process configuration holds operator intent only. The one write it ever sees is the launch-level
normalisation of the rules (``launch normalize_linear_attn``), applied once by :func:`launch` before any
runner exists and through :meth:`ProcessConfig.apply_launch_resolutions`. Per-runner decisions (the
stamp, its auto-defaults) never come back here: a recorded auto-default reads back as an operator flag
(SGLang #34376). The namespace records are frozen, so nothing else can write them.

Enum-valued leaves hold backend names as given (``"triton"``) or members of the generated enums (which are
``str``); the generated resolvers accept both.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Mapping
from typing import Any

import msgspec

logger = logging.getLogger(__name__)

__all__ = ["LaunchError", "MambaConfig", "ProcessConfig", "ServerConfig", "launch"]


class MambaConfig(msgspec.Struct, frozen=True, kw_only=True):
    """``config mamba``: the linear-attention kernel flags (``--linear-attn-*-backend``) and state options."""

    linear_attn_backend: str = "triton"  # the base for every phase
    linear_attn_decode_backend: str | None = None  # per-phase overrides; None: use the base
    linear_attn_prefill_backend: str | None = None
    linear_attn_verify_backend: str | None = None  # None: flashinfer if decode is, else triton
    ssm_dtype: str | None = None  # --mamba-ssm-dtype, as the operator gave it
    enable_linear_replayssm: bool = False
    linear_replayssm_cache_len: int = 16
    enable_linear_replayssm_spec: bool = False


class ServerConfig(msgspec.Struct, frozen=True, kw_only=True):
    """``config server``: the server-wide options the linear-attention rules read."""

    deterministic: bool = False  # --enable-deterministic-inference
    page_major_kv_layout: bool = False
    dynamic_chunking: bool = False
    chunked_prefill_size: int | None = None
    multi_item_scoring: bool = False
    two_batch_overlap: bool = False
    prefill_cuda_graph: str = "off"
    speculative_algorithm: str | None = None
    speculative_topk: int | None = None
    radix_strategy: str = "no_buffer"
    disaggregation: str = "none"
    attention_backend: str | None = None


# The config namespaces of the rules, by name, and the record type of each.
NAMESPACES: Mapping[str, type[msgspec.Struct]] = {"mamba": MambaConfig, "server": ServerConfig}


class LaunchError(RuntimeError):
    """Launch-level resolution was applied twice, or named a leaf the process configuration lacks."""


class ProcessConfig:
    """One process's configuration: a frozen record per config namespace, shared by every runner.

    Read ``config.mamba.linear_attn_backend``; there are no setters. :meth:`apply_launch_resolutions` is
    the only way to change a leaf, and it works once, at launch.
    """

    __slots__ = ("_namespaces", "_launch_facts", "_lock")

    def __init__(self, *, mamba: MambaConfig | None = None, server: ServerConfig | None = None) -> None:
        namespaces = {"mamba": mamba or MambaConfig(), "server": server or ServerConfig()}
        for name, record in namespaces.items():
            if not isinstance(record, NAMESPACES[name]):
                raise TypeError(f"{name} must be a {NAMESPACES[name].__name__}, got {type(record).__name__}")
        object.__setattr__(self, "_namespaces", namespaces)
        object.__setattr__(self, "_launch_facts", None)
        object.__setattr__(self, "_lock", threading.Lock())

    def __setattr__(self, name: str, value: Any) -> None:
        raise AttributeError(
            f"ProcessConfig is read-only (tried to set {name!r}); launch-level resolutions go through "
            "apply_launch_resolutions(), and per-runner decisions live on the runner's stamp"
        )

    @property
    def mamba(self) -> MambaConfig:
        return self._namespaces["mamba"]

    @property
    def server(self) -> ServerConfig:
        return self._namespaces["server"]

    @property
    def launched(self) -> bool:
        """Whether the launch-level normalisation has been applied."""
        return self._launch_facts is not None

    @property
    def launch_facts(self) -> Any:
        """The launch facts the process was launched with (None before :func:`launch`)."""
        return self._launch_facts

    def apply_launch_resolutions(
        self, resolutions: Mapping[str, Mapping[str, Any]], *, launch_facts: Any
    ) -> None:
        """Replace the leaves the launch-level normalisation resolved: ``{namespace: {leaf: value}}``.

        Applies all or nothing, once per process. Unknown namespaces or leaves raise :class:`LaunchError`.
        """
        if launch_facts is None:
            raise LaunchError("apply_launch_resolutions needs the launch facts it was resolved from")
        with self._lock:
            if self._launch_facts is not None:
                raise LaunchError(
                    "launch-level resolutions were already applied to this process configuration; "
                    "they are resolved once per process, before any runner exists"
                )
            updated = dict(self._namespaces)
            for namespace, leaves in resolutions.items():
                if namespace not in NAMESPACES:
                    raise LaunchError(
                        f"launch resolution for unknown config namespace {namespace!r} "
                        f"(known: {', '.join(NAMESPACES)})"
                    )
                fields = NAMESPACES[namespace].__struct_fields__
                unknown = [leaf for leaf in leaves if leaf not in fields]
                if unknown:
                    raise LaunchError(f"launch resolution for unknown leaves of {namespace}: {unknown}")
                if leaves:
                    updated[namespace] = msgspec.structs.replace(updated[namespace], **leaves)
            object.__setattr__(self, "_namespaces", updated)
            object.__setattr__(self, "_launch_facts", launch_facts)

    def __repr__(self) -> str:
        state = "launched" if self.launched else "not launched"
        return f"ProcessConfig({state}, mamba={self.mamba!r}, server={self.server!r})"


def launch(process_config: ProcessConfig, launch_facts: Any) -> dict[str, dict[str, Any]]:
    """Run the launch-level normalisation of the rules once and apply what it resolved.

    ``launch_facts`` is a ``generated.linear_attn.LaunchFacts``. Returns the resolutions applied
    (``{namespace: {leaf: value}}``, only the leaves that changed). A rule violation raises the generated
    ``RuleViolationError`` (a ``ValueError`` naming the rules line) and leaves the configuration unlaunched.
    """
    from stampgen.generated.linear_attn import normalize_linear_attn

    if process_config.launched:
        raise LaunchError("this process configuration was already launched")
    resolved = normalize_linear_attn(process_config.mamba, process_config.server, launch_facts)
    changes: dict[str, dict[str, Any]] = {}
    for namespace, leaves in resolved.items():
        current = process_config._namespaces.get(namespace)
        changed = {
            leaf: value
            for leaf, value in leaves.items()
            if current is None or not hasattr(current, leaf) or getattr(current, leaf) != value
        }
        if changed:
            changes[namespace] = changed
    process_config.apply_launch_resolutions(changes, launch_facts=launch_facts)
    for namespace, leaves in changes.items():
        for leaf, value in leaves.items():
            logger.info("launch: %s.%s = %s", namespace, leaf, getattr(value, "value", value))
    return changes
