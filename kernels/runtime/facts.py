"""The facts the rules read (``facts launch``, ``facts runner``), detected on this machine.

    launch(config, detect_launch_facts(kimi_k3=False))                    # once per process
    facts = detect_runner_facts(model_cls, model_config=hf_config, state_pool=pool)
    runner = ModelRunner("target", model_cls=model_cls, runner_facts=facts, process_config=config)

Both read the device the same way (:func:`device_facts`), so a runner's ``sm`` and ``cuda`` agree with the
launch facts by construction; ``attn_backend_wrapper`` refuses a runner whose facts contradict them. Every
function takes explicit facts as keywords, and an explicit fact wins over a detected one (a dry run, a
test, a machine the probe gets wrong); a fact given explicitly is never probed. torch and flashinfer are
imported inside the functions that probe them.

A value outside the rules' domain (an SM 7 GPU, an SM 8.9 minor) is refused by the generated records,
naming the rules line that declares the domain: the rules must say what such a machine gets, the probe
never guesses.
"""

from __future__ import annotations

import importlib
import importlib.util
from collections.abc import Mapping
from types import MappingProxyType
from typing import Any

from stampgen.generated.linear_attn import LaunchFacts, ModelFamily, RunnerFacts
from stampgen.kernels.runtime.models import EntryClass

__all__ = [
    "detect_launch_facts",
    "detect_runner_facts",
    "device_facts",
    "flashinfer_gdn_prefill_importable",
    "head_dims",
    "pool_dtype",
]

_DEVICE_FACTS = ("platform", "sm", "sm_minor", "cuda")

# Where a model config keeps the linear-attention head dims, first match wins: Qwen3-Next / Qwen3.5 name
# them linear_{key,value}_head_dim; other configs head_{k,v}_dim or one head_dim for both.
_HEAD_DIM_ATTRIBUTES: Mapping[str, tuple[str, ...]] = MappingProxyType(
    {
        "head_k_dim": ("linear_key_head_dim", "head_k_dim", "head_dim"),
        "head_v_dim": ("linear_value_head_dim", "head_v_dim", "head_dim"),
    }
)

# A runner of family `other` has no linear-attention layers: no heads to measure and no state pool. The
# rules read neither fact for it (every gate and validation that reads them asks for a family first), but
# RunnerFacts holds both, so it gets these.
_NO_LINEAR_LAYERS: Mapping[str, Any] = MappingProxyType(
    {"head_k_dim": 128, "head_v_dim": 128, "pool_dtype": "float32"}
)


def device_facts(device: Any = None) -> dict[str, Any]:
    """``platform``, ``sm``, ``sm_minor`` and ``cuda`` of ``device`` (default: the current one).

    CUDA: ``torch.cuda.get_device_capability`` gives sm and sm_minor, ``torch.version.cuda`` the CUDA
    major. Off CUDA (an XPU, an Ascend NPU with torch_npu, or the CPU) all three are 0. A ROCm build of
    torch answers the CUDA calls with AMD capabilities, which the rules do not describe: refused.
    """
    import torch

    if torch.cuda.is_available():
        if getattr(torch.version, "hip", None):
            raise ValueError(
                "a ROCm device is not described by the rules' facts (runner.platform is one of cuda, npu, "
                "xpu, cpu); pass platform, sm, sm_minor and cuda explicitly"
            )
        major, minor = torch.cuda.get_device_capability(device)
        version = torch.version.cuda
        return {
            "platform": "cuda",
            "sm": major,
            "sm_minor": minor,
            "cuda": int(version.split(".", 1)[0]) if version else 0,
        }
    for platform in ("xpu", "npu"):  # torch.npu exists once torch_npu is imported
        backend = getattr(torch, platform, None)
        if backend is not None and backend.is_available():
            return {"platform": platform, "sm": 0, "sm_minor": 0, "cuda": 0}
    return {"platform": "cpu", "sm": 0, "sm_minor": 0, "cuda": 0}


def flashinfer_gdn_prefill_importable() -> bool:
    """Whether ``flashinfer.gdn_prefill`` imports here and has the chunked kernel the backends call.

    ``importlib.util.find_spec`` first, so a machine without flashinfer imports nothing; a broken install
    (missing CUDA libraries, its DSL compiler) raises more than ImportError, and counts as absent.
    """
    if importlib.util.find_spec("flashinfer") is None:
        return False
    try:
        flashinfer = importlib.import_module("flashinfer")
        module = getattr(flashinfer, "gdn_prefill", None) or importlib.import_module("flashinfer.gdn_prefill")
    except Exception:
        return False
    return callable(getattr(module, "chunk_gated_delta_rule", None))


def head_dims(model_config: Any) -> dict[str, int]:
    """``head_k_dim`` and ``head_v_dim`` of a model config (an HF config or any object with the attributes).

    A multimodal config's ``text_config`` is read when it has one. Raises ValueError naming the attributes
    it looked for when one is missing.
    """
    config = getattr(model_config, "text_config", None) or model_config
    dims = {}
    for fact, attributes in _HEAD_DIM_ATTRIBUTES.items():
        value = next((getattr(config, a) for a in attributes if getattr(config, a, None) is not None), None)
        if value is None:
            raise ValueError(
                f"runner.{fact}: the model config ({type(model_config).__name__}) has none of "
                f"{', '.join(attributes)}; pass {fact} explicitly"
            )
        dims[fact] = int(value)
    return dims


def pool_dtype(state_pool: Any) -> str:
    """The ``StateDtype`` name of a recurrent-state pool tensor (any object with a torch ``dtype``)."""
    name = str(state_pool.dtype).removeprefix("torch.")
    if name not in ("float32", "bfloat16", "float16"):
        raise ValueError(f"runner.pool_dtype: a state pool of {name} is not a StateDtype of the rules")
    return name


def detect_launch_facts(*, kimi_k3: bool = False, device: Any = None, **explicit: Any) -> LaunchFacts:
    """The process's ``LaunchFacts``: ``sm`` and ``cuda`` from the device unless given; ``kimi_k3`` says
    whether the target is a Kimi-K3 checkpoint."""
    facts = dict(explicit, kimi_k3=kimi_k3)
    if not {"sm", "cuda"} <= facts.keys():
        detected = device_facts(device)
        facts = {"sm": detected["sm"], "cuda": detected["cuda"], **facts}
    return LaunchFacts(**facts)


def detect_runner_facts(
    model_cls: type[EntryClass],
    *,
    model_config: Any = None,
    state_pool: Any = None,
    device: Any = None,
    **explicit: Any,
) -> RunnerFacts:
    """One runner's ``RunnerFacts``: the family from ``model_cls.linear_attn_family``, every other fact
    given in ``explicit`` or detected.

    platform, sm, sm_minor, cuda: :func:`device_facts` of ``device``; head_k_dim, head_v_dim:
    :func:`head_dims` of ``model_config``; pool_dtype: :func:`pool_dtype` of ``state_pool``;
    flashinfer_gdn_prefill: :func:`flashinfer_gdn_prefill_importable`. A runner of family ``other``
    without a model config or a pool gets the neutral head dims and pool dtype no rule reads for it.
    """
    if "family" in explicit:
        raise TypeError("family comes from the model class (linear_attn_family); do not pass it")
    family = ModelFamily(model_cls.linear_attn_family)
    facts: dict[str, Any] = dict(explicit)
    if not set(_DEVICE_FACTS) <= facts.keys():
        facts = {**device_facts(device), **facts}
    no_linear_layers = family is ModelFamily.OTHER
    if not {"head_k_dim", "head_v_dim"} <= facts.keys():
        if model_config is not None:
            facts = {**head_dims(model_config), **facts}
        elif no_linear_layers:
            facts = {
                "head_k_dim": _NO_LINEAR_LAYERS["head_k_dim"],
                "head_v_dim": _NO_LINEAR_LAYERS["head_v_dim"],
                **facts,
            }
        else:
            raise ValueError(
                f"runner facts of {model_cls.__name__}: its head dims need a model_config (or head_k_dim and "
                "head_v_dim)"
            )
    if "pool_dtype" not in facts:
        if state_pool is not None:
            facts["pool_dtype"] = pool_dtype(state_pool)
        elif no_linear_layers:
            facts["pool_dtype"] = _NO_LINEAR_LAYERS["pool_dtype"]
        else:
            raise ValueError(
                f"runner facts of {model_cls.__name__}: its pool dtype needs the state pool (or pool_dtype)"
            )
    if "flashinfer_gdn_prefill" not in facts:
        facts["flashinfer_gdn_prefill"] = flashinfer_gdn_prefill_importable()
    return RunnerFacts(family=family, **facts)
