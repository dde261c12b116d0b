"""An engine's flat server arguments, as the rules' config views, and the engine's flags, from the rules.

SGLang keeps every option in one flat ``ServerArgs`` (``linear_attn_decode_backend``, ``mamba_ssm_dtype``,
``enable_deterministic_inference``, ``speculative_eagle_topk``, ...); the rules read two config namespaces,
``config mamba`` and ``config server`` (:class:`~kernels.runtime.config.MambaConfig`,
:class:`~kernels.runtime.config.ServerConfig`). :data:`SERVER_ARGS` says which server argument each config
leaf comes from, and how the engine spells its values:

    parser = argparse.ArgumentParser()
    add_linear_attn_arguments(parser)                       # the engine's flags, typed from the rules
    config = process_config_from_server_args(parser.parse_args(argv))   # or an engine's ServerArgs
    launch(config, detect_launch_facts())

Types, choices and defaults come from the generated ``CONFIG_LEAVES`` (the rules' declarations), never
from a copy here: a leaf added to the rules without a server argument below makes both functions refuse
to run, naming the leaf.
"""

from __future__ import annotations

import argparse
from collections.abc import Mapping
from types import MappingProxyType
from typing import Any

import msgspec

from stampgen.generated.linear_attn import CONFIG_LEAVES, RULES_SOURCE, ConfigLeaf
from stampgen.kernels.runtime.config import NAMESPACES, MambaConfig, ProcessConfig, ServerConfig

__all__ = [
    "SERVER_ARGS",
    "ServerArg",
    "add_linear_attn_arguments",
    "config_views_from_server_args",
    "process_config_from_server_args",
]


class ServerArg(msgspec.Struct, frozen=True, kw_only=True):
    """The engine's server argument for one config leaf of the rules.

    ``values`` maps the engine's spelling of a value to the rules' (``disaggregation_mode="null"`` is the
    rules' ``none``); names are also matched case-insensitively (``EAGLE`` is ``eagle``). ``set_means_true``
    marks a bool leaf the engine expresses as "this argument is given" (multi-item scoring is on when a
    delimiter token is set).
    """

    leaf: str
    arg: str
    values: tuple[tuple[str, str], ...] = ()
    set_means_true: bool = False

    @property
    def flag(self) -> str:
        return "--" + self.arg.replace("_", "-")


def _server_args(*args: ServerArg) -> Mapping[str, ServerArg]:
    return MappingProxyType({a.leaf: a for a in args})


# Every config leaf of the rules, by its dotted name, and the SGLang server argument it comes from.
SERVER_ARGS: Mapping[str, ServerArg] = _server_args(
    ServerArg(leaf="mamba.linear_attn_backend", arg="linear_attn_backend"),
    ServerArg(leaf="mamba.linear_attn_decode_backend", arg="linear_attn_decode_backend"),
    ServerArg(leaf="mamba.linear_attn_prefill_backend", arg="linear_attn_prefill_backend"),
    ServerArg(leaf="mamba.linear_attn_verify_backend", arg="linear_attn_verify_backend"),
    ServerArg(leaf="mamba.ssm_dtype", arg="mamba_ssm_dtype"),
    ServerArg(leaf="mamba.enable_linear_replayssm", arg="enable_linear_replayssm"),
    ServerArg(leaf="mamba.linear_replayssm_cache_len", arg="linear_replayssm_cache_len"),
    ServerArg(leaf="mamba.enable_linear_replayssm_spec", arg="enable_linear_replayssm_spec"),
    ServerArg(leaf="server.deterministic", arg="enable_deterministic_inference"),
    ServerArg(leaf="server.page_major_kv_layout", arg="enable_page_major_kv_layout"),
    ServerArg(leaf="server.dynamic_chunking", arg="enable_dynamic_chunking"),
    ServerArg(leaf="server.chunked_prefill_size", arg="chunked_prefill_size"),
    ServerArg(leaf="server.multi_item_scoring", arg="multi_item_scoring_delimiter", set_means_true=True),
    ServerArg(leaf="server.two_batch_overlap", arg="enable_two_batch_overlap"),
    ServerArg(
        leaf="server.prefill_cuda_graph",
        arg="cuda_graph_backend_prefill",
        values=(("disabled", "off"), ("breakable", "piecewise")),
    ),
    ServerArg(leaf="server.speculative_algorithm", arg="speculative_algorithm"),
    ServerArg(leaf="server.speculative_topk", arg="speculative_eagle_topk"),
    ServerArg(leaf="server.radix_strategy", arg="mamba_scheduler_strategy"),
    ServerArg(leaf="server.disaggregation", arg="disaggregation_mode", values=(("null", "none"),)),
    ServerArg(leaf="server.attention_backend", arg="attention_backend"),
)


def _server_arg(leaf: str) -> ServerArg:
    spec = SERVER_ARGS.get(leaf)
    if spec is None:
        raise LookupError(
            f"the config leaf {leaf} of {RULES_SOURCE} has no server argument in "
            "stampgen.kernels.runtime.engine.SERVER_ARGS; add one"
        )
    return spec


def _names(leaf: ConfigLeaf) -> tuple[str, ...]:
    return tuple(getattr(v, "value", v) for v in leaf.values)


def _leaf_value(leaf: ConfigLeaf, spec: ServerArg, raw: Any) -> Any:
    """The config value of a leaf from the engine's value: None (unset) stays None, a bool leaf is a bool,
    an int leaf one of its declared ints, an enum leaf a member's name (any name, for an open enum)."""
    if spec.set_means_true:
        return raw is not None
    if raw is None:
        return None
    where = f"{spec.flag} ({RULES_SOURCE}: {leaf.name})"
    if leaf.value_type is bool:
        return bool(raw)
    if leaf.value_type is int:
        value = int(raw)
        if value not in leaf.values:
            raise ValueError(f"{where}: {raw!r} is not one of {', '.join(map(str, leaf.values))}")
        return value
    name = str(getattr(raw, "value", raw))
    name = dict(spec.values).get(name, name)
    names = _names(leaf)
    if name not in names and name.lower() in names:
        name = name.lower()
    if name not in names and not leaf.open:
        raise ValueError(f"{where}: {raw!r} is not one of {', '.join(names)}")
    return name


def config_views_from_server_args(server_args: Any) -> dict[str, msgspec.Struct]:
    """The rules' config views, ``{"mamba": MambaConfig, "server": ServerConfig}``, from an engine's server
    arguments (any object with the attributes :data:`SERVER_ARGS` names; one it lacks, or None, leaves
    the leaf unset, and so at its rules default)."""
    leaves: dict[str, dict[str, Any]] = {namespace: {} for namespace in NAMESPACES}
    for name, leaf in CONFIG_LEAVES.items():
        spec = _server_arg(name)
        value = _leaf_value(leaf, spec, getattr(server_args, spec.arg, None))
        namespace, _, field = name.partition(".")
        if value is not None:
            leaves[namespace][field] = value
    return {namespace: NAMESPACES[namespace](**fields) for namespace, fields in leaves.items()}


def process_config_from_server_args(server_args: Any) -> ProcessConfig:
    """A :class:`ProcessConfig` (not yet launched) from an engine's server arguments."""
    views = config_views_from_server_args(server_args)
    mamba, server = views["mamba"], views["server"]
    assert isinstance(mamba, MambaConfig) and isinstance(server, ServerConfig)
    return ProcessConfig(mamba=mamba, server=server)


def _spelling(leaf: ConfigLeaf) -> Any:
    """argparse's ``type`` for a closed enum leaf: a name differing from a member's only in case is it."""
    names = _names(leaf)

    def spelled(text: str) -> str:
        return text.lower() if text not in names and text.lower() in names else text

    return spelled


def add_linear_attn_arguments(parser: argparse.ArgumentParser) -> None:
    """Add the engine's flag of every config leaf of the rules to ``parser`` (or an argument group).

    Each flag is its server argument (``--linear-attn-decode-backend``, ``--mamba-ssm-dtype``, ...) with
    the leaf's type, choices, default and comment (its help) from the rules: a bool leaf is a switch, an int leaf takes its
    declared ints, a closed enum its members' names (and the engine's spellings of them), an open enum any
    name (a plugin's becomes ``custom``). Parsed, the namespace holds the server arguments, for
    :func:`process_config_from_server_args`.
    """
    for name, leaf in CONFIG_LEAVES.items():
        spec = _server_arg(name)
        where = f"({RULES_SOURCE}: {name})"
        help_text = f"{leaf.doc} {where}" if leaf.doc else where  # the leaf's comment in the rules
        if spec.set_means_true:
            parser.add_argument(
                spec.flag,
                dest=spec.arg,
                type=int,
                default=None,
                metavar="TOKEN_ID",
                help=help_text + "; set to enable",
            )
        elif leaf.value_type is bool:
            action = argparse.BooleanOptionalAction if leaf.default else "store_true"
            parser.add_argument(
                spec.flag, dest=spec.arg, action=action, default=bool(leaf.default), help=help_text
            )
        elif leaf.value_type is int:
            parser.add_argument(
                spec.flag, dest=spec.arg, type=int, choices=leaf.values, default=leaf.default, help=help_text
            )
        else:
            names = _names(leaf)
            default = getattr(leaf.default, "value", leaf.default)
            if leaf.open:
                parser.add_argument(
                    spec.flag,
                    dest=spec.arg,
                    metavar="NAME",
                    default=default,
                    help=f"{help_text}; known: {', '.join(names)}",
                )
            else:
                choices = [*names, *(engine for engine, _ in spec.values)]
                parser.add_argument(
                    spec.flag,
                    dest=spec.arg,
                    type=_spelling(leaf),
                    choices=choices,
                    default=default,
                    help=help_text,
                )
