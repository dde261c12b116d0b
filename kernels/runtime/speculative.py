"""Greedy speculative decoding over the tiny models, and the plain greedy decoding it must equal.

One step for a batch of sequences (rows; a row without a sequence is padding, state index ``-1``):

1. **draft** — the draft runner extends its cache with what the target committed last step, then proposes
   ``D`` tokens greedily (its extra ``D - 1`` decode steps are tentative and rolled back);
2. **verify** — the target scores ``D + 1`` tokens per row, ``[t0, d1, ..., dD]`` (``t0``: the last
   committed token, which the target has not seen yet), with the verify kernel of its linear-attention
   layers (GDN, KDA or lightning): the state pool is only read, and the state after every verified token
   is kept aside (``intermediate_states``);
3. **commit** — row ``n`` keeps ``a`` draft tokens (the longest prefix the target's own argmax agrees
   with) and the target's next token (the bonus): ``a + 1`` tokens, SGLang's accept length, between 1 and
   ``D + 1``. Its linear-attention slots take the intermediate state at the last kept token, its conv
   state (GDN, KDA) the window there, and its KV cache is truncated to what it kept.

Greedy verification makes the output exactly the target's greedy output, whatever the draft proposes:
:func:`generate_greedy` is the reference, and the tests hold the two equal token for token. The draft only
decides how many tokens each step commits — which is where a draft with garbled weights shows.
"""

from __future__ import annotations

import enum
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

import torch

from stampgen.kernels.runtime.layers import (
    ForwardBatch,
    ForwardMode,
    LayerType,
    MTPDraftModel,
    RunnerPools,
)
from stampgen.kernels.runtime.loader import LoadedModel, LoaderConfig, load_model

__all__ = [
    "Drafter",
    "build_worker",
    "ModelWorker",
    "Phase",
    "PhaseTimer",
    "SpeculativeResult",
    "generate_greedy",
    "generate_speculative",
]

PAD_TOKEN = 0


class Phase(str, enum.Enum):
    """The timed phases of speculative decoding."""

    PREFILL = "prefill"
    DRAFT = "draft"
    VERIFY = "verify"
    COMMIT = "commit"


class PhaseTimer:
    """Wall time per phase; on a GPU every phase is bracketed by ``torch.cuda.synchronize``."""

    def __init__(self, device: torch.device | str) -> None:
        self.cuda = torch.device(device).type == "cuda"
        self.seconds = {phase: 0.0 for phase in Phase}
        self.calls = {phase: 0 for phase in Phase}

    @contextmanager
    def __call__(self, phase: Phase) -> Iterator[None]:
        if self.cuda:
            torch.cuda.synchronize()
        start = time.perf_counter()
        try:
            yield
        finally:
            if self.cuda:
                torch.cuda.synchronize()
            self.seconds[phase] += time.perf_counter() - start
            self.calls[phase] += 1


class ModelWorker:
    """One runner at run time: its loaded model, its linear-attention consumer, and its pools.

    ``linear_attn`` is what ``attn_backend_wrapper`` returned for the runner; a model with linear-attention
    layers (GDN, KDA, lightning) needs it (its layers call nothing else). Rows are token lists, ``None`` for
    padding.
    """

    def __init__(
        self,
        loaded: LoadedModel,
        linear_attn: Any,
        *,
        slots: int,
        max_len: int,
        device: torch.device | str,
        dtype: torch.dtype,
    ) -> None:
        model = loaded.model
        if LayerType.LINEAR_ATTENTION in model.layer_types:
            op = model.config.linear_attn_op
            if not hasattr(linear_attn, "verify") or getattr(linear_attn, "op", op) != op:
                label = {"gdn": "GDN", "kda": "KDA"}.get(op, op)
                raise ValueError(
                    f"runner {loaded.stamps.name!r}: {type(model).__name__} has {label} layers, but the "
                    f"runner's linear-attention consumer is {linear_attn!r} (is its entry class's family "
                    f"{op}?)"
                )
        self.loaded = loaded
        self.model = model
        self.linear_attn = linear_attn
        self.device = torch.device(device)
        self.pools = RunnerPools(
            model.config, model.layer_types, slots=slots, max_len=max_len, device=device, dtype=dtype
        )
        self.reads_target_hidden = isinstance(model, MTPDraftModel)

    @property
    def name(self) -> str:
        return self.loaded.stamps.name

    def forward(
        self,
        mode: ForwardMode,
        slots: Sequence[int],
        rows: Sequence[Sequence[int] | None],
        *,
        hidden_in: Sequence[torch.Tensor | None] | None = None,
        pad_len: int = 1,
    ) -> tuple[torch.Tensor, torch.Tensor, ForwardBatch]:
        """One pass over ``rows`` (row ``n`` in slot ``slots[n]``; ``None``: padding, ``pad_len`` dummy
        tokens in slot ``-1``). Returns logits ``[T, vocab]``, hidden ``[T, hidden]`` and the batch.

        Prefill and decode advance each slot's length; verify leaves it to :meth:`commit`.
        """
        row_slots = [slot if row is not None else -1 for slot, row in zip(slots, rows)]
        tokens = [list(row) if row is not None else [PAD_TOKEN] * pad_len for row in rows]
        batch = ForwardBatch(
            mode=mode,
            slots=row_slots,
            tokens_per_row=[len(t) for t in tokens],
            prefix_lens=[self.pools.seq_lens[s] if s >= 0 else 0 for s in row_slots],
            pools=self.pools,
            linear_attn=self.linear_attn,
            device=self.device,
            verify_tokens=len(tokens[0]) if mode is ForwardMode.VERIFY else None,
        )
        input_ids = torch.tensor([t for row in tokens for t in row], dtype=torch.long, device=self.device)
        with torch.no_grad():
            if self.reads_target_hidden:
                logits, hidden = self.model(input_ids, batch, hidden_in=self._hidden_in(batch, hidden_in))
            else:
                logits, hidden = self.model(input_ids, batch)
        if mode is not ForwardMode.VERIFY:
            for slot, count in zip(batch.slots, batch.tokens_per_row):
                if slot >= 0:
                    self.pools.seq_lens[slot] += count
        return logits, hidden, batch

    def _hidden_in(
        self, batch: ForwardBatch, hidden_in: Sequence[torch.Tensor | None] | None
    ) -> torch.Tensor:
        size = self.model.config.hidden_size
        dtype = next(self.model.parameters()).dtype
        packed = torch.zeros(batch.num_tokens, size, dtype=dtype, device=self.device)
        for n, rows in enumerate(hidden_in or ()):
            if rows is not None and batch.slots[n] >= 0:
                packed[batch.offsets[n] : batch.offsets[n + 1]] = rows
        return packed

    def commit(self, batch: ForwardBatch, accepted: Sequence[int]) -> None:
        """After verify: keep ``accepted[n] + 1`` verified tokens of each real row (GDN states, conv
        states, KV length)."""
        commit = getattr(self.model, "commit", None)
        if commit is not None:
            commit(batch, torch.tensor(accepted, dtype=torch.long, device=self.device))
        for slot, kept in zip(batch.slots, accepted):
            if slot >= 0:
                self.pools.seq_lens[slot] += kept + 1


def build_worker(
    name: str,
    model_cls: type,
    *,
    process_config: Any,
    runner_facts: Mapping[str, Any],
    hf_config: Any,
    checkpoint: Mapping[str, torch.Tensor],
    target: ModelWorker | None = None,
    loader_config: LoaderConfig | None = None,
    device: torch.device | str = "cpu",
    dtype: torch.dtype = torch.float32,
    slots: int = 8,
    max_len: int = 128,
) -> ModelWorker:
    """A runner as an engine builds one: the ``ModelRunner``, its model through the loader (fusion stamp,
    layers, weights), its linear-attention stamp and consumer (``attn_backend_wrapper``), its pools.

    ``runner_facts`` are the device's facts (everything but ``family``, which comes from the class). A
    draft is built with its ``target``'s worker.
    """
    from stampgen.kernels.runtime.runner import ModelRunner, attn_backend_wrapper, runner_facts_for

    runner = ModelRunner(
        name,
        model_cls=model_cls,
        runner_facts=runner_facts_for(model_cls, **runner_facts),
        process_config=process_config,
        is_draft=target is not None,
    )
    loaded = load_model(
        runner,
        hf_config=hf_config,
        checkpoint=checkpoint,
        loader_config=loader_config,
        target=None if target is None else target.loaded,
        device=device,
        dtype=dtype,
    )
    # lightning's kernel comes from the model config, not from the stamp
    linear_attn = attn_backend_wrapper(
        runner, lightning_kernel_backend=getattr(hf_config, "lightning_kernel_backend", "triton")
    )
    return ModelWorker(loaded, linear_attn, slots=slots, max_len=max_len, device=device, dtype=dtype)


def _last(batch: ForwardBatch, values: torch.Tensor) -> list[torch.Tensor | None]:
    """Each row's last token's row of ``values`` (None for padding or empty rows)."""
    out: list[torch.Tensor | None] = []
    for n, slot in enumerate(batch.slots):
        end = batch.offsets[n + 1]
        out.append(values[end - 1] if slot >= 0 and end > batch.offsets[n] else None)
    return out


class Drafter:
    """Proposes draft tokens from a draft runner: an MTP / NextN layer (which reads the target's hidden
    states) or a model that holds the target's weights (self-speculation, DSpark here).

    Per row it keeps what the target committed that the draft has not read yet (``pending``), and after
    an extend the first draft token it predicts.
    """

    def __init__(self, worker: ModelWorker) -> None:
        self.worker = worker
        self.pending: dict[int, tuple[list[int], torch.Tensor | None]] = {}
        self.first: dict[int, tuple[int, torch.Tensor]] = {}

    def start(self, row: int, prompt: Sequence[int], first_token: int, prompt_hidden: torch.Tensor) -> None:
        """A new sequence: the prompt, the target's first token, and the target's hidden states of the
        prompt. An MTP pairs hidden ``i`` with token ``i + 1``; a full model reads every token."""
        if self.worker.reads_target_hidden:
            self.pending[row] = ([*prompt[1:], first_token], prompt_hidden)
        else:
            self.pending[row] = ([*prompt, first_token], None)

    def committed(self, row: int, tokens: Sequence[int], target_hidden: torch.Tensor) -> None:
        """The target kept ``tokens`` (accepted drafts and the bonus); ``target_hidden[j]`` is its hidden
        state at the token before ``tokens[j]``."""
        self.pending[row] = (list(tokens), target_hidden if self.worker.reads_target_hidden else None)

    def extend(self, slots: Sequence[int], active: Sequence[bool]) -> None:
        """Read every active row's pending tokens (they are committed: they stay in the draft's cache)."""
        rows = [self.pending[n][0] if active[n] else None for n in range(len(slots))]
        hidden = [self.pending[n][1] if active[n] else None for n in range(len(slots))]
        logits, hidden_out, batch = self.worker.forward(
            ForwardMode.PREFILL, slots, rows, hidden_in=hidden, pad_len=0
        )
        for n, (row_logits, row_hidden) in enumerate(zip(_last(batch, logits), _last(batch, hidden_out))):
            if row_logits is not None and row_hidden is not None:
                self.first[n] = (int(row_logits.argmax()), row_hidden)
        for n in range(len(slots)):
            if active[n]:
                del self.pending[n]

    def propose(self, slots: Sequence[int], active: Sequence[bool], count: int) -> list[list[int]]:
        """``count`` draft tokens per active row (empty for the others); the draft's caches are as before."""
        drafts = [[self.first[n][0]] if active[n] else [] for n in range(len(slots))]
        if count > 1:
            snapshot = self.worker.pools.snapshot([s for s, a in zip(slots, active) if a])
            hidden = [self.first[n][1] if active[n] else None for n in range(len(slots))]
            for _ in range(count - 1):
                rows = [[d[-1]] if active[n] else None for n, d in enumerate(drafts)]
                logits, hidden_out, _ = self.worker.forward(
                    ForwardMode.DECODE,
                    slots,
                    rows,
                    hidden_in=[h[None] if h is not None else None for h in hidden],
                )
                chosen = logits.argmax(-1).tolist()
                for n in range(len(slots)):
                    if active[n]:
                        drafts[n].append(chosen[n])
                hidden = [hidden_out[n] if active[n] else None for n in range(len(slots))]
            self.worker.pools.restore(snapshot)
        return drafts


@dataclass
class SpeculativeResult:
    outputs: list[list[int]]  # per prompt, the first max_new_tokens tokens
    accept_lengths: list[int]  # tokens committed per verify step, per row and step: accepted drafts + 1
    draft_tokens: int
    timer: PhaseTimer
    steps: int = 0

    @property
    def mean_accept_length(self) -> float:
        return sum(self.accept_lengths) / len(self.accept_lengths)


def _rows(prompts: Sequence[Sequence[int]], batch_size: int) -> tuple[list[int], int]:
    if batch_size < len(prompts):
        raise ValueError(f"batch_size {batch_size} is smaller than the {len(prompts)} prompts")
    # slot 0 stays empty (a null slot); rows past the prompts are padding
    slots = [n + 1 for n in range(len(prompts))] + [-1] * (batch_size - len(prompts))
    return slots, len(prompts)


def _start(worker: ModelWorker, slots: Sequence[int]) -> None:
    for slot in slots:
        if slot >= 0:
            worker.pools.reset(slot)


def generate_greedy(
    target: ModelWorker,
    prompts: Sequence[Sequence[int]],
    *,
    max_new_tokens: int,
    batch_size: int | None = None,
) -> list[list[int]]:
    """Plain greedy decoding on the target: prefill, then one decode step per token."""
    slots, n_prompts = _rows(prompts, batch_size or len(prompts) + 1)
    _start(target, slots)
    rows: list[list[int] | None] = [list(p) for p in prompts] + [None] * (len(slots) - n_prompts)
    logits, _, batch = target.forward(ForwardMode.PREFILL, slots, rows)
    outputs = [[int(row.argmax())] for row in _last(batch, logits)[:n_prompts] if row is not None]
    while any(len(out) < max_new_tokens for out in outputs):
        step: list[list[int] | None] = [
            [outputs[n][-1]] if n < n_prompts and len(outputs[n]) < max_new_tokens else None
            for n in range(len(slots))
        ]
        chosen = target.forward(ForwardMode.DECODE, slots, step)[0].argmax(-1).tolist()
        for n in range(n_prompts):
            if step[n] is not None:
                outputs[n].append(chosen[n])
    return [out[:max_new_tokens] for out in outputs]


def generate_speculative(
    target: ModelWorker,
    draft: ModelWorker,
    prompts: Sequence[Sequence[int]],
    *,
    max_new_tokens: int,
    draft_tokens: int,
    batch_size: int | None = None,
    timer: PhaseTimer | None = None,
    on_step: Callable[[Mapping[str, Any]], None] | None = None,
) -> SpeculativeResult:
    """Greedy speculative decoding of ``prompts``: ``draft_tokens`` (D) proposals per step, verified by
    the target. Rows past the prompts are padding; a finished sequence's row becomes padding."""
    if draft_tokens < 1:
        raise ValueError("draft_tokens must be at least 1")
    timer = timer or PhaseTimer(target.device)
    slots, n_prompts = _rows(prompts, batch_size or len(prompts) + 1)
    _start(target, slots)
    _start(draft, slots)
    drafter = Drafter(draft)
    active = [n < n_prompts for n in range(len(slots))]
    outputs: list[list[int]] = [[] for _ in range(n_prompts)]
    accept_lengths: list[int] = []

    with timer(Phase.PREFILL):
        rows: list[list[int] | None] = [list(p) for p in prompts] + [None] * (len(slots) - n_prompts)
        logits, hidden, batch = target.forward(ForwardMode.PREFILL, slots, rows)
        for n, row_logits in enumerate(_last(batch, logits)[:n_prompts]):
            assert row_logits is not None
            outputs[n].append(int(row_logits.argmax()))
            begin, end = batch.offsets[n], batch.offsets[n + 1]
            drafter.start(n, prompts[n], outputs[n][0], hidden[begin:end])
        drafter.extend(slots, active)
    steps = 0
    while any(active):
        with timer(Phase.DRAFT):
            if drafter.pending:
                drafter.extend(slots, active)
            drafts = drafter.propose(slots, active, draft_tokens)
        with timer(Phase.VERIFY):
            verify_rows = [[outputs[n][-1], *drafts[n]] if active[n] else None for n in range(len(slots))]
            logits, hidden, batch = target.forward(
                ForwardMode.VERIFY, slots, verify_rows, pad_len=draft_tokens + 1
            )
            predicted = logits.argmax(-1).view(len(slots), draft_tokens + 1).tolist()
        with timer(Phase.COMMIT):
            accepted = [0] * len(slots)
            for n in range(len(slots)):
                if active[n]:
                    while accepted[n] < draft_tokens and drafts[n][accepted[n]] == predicted[n][accepted[n]]:
                        accepted[n] += 1
            target.commit(batch, accepted)
            hidden_rows = hidden.view(len(slots), draft_tokens + 1, -1)
            for n in range(len(slots)):
                if not active[n]:
                    continue
                kept = [*drafts[n][: accepted[n]], predicted[n][accepted[n]]]
                outputs[n].extend(kept)
                accept_lengths.append(len(kept))
                if len(outputs[n]) >= max_new_tokens:
                    active[n] = False
                else:
                    drafter.committed(n, kept, hidden_rows[n, : len(kept)])
        steps += 1
        if on_step is not None:
            on_step({"step": steps, "accepted": accepted, "active": list(active)})
    return SpeculativeResult(
        outputs=[out[:max_new_tokens] for out in outputs],
        accept_lengths=accept_lengths,
        draft_tokens=draft_tokens,
        timer=timer,
        steps=steps,
    )
