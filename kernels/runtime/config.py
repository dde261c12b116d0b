"""Process configuration: what the operator asked for, one frozen record per config namespace of the rules.

``rules/linear_attn.rules`` declares two config namespaces, ``mamba`` and ``server``; each is a frozen
``msgspec.Struct`` here (:class:`MambaConfig`, :class:`ServerConfig`) with the leaves, and the defaults, the
rules give. A :class:`ProcessConfig` holds one of each and is shared, by reference, by every runner of the
process.

Process configuration holds operator intent only. The one write it ever sees is the launch-level
normalisation of the rules (``launch normalize_linear_attn``), run and applied once by :func:`launch`
before any runner exists. There is no way to apply launch-level resolutions without running the generated
launch blocks: the only method that changes a leaf computes what it applies itself, from the generated
``normalize_linear_attn`` (a caller that handed in resolutions would skip every ``forbid`` and ``require``
of the launch rules). Per-runner decisions (the stamp, its auto-defaults) never come back here: a recorded
auto-default reads back as an operator flag (SGLang #34376). The namespace records are frozen, so nothing
else can write them.

Enum-valued leaves hold backend names as given (``"triton"``) or members of the generated enums (which are
``str``); the generated resolvers accept both.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Mapping
from types import MappingProxyType
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


# The config namespaces of the rules, by name, and the record type of each (read-only).
NAMESPACES: Mapping[str, type[msgspec.Struct]] = MappingProxyType(
    {"mamba": MambaConfig, "server": ServerConfig}
)


class LaunchError(RuntimeError):
    """Launch-level resolution was asked for twice, without launch facts, or named a leaf the process
    configuration lacks."""


class ProcessConfig:
    """One process's configuration: a frozen record per config namespace, shared by every runner.

    Read ``config.mamba.linear_attn_backend``; there are no setters. :func:`launch` is the only way to
    change a leaf: it runs the generated launch blocks and applies what they resolve, once.
    """

    __slots__ = ("_namespaces", "_launch_facts", "_lock")
    # set through object.__setattr__ (this class's own __setattr__ refuses every write)
    _namespaces: Mapping[str, Any]
    _launch_facts: Any
    _lock: threading.Lock

    def __init__(self, *, mamba: MambaConfig | None = None, server: ServerConfig | None = None) -> None:
        namespaces = {"mamba": mamba or MambaConfig(), "server": server or ServerConfig()}
        for name, record in namespaces.items():
            if not isinstance(record, NAMESPACES[name]):
                raise TypeError(f"{name} must be a {NAMESPACES[name].__name__}, got {type(record).__name__}")
        object.__setattr__(self, "_namespaces", MappingProxyType(namespaces))
        object.__setattr__(self, "_launch_facts", None)
        object.__setattr__(self, "_lock", threading.Lock())

    def __setattr__(self, name: str, value: Any) -> None:
        raise AttributeError(
            f"ProcessConfig is read-only (tried to set {name!r}); launch-level resolutions are applied by "
            "launch(), and per-runner decisions live on the runner's stamp"
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
        """The ``LaunchFacts`` the process was launched with (None before :func:`launch`)."""
        return self._launch_facts

    def _launch(self, launch_facts: Any) -> dict[str, dict[str, Any]]:
        """Run the generated launch blocks on this configuration and apply what they set, all or nothing,
        once; return the leaves that changed (``{namespace: {leaf: value}}``). :func:`launch` calls it.

        It takes no resolutions from its caller: what it applies is what the launch rules resolve, after
        every ``forbid`` and ``require`` of them held.
        """
        from stampgen.generated.linear_attn import LaunchFacts, normalize_linear_attn

        if not isinstance(launch_facts, LaunchFacts):
            raise LaunchError(
                f"launch needs the process's LaunchFacts (stampgen.generated.linear_attn.LaunchFacts), "
                f"got {type(launch_facts).__name__}"
            )
        with self._lock:
            if self._launch_facts is not None:
                raise LaunchError(
                    "this process configuration was already launched; the launch-level rules run once per "
                    "process, before any runner exists"
                )
            resolved = normalize_linear_attn(self.mamba, self.server, launch_facts)
            updated = dict(self._namespaces)
            changes: dict[str, dict[str, Any]] = {}
            for namespace, leaves in resolved.items():
                if namespace not in NAMESPACES:
                    raise LaunchError(
                        f"the launch rules set leaves of the config namespace {namespace!r}, which the "
                        f"process configuration lacks (it has: {', '.join(NAMESPACES)})"
                    )
                record = updated[namespace]
                unknown = [leaf for leaf in leaves if leaf not in record.__struct_fields__]
                if unknown:
                    raise LaunchError(f"the launch rules set leaves {namespace} lacks: {unknown}")
                changed = {leaf: value for leaf, value in leaves.items() if getattr(record, leaf) != value}
                if changed:
                    updated[namespace] = msgspec.structs.replace(record, **changed)
                    changes[namespace] = changed
            object.__setattr__(self, "_namespaces", MappingProxyType(updated))
            object.__setattr__(self, "_launch_facts", launch_facts)
        return changes

    def __repr__(self) -> str:
        state = "launched" if self.launched else "not launched"
        return f"ProcessConfig({state}, mamba={self.mamba!r}, server={self.server!r})"


def launch(process_config: ProcessConfig, launch_facts: Any) -> dict[str, dict[str, Any]]:
    """Run the launch-level normalisation of the rules once and apply what it resolved.

    ``launch_facts`` is a ``generated.linear_attn.LaunchFacts``. Returns the resolutions applied
    (``{namespace: {leaf: value}}``, only the leaves that changed). A rule violation raises the generated
    ``RuleViolationError`` (a ``ValueError`` naming the rules line) and leaves the configuration unlaunched;
    a second launch raises :class:`LaunchError`.
    """
    if not isinstance(process_config, ProcessConfig):
        raise TypeError(f"launch needs a ProcessConfig, got {type(process_config).__name__}")
    changes = process_config._launch(launch_facts)
    for namespace, leaves in changes.items():
        for leaf, value in leaves.items():
            logger.info("launch: %s.%s = %s", namespace, leaf, getattr(value, "value", value))
    return changes
