"""The seed's system end to end: tiny real models, their stamps, the loader's decision, speculative decoding.

    python -m stampgen.kernels.runtime.demo                      # CPU, fp32, the torch reference kernels
    python -m stampgen.kernels.runtime.demo --without-hook DeepseekV4ForCausalLMDSpark   # SGLang #33312
    python -m stampgen.kernels.runtime.demo --device cuda --dtype bfloat16 --backend triton

Each draft/target pair runs as its own process (one ``ProcessConfig``, launched once): the target and the
draft are two runners, each with its own ``LinearAttnBackends`` stamp (``attn_backend_wrapper``) and its own
``SharedExpertsFusionDecision`` (the loader). The demo prints, per runner, both stamps with the tier that
decided each field, then per pair the line ``DRAFT -> TARGET: mean accept length: A.AA (draft tokens D)``,
what that figure should be and why, whether speculative decoding produced exactly the target's greedy
output, and the time of each phase. Bad arguments, and flags that the rules, the kernels or the machine
refuse, end with one line on stderr and exit status 2 (docs/runtime.md).

``--without-hook CLASS`` removes ``shared_experts_fusion_disable_reason`` from an entry class before
anything is loaded (and puts it back at exit): the generated parity check names it, and the pair shows
what the wrong layout costs.
"""

from __future__ import annotations

import argparse
import logging
import sys
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass
from types import MappingProxyType
from typing import Any, TextIO

import torch

from stampgen.generated import loader as loader_rules
from stampgen.generated.linear_attn import (
    LaunchFacts,
    ModelFamily,
    RuleViolationError,
    RunnerFacts,
    StampConflictError,
    StampMismatchError,
    UnstampedRunnerError,
    check_draft_hooks,
    gdn_flashinfer_prefill,
    kda_flashinfer_prefill,
    resolve_linear_attn_backends_with_provenance,
)
from stampgen.kernels._validation import KernelUnavailableError
from stampgen.kernels.backends import LightningAttentionBackend, ModelFamilyError
from stampgen.kernels.runtime import facts as detect
from stampgen.kernels.runtime import models
from stampgen.kernels.runtime.config import LaunchError, MambaConfig, ProcessConfig, ServerConfig, launch
from stampgen.kernels.runtime.layers import (
    TinyConfig,
    tiny_bailing_v2_5_config,
    tiny_deepseek_v4_config,
    tiny_qwen3_next_config,
)
from stampgen.kernels.runtime.loader import FUSION_HOOK, LoaderConfig, LoaderError, make_checkpoint
from stampgen.kernels.runtime.runner import RunnerFactsError
from stampgen.kernels.runtime.speculative import (
    ModelWorker,
    Phase,
    PhaseTimer,
    SpeculativeResult,
    build_worker,
    generate_greedy,
    generate_speculative,
)

__all__ = ["PAIRS", "DemoPair", "device_facts", "main", "run_pair", "without_hook"]

DTYPES: Mapping[str, torch.dtype] = MappingProxyType(
    {"float32": torch.float32, "bfloat16": torch.bfloat16, "float16": torch.float16}
)


class MachineNotDescribedError(RuntimeError):
    """This device's facts fall outside the rules' fact domains (an SM or CUDA version they do not name): the
    rules must say what such a machine gets; the demo does not guess."""


# What the runtime raises when the flags ask for something the rules, the kernels or this machine refuse:
# the demo reports them as usage errors (exit 2), one line each, never a traceback.
REFUSALS = (
    MachineNotDescribedError,
    RuleViolationError,
    loader_rules.RuleViolationError,
    KernelUnavailableError,
    ModelFamilyError,
    LaunchError,
    LoaderError,
    RunnerFactsError,
    StampConflictError,
    StampMismatchError,
    UnstampedRunnerError,
)


@dataclass(frozen=True)
class DemoPair:
    target: str
    draft: str
    config: Callable[..., TinyConfig]
    algorithm: str  # server.speculative_algorithm
    expected: str  # what the accept length should be, and why (printed under it)

    @property
    def label(self) -> str:
        return f"{self.draft} -> {self.target}"


# An MTP / NextN draft here is an independent random predictor: its layer's weights (the checkpoint's
# `mtp.*`) are seeded like the target's, never trained to predict it, so a proposal matches the target's
# argmax about as often as chance (1 in the vocabulary's 128) and a step commits about one token, the bonus.
# The DSpark draft holds the target's own weights, so with the target's layout it proposes exactly what the
# target would decode.
_RANDOM_DRAFT = (
    "expected about 1: the draft's MTP layer has seeded random weights of its own, not trained on the "
    "target, so its proposals match the target's next token about as often as chance (1 in {vocab}); "
    "each step commits about one token, the target's bonus"
)
_SELF_SPECULATING = (
    "expected D + 1 = {full}: self-speculating, the draft holds the target's weights (loaded through its "
    "own entry class), so in the target's layout every proposal is the target's own next token"
)

PAIRS = (
    DemoPair(
        "Qwen3NextForCausalLM", "Qwen3NextForCausalLMMTP", tiny_qwen3_next_config, "nextn", _RANDOM_DRAFT
    ),
    DemoPair(
        "DeepseekV4ForCausalLM", "DeepseekV4ForCausalLMNextN", tiny_deepseek_v4_config, "nextn", _RANDOM_DRAFT
    ),
    DemoPair(
        "DeepseekV4ForCausalLM",
        "DeepseekV4ForCausalLMDSpark",
        tiny_deepseek_v4_config,
        "dspark",
        _SELF_SPECULATING,
    ),
    DemoPair(
        "BailingMoeV2_5ForCausalLM",
        "BailingMoeForCausalLMNextN",
        tiny_bailing_v2_5_config,
        "nextn",
        _RANDOM_DRAFT,
    ),
)


@contextmanager
def without_hook(class_name: str, hook: str = FUSION_HOOK) -> Iterator[type]:
    """Remove ``hook`` from the registered entry class ``class_name`` for the duration; put it back after."""
    cls = models.ARCHS.get(class_name)
    if cls is None:
        raise ValueError(f"no registered entry class {class_name!r}")
    if hook not in vars(cls):
        raise ValueError(f"{class_name} does not define {hook} itself (it has it: {hasattr(cls, hook)})")
    saved = vars(cls)[hook]
    delattr(cls, hook)
    try:
        yield cls
    finally:
        setattr(cls, hook, saved)


def device_facts(device: torch.device, config: TinyConfig) -> tuple[LaunchFacts, dict[str, Any]]:
    """The launch facts and the runner facts (all but the family) of ``device``, for ``config``'s heads.

    Detected as an engine detects them (``kernels.runtime.facts``): on CUDA, SM and CUDA major from the
    device and whether FlashInfer's GDN prefill imports; on the CPU the facts are given explicitly (the
    override), since a GPU in the machine says nothing about a CPU run. The pool dtype is float32: the
    runner's pools (``RunnerPools``) keep GDN states in fp32, the kernels' layout.

    Raises :class:`MachineNotDescribedError` on a device the rules' fact domains do not describe.
    """
    try:
        on_device = (
            detect.device_facts(device)
            if device.type == "cuda"
            else dict(platform="cpu", sm=0, sm_minor=0, cuda=0)
        )
        launch_facts = detect.detect_launch_facts(sm=on_device["sm"], cuda=on_device["cuda"])
        runner = dict(
            on_device,
            **detect.head_dims(config),
            pool_dtype="float32",
            flashinfer_gdn_prefill=device.type == "cuda" and detect.flashinfer_gdn_prefill_importable(),
        )
        RunnerFacts(
            family=ModelFamily.OTHER, **runner
        )  # the rules' domains, checked before anything is built
    except ValueError as exc:
        raise MachineNotDescribedError(f"{device}: {exc}") from exc
    return launch_facts, runner


def lightning_kernel_backend(backend: str) -> str:
    """The ``kernels.lightning`` backend a lightning pair's model config names: ``--backend`` when lightning
    has it (torch, triton), else triton. Lightning reads no stamp (its kernel is the model config's)."""
    return backend if ("prefill", backend) in LightningAttentionBackend.KERNELS else "triton"


def process_config_for(args: argparse.Namespace, pair: DemoPair) -> ProcessConfig:
    backend = args.backend
    verify = args.verify_backend
    if verify is None and backend not in ("triton", "flashinfer"):
        verify = backend  # verify follows decode only to flashinfer; name it, so that every phase runs it
    mamba = MambaConfig(
        linear_attn_backend=backend,
        linear_attn_decode_backend=args.decode_backend,
        linear_attn_prefill_backend=args.prefill_backend,
        linear_attn_verify_backend=verify,
    )
    server = ServerConfig(chunked_prefill_size=8192, speculative_algorithm=pair.algorithm, speculative_topk=1)
    return ProcessConfig(mamba=mamba, server=server)


@dataclass
class PairRun:
    target: ModelWorker
    draft: ModelWorker
    result: SpeculativeResult
    greedy: list[list[int]]


def run_pair(
    pair: DemoPair,
    *,
    process_config: ProcessConfig,
    launch_facts: LaunchFacts,
    runner_facts: dict[str, Any],
    hf_config: TinyConfig,
    prompts: Sequence[Sequence[int]],
    max_new_tokens: int,
    draft_tokens: int,
    seed: int = 0,
    loader_config: LoaderConfig | None = None,
    device: torch.device | str = "cpu",
    dtype: torch.dtype = torch.float32,
    warmup: int = 0,
) -> PairRun:
    """Launch the pair's process, build its two runners from the target's checkpoint, decode greedily and
    speculatively (after ``warmup`` untimed speculative runs)."""
    launch(process_config, launch_facts)
    checkpoint = make_checkpoint(models.ARCHS[pair.target], hf_config, seed=seed, loader_config=loader_config)
    max_len = max(len(p) for p in prompts) + max_new_tokens + draft_tokens + 2
    common: dict[str, Any] = dict(
        process_config=process_config,
        runner_facts=runner_facts,
        hf_config=hf_config,
        checkpoint=checkpoint,
        loader_config=loader_config,
        device=device,
        dtype=dtype,
        slots=len(prompts) + 1,
        max_len=max_len,
    )
    target = build_worker("target", models.ARCHS[pair.target], **common)
    draft = build_worker("draft", models.ARCHS[pair.draft], target=target, **common)
    greedy = generate_greedy(target, prompts, max_new_tokens=max_new_tokens)
    for _ in range(warmup):
        generate_speculative(target, draft, prompts, max_new_tokens=max_new_tokens, draft_tokens=draft_tokens)
    result = generate_speculative(
        target,
        draft,
        prompts,
        max_new_tokens=max_new_tokens,
        draft_tokens=draft_tokens,
        timer=PhaseTimer(device),
    )
    return PairRun(target, draft, result, greedy)


# --------------------------------------------------------------------------------------------- printing


def linear_attn_provenance(worker: ModelWorker) -> Any:
    """The deciding tier of each field of the runner's ``LinearAttnBackends``: its gates (the stamp's slot,
    the first that yields) and the generated resolver, checked against the stamp the runner holds."""
    runner = worker.loaded.runner
    config = runner.process_config
    facts = runner.runner_facts
    prefill_default = gdn_flashinfer_prefill(config.mamba, config.server, facts)
    if prefill_default is None:
        prefill_default = kda_flashinfer_prefill(config.mamba, config.server, facts)
    stamp, provenance = resolve_linear_attn_backends_with_provenance(
        config.mamba, prefill_default=prefill_default
    )
    if stamp != runner.linear_attn_backends:
        raise AssertionError(f"runner {runner.name!r} holds {runner.linear_attn_backends!r}, not {stamp!r}")
    return provenance


def _value(x: Any) -> str:
    return str(getattr(x, "value", x))


def print_runner(worker: ModelWorker, out: TextIO) -> None:
    loaded = worker.loaded
    runner = loaded.runner
    stamp = runner.linear_attn_backends
    provenance = linear_attn_provenance(worker)
    print(
        f"  runner {runner.name!r}: {runner.model_cls.__name__} ({'draft' if runner.is_draft else 'target'}, "
        f"family {_value(runner.runner_facts.family)})",
        file=out,
    )
    for phase in ("decode", "prefill", "verify"):
        label = "LinearAttnBackends" if phase == "decode" else ""
        value = f"{phase}={_value(getattr(stamp, phase))}"
        print(f"    {label:<30}{value:<20}{getattr(provenance, phase)}", file=out)
    consumer = worker.linear_attn
    if consumer is not None:
        kernels = " ".join(f"{phase}={backend}" for phase, backend in consumer.kernel_backends.items())
        print(f"    {type(consumer).__name__:<30}{kernels}", file=out)
    else:
        print(f"    {'(no linear-attention layers)':<30}no consumer reads the stamp", file=out)
    layout = f"layout={loaded.shared_experts_fusion.layout.value}"
    print(f"    {'SharedExpertsFusionDecision':<30}{layout:<20}{loaded.fusion_provenance}", file=out)
    if loaded.fusion.has_hook:
        answer = "None (may fuse)" if loaded.fusion.reason is None else repr(loaded.fusion.reason)
        print(f"    {'':<30}{FUSION_HOOK}: {answer}", file=out)
    else:
        print(f"    {'':<30}no {FUSION_HOOK}: the loader's default", file=out)
    report = loaded.report
    weights = f"{len(report.loaded)} loaded, {len(report.missing)} missing, {len(report.unused)} unused"
    if report.missing or report.unused:
        weights += " (checkpoint saved in the other layout: shared-expert weights lost)"
    print(f"    {'weights':<30}{weights}", file=out)


def print_pair(pair: DemoPair, run: PairRun, out: TextIO) -> None:
    result = run.result
    print(
        f"{pair.draft} -> {pair.target}: mean accept length: {result.mean_accept_length:.2f} "
        f"(draft tokens {result.draft_tokens})",
        file=out,
    )
    vocab = run.target.model.config.vocab_size
    expected = pair.expected.format(vocab=vocab, full=result.draft_tokens + 1)
    if not run.draft.loaded.report.clean:
        expected += (
            "; but this draft decided another shared-expert layout than its target and read the target's "
            "checkpoint in it (shared-expert weights lost), so its proposals stop matching"
        )
    print(f"  {expected}", file=out)
    total = sum(len(o) for o in run.greedy)
    if result.outputs == run.greedy:
        print(f"  speculative output equals the target's greedy output ({total} tokens)", file=out)
    else:
        first = next(
            (n, i)
            for n, (a, b) in enumerate(zip(result.outputs, run.greedy))
            for i, (x, y) in enumerate(zip(a, b))
            if x != y
        )
        print(f"  speculative output DIFFERS from greedy: prompt {first[0]}, token {first[1]}", file=out)
    timer = result.timer
    parts = [f"prefill {1e3 * timer.seconds[Phase.PREFILL]:.1f} ms"]
    for phase in (Phase.DRAFT, Phase.VERIFY, Phase.COMMIT):
        parts.append(f"{phase.value} {1e3 * timer.seconds[phase] / max(1, timer.calls[phase]):.2f} ms/step")
    seconds = sum(timer.seconds.values())
    print(f"  time: {', '.join(parts)} ({result.steps} steps, {total / seconds:.0f} tokens/s)", file=out)


def print_parity(out: TextIO) -> None:
    report = check_draft_hooks(models.ARCHS)
    if report.offenders:
        print(
            f"parity draft_hooks: {len(report.offenders)} offender(s) among {len(report.pairs)} pairs",
            file=out,
        )
        for offender in report.offenders:
            print(f"  {offender}", file=out)
    else:
        print(f"parity draft_hooks: {len(report.pairs)} draft/target pairs answer the loader alike", file=out)


# --------------------------------------------------------------------------------------------- command line


@contextmanager
def _cpu_threads(count: int) -> Iterator[None]:
    threads = torch.get_num_threads()
    torch.set_num_threads(count)
    try:
        yield
    finally:
        torch.set_num_threads(threads)


def _count(least: int) -> Callable[[str], int]:
    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"not a whole number: {text!r}") from None
        if value < least:
            raise argparse.ArgumentTypeError(f"must be at least {least}, got {value}")
        return value

    return parse


def _lengths(text: str) -> list[int]:
    parse = _count(1)
    try:
        return [parse(part) for part in text.split(",")]
    except argparse.ArgumentTypeError as exc:
        raise argparse.ArgumentTypeError(f"comma-separated prompt lengths, each {exc}") from None


def _device(text: str) -> torch.device:
    try:
        device = torch.device(text)
    except RuntimeError:
        raise argparse.ArgumentTypeError(f"not a device: {text!r} (cpu or cuda)") from None
    if device.type not in ("cpu", "cuda"):
        raise argparse.ArgumentTypeError(f"{text!r}: the demo runs on cpu or cuda")
    if device.type == "cuda" and not torch.cuda.is_available():
        raise argparse.ArgumentTypeError(f"{text!r}: no CUDA device here (torch {torch.__version__})")
    return device


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m stampgen.kernels.runtime.demo", description=__doc__.split("\n", 1)[0]
    )
    parser.add_argument("--device", type=_device, default="cpu", help="cpu or cuda (default: cpu)")
    parser.add_argument("--dtype", choices=sorted(DTYPES), default="float32")
    parser.add_argument(
        "--backend", default="torch", help="--linear-attn-backend (default: torch, the reference)"
    )
    parser.add_argument("--decode-backend", help="--linear-attn-decode-backend")
    parser.add_argument("--prefill-backend", help="--linear-attn-prefill-backend")
    parser.add_argument(
        "--verify-backend",
        help="--linear-attn-verify-backend (default: the backend, unless "
        "it is triton or flashinfer, whose verify the rules choose)",
    )
    parser.add_argument("--draft-tokens", type=_count(1), default=4, metavar="D")
    parser.add_argument(
        "--new-tokens", type=_count(1), default=24, metavar="N", help="tokens generated per prompt"
    )
    parser.add_argument(
        "--prompt-lengths", type=_lengths, default=[5, 9, 13], help="comma-separated (default: 5,9,13)"
    )
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument(
        "--pair", action="append", metavar="DRAFT", help="run only this draft's pair (repeatable)"
    )
    parser.add_argument(
        "--without-hook",
        action="append",
        default=[],
        metavar="CLASS",
        help=f"remove {FUSION_HOOK} from this entry class first (repeatable)",
    )
    parser.add_argument("--disable-shared-experts-fusion", action="store_true")
    parser.add_argument(
        "--enforce-shared-experts-fusion",
        action="store_true",
        help="the DeepSeek-V4 config allows fusion (its hook then answers None)",
    )
    parser.add_argument(
        "--warmup", type=_count(0), help="untimed speculative runs first (default: 1 on cuda, 0 on cpu)"
    )
    return parser


def main(argv: Sequence[str] | None = None, out: TextIO | None = None) -> int:
    """Run the demo; 0 when it ran, 2 on bad arguments or when the flags ask for something the rules, the
    kernels or this machine refuse (one line on stderr naming why)."""
    out = out or sys.stdout
    parser = _parser()
    args = parser.parse_args(argv)
    try:
        return _run(args, out)
    except REFUSALS as exc:
        print(f"{parser.prog}: error: {type(exc).__name__}: {exc}", file=sys.stderr)
        return 2


def _run(args: argparse.Namespace, out: TextIO) -> int:
    device = args.device
    dtype = DTYPES[args.dtype]
    pairs = [p for p in PAIRS if not args.pair or p.draft in args.pair]
    if not pairs:
        print(f"no pair with draft {args.pair}; drafts: {', '.join(p.draft for p in PAIRS)}", file=sys.stderr)
        return 2
    lengths = args.prompt_lengths
    generator = torch.Generator().manual_seed(args.seed)
    loader_config = LoaderConfig(disable_shared_experts_fusion=args.disable_shared_experts_fusion)
    warmup = args.warmup if args.warmup is not None else (1 if device.type == "cuda" else 0)
    with ExitStack() as stack:
        if device.type == "cpu":
            stack.enter_context(_cpu_threads(1))  # tiny ops: one thread is fastest, and never stalls
        for name in args.without_hook:
            try:
                stack.enter_context(without_hook(name))
            except ValueError as exc:
                print(f"--without-hook: {exc}", file=sys.stderr)
                return 2
            print(f"removed {FUSION_HOOK} from {name}", file=out)
        print_parity(out)
        print(
            f"{len(lengths)} prompts of {'/'.join(map(str, lengths))} tokens (+1 padding row), "
            f"{args.new_tokens} new tokens each, on {device.type} in {args.dtype}",
            file=out,
        )
        for number, pair in enumerate(pairs, 1):
            hf_config = pair.config(enforce_shared_experts_fusion=args.enforce_shared_experts_fusion)
            if hf_config.linear_attn_op == "lightning":
                hf_config = hf_config.replace(lightning_kernel_backend=lightning_kernel_backend(args.backend))
            prompts = [
                torch.randint(1, hf_config.vocab_size, (n,), generator=generator).tolist() for n in lengths
            ]
            launch_facts, runner_facts = device_facts(device, hf_config)
            print(f"\n== process {number}: {pair.target} + {pair.draft}", file=out)
            run = run_pair(
                pair,
                process_config=process_config_for(args, pair),
                launch_facts=launch_facts,
                runner_facts=runner_facts,
                hf_config=hf_config,
                prompts=prompts,
                max_new_tokens=args.new_tokens,
                draft_tokens=args.draft_tokens,
                seed=args.seed,
                loader_config=loader_config,
                device=device,
                dtype=dtype,
                warmup=warmup,
            )
            print_runner(run.target, out)
            print_runner(run.draft, out)
            print_pair(pair, run, out)
    return 0


if __name__ == "__main__":
    logging.basicConfig(level=logging.WARNING, format="%(levelname)s %(name)s: %(message)s")
    sys.exit(main())
