"""What our Triton kernels cost an sm_90 SM, found on a CPU: registers, spills, shared memory, occupancy.

    python3 benchmarks/gdn_kernel_resources.py [--only decode,verify,intra,segment,carry,state,gluon_state,gluon_batch,gluon_fused,gate_sums,gluon_intra,kda_intra,kda_state,lightning_output,lightning_gluon,lightning_segment] [--defaults] [--sass DIR] [--listing DIR] [--lines N]

Triton compiles for a GPU it does not have (``triton.compile`` with a ``GPUTarget``), and its wheel
carries ``ptxas`` and ``cuobjdump``; so this runs anywhere Triton is installed, no GPU, no driver. For
each kernel at Qwen3-Next shapes (H=16, HV=32, K=V=128, bf16 q/k/v) and each configuration in
``VARIANTS`` (the defaults first), it prints the registers per thread, the spill bytes, the shared
memory per program, how many programs fit on one H200 SM and what limits them (the GDN kernels at
Qwen3-Next shapes; ``lightning_*``: the lightning prefill's passes at MiniMax's, H = HV = 64), whether
ptxas kept the warpgroup MMAs asynchronous (``wgmma``: ``serial`` where it waits for each before the
next), the counts of warpgroup MMAs (HGMMA), local-memory accesses (spills) and barriers in the SASS,
the instructions of its longest loop (a pass's chunk step: what one step issues per warp; a
warp-specialized kernel's loops, one a partition, on a line below) and of the whole kernel
(``instr``: what a program of a kernel without a loop, as the intra launches, issues per warp).
``--defaults`` keeps each kernel's default row only. ``--lines N`` also lists the N source
lines with the most instructions in that loop (or in the whole kernel if it has none), read from the
line table Triton leaves in the binary: where a step's instructions come from.

Use it before spending GPU time: a variant that spills or fits one program per SM is known before it
is timed. ``--sass DIR`` writes each kernel's SASS and prints a hash of it with names and line info
stripped, so a refactor that must not change the machine code (a shared ``@triton.jit`` helper) can
be checked without a GPU. ``--listing DIR`` writes each kernel's instructions with the source line
of each, which ``ncu_source_summary.py --listing`` joins to Nsight Compute's stall samples of the same
binary. Compare hashes of runs with the same ``--only``: a kernel's SASS can depend
on what the process compiled before it (the state pass after the segment pass differs from the state
pass alone, run after run; a real prefill compiles them in that order, as the full run does).
"""

from __future__ import annotations

import argparse
import hashlib
import os
import re
import subprocess
import sys
import tempfile
from collections import Counter
from pathlib import Path

os.environ.pop("TRITON_INTERPRET", None)  # compile for the GPU even under the test configuration

import triton  # noqa: E402
from triton.backends.compiler import GPUTarget  # noqa: E402
from triton.compiler import ASTSource  # noqa: E402
from triton.experimental.gluon import language as gl  # noqa: E402
from triton.experimental.gluon._runtime import GluonASTSource  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
import benchmarks.checkout  # noqa: E402, F401  (stampgen from this checkout if not installed)
from benchmarks.out_folder import out_dir  # noqa: E402
from stampgen.kernels.gdn import (  # noqa: E402
    chunk_common,
    chunk_config,
    chunk_gluon,
    chunk_gluon_batch,
    chunk_gluon_fused,
    chunk_intra,
    chunk_intra_gluon,
    chunk_state,
    fused_recurrent,
)
from stampgen.kernels.kda import chunk as kda_chunk  # noqa: E402
from stampgen.kernels.lightning import chunk as lightning_chunk  # noqa: E402
from stampgen.kernels.lightning import chunk_gluon as lightning_gluon  # noqa: E402

TARGET = GPUTarget("cuda", 90, 32)
BIN = Path(triton.__file__).parent / "backends" / "nvidia" / "bin"
# One H200 SM (CUDA occupancy rules for cc 9.0).
REGS_PER_SM = 65536
SMEM_PER_SM = 233472
SMEM_PER_PROGRAM_RESERVED = 1024
WARPS_PER_SM = 64
PROGRAMS_PER_SM = 32

H, HV, K, V = 16, 32, 128, 128
BF16, F32, I32, I64P, I64 = "*bf16", "*fp32", "*i32", "*i64", "i64"
SHAPES = dict(H=H, HV=HV, K=K, V=V, BK=K)

# The sm_90 type of every runtime argument of our GDN kernels, by name: one table, not a signature
# per kernel. A ``*_ptr`` argument takes its base name's type; ``stride_*`` arguments are 64-bit.
ARG_TYPES = dict(
    q=BF16,
    k=BF16,
    v=BF16,
    o=BF16,
    t_out=BF16,
    tbeta=BF16,
    g=F32,
    beta=F32,
    gates=F32,
    sums=F32,
    state_pool=F32,
    inter=F32,
    affine=F32,
    start=F32,
    carry=F32,
    state_indices=I32,
    cu_seqlens=I32,
    schedule=I64P,
    n_programs="i32",
    pool_slot_stride=I64,
    n_tokens="i32",
    n_items="i32",
    counter="*i32",
    stamps=I64P,
    stamp_items="i32",
    seg_chunks="i32",
    N="i32",
    D="i32",
    scale="fp32",
    partial=F32,
    seg_offsets=I32,
    offsets=I32,
    q_out=BF16,
    k_out=BF16,
    w_out=BF16,
    u_out=BF16,
    p_out=BF16,
    d_out=F32,
    gam_scratch=F32,
    rows_scratch=F32,
    redo=I32,
    q_in=BF16,
    k_in=BF16,
    w_in=BF16,
    u_in=BF16,
    p_in=BF16,
    d_in=F32,
)

# The lightning prefill's Triton passes at MiniMax's heads: bf16, TMA tiles, a segment of 16 chunks (4k
# tokens' default for the Triton output pass)
_LIGHTNING = dict(H=64, HV=64, K=128, V=128, BK=128, BC=64, SEG_CHUNKS=16, LOW=True, TMA=True)
# The KDA prefill at Kimi-Linear's heads (H = HV = 32), bf16
_KDA = dict(H=32, HV=32, K=128, V=128, BK=128, C=64)
# name -> (kernel, values of its constexpr arguments that every variant shares)
KERNELS = {
    "decode": (fused_recurrent._gdn_decode_kernel, SHAPES),
    "verify": (fused_recurrent._gdn_verify_kernel, SHAPES),
    "intra": (
        chunk_intra._gdn_chunk_intra_kernel,
        # 16-bit inputs: the solve on fp16 operands, as ``chunk_intra._intra_meta`` sets it for them
        dict(
            H=H,
            HV=HV,
            K=K,
            BK=K,
            BN=2,
            PREC="tf32",
            IN_PREC=None,
            SOLVE_16=True,
            LAUNCH_DEPENDENTS=False,
            SCHEDULE_ONLY=False,
        ),
    ),
    "segment": (chunk_state._gdn_chunk_segment_kernel, SHAPES | dict(BN=2, IN_PREC=None)),
    "state": (chunk_state._gdn_chunk_state_kernel, SHAPES | dict(BN=2, IN_PREC=None, TMA=True)),
    "carry": (chunk_state._gdn_chunk_carry_kernel, dict(HV=HV, K=K, V=V, BK=K, BN=2, PREC="tf32")),
    "gluon_state": (chunk_gluon._gdn_gluon_state_kernel, dict(H=H, HV=HV, K=K, V=V, PDL=False, P_IN=False)),
    "gluon_batch": (chunk_gluon_batch._gdn_gluon_batch_state_kernel, dict(H=H, HV=HV, K=K, V=V)),
    "gluon_fused": (
        chunk_gluon_fused._gdn_gluon_fused_state_kernel,
        dict(H=H, HV=HV, K=K, V=V, BV=chunk_gluon_fused.BLOCK_V),
    ),
    "gate_sums": (
        chunk_gluon_fused._gate_sums_kernel,
        dict(HV=HV, BLOCK_HV=triton.next_power_of_2(HV), BN=2),
    ),
    "gluon_intra": (
        chunk_intra_gluon._gdn_gluon_intra_kernel,
        dict(H=H, HV=HV, K=K, BN=2, STORE_P=False, HEADS_INNER=False),
    ),
    # K̃ by chunk, as for the state pass's TMA tiles
    "kda_intra": (
        kda_chunk._kda_intra_kernel,
        _KDA | dict(BV=64, PREC="tf32", IN_PREC=None, SOLVE_16=True, K_BY_CHUNK=True),
    ),
    "kda_state": (kda_chunk._kda_state_kernel, _KDA | dict(IN_PREC=None, TMA=True)),
    "lightning_output": (lightning_chunk._lightning_output_kernel, _LIGHTNING),
    "lightning_segment": (
        lightning_chunk._lightning_segment_kernel,
        _LIGHTNING | dict(COPY_START=True, START_ONLY=False, LAUNCH_DEPENDENTS=False),
    ),
    "lightning_gluon": (
        lightning_gluon._lightning_gluon_output_kernel,
        # its own segments at 4k tokens: one wave of one program an SM (64 chunks, the whole sequence)
        dict(
            H=64,
            HV=64,
            K=128,
            V=128,
            PDL=False,
            SEG_CHUNKS=lightning_chunk.launch_config(
                4096, 64, 128, 128, gluon=True, interpret=False
            ).seg_chunks,
        ),
    ),
}


# A tensor-descriptor argument: (the tensor it views, the constexpr or number of its tile's columns);
# its tiles are 64 rows (a chunk).
DESCRIPTORS = dict(
    q_desc=("q", "BK"),
    k_desc=("k", "BK"),
    v_desc=("v", "BV"),
    t_desc=("tbeta", 64),
    o_desc=("o", "BV"),
    w_desc=("w_in", "BK"),
    u_desc=("u_in", "BV"),
    p_desc=("p_in", 64),
)


def signature(fn, values: dict | None = None) -> dict:
    """The types of ``fn``'s runtime arguments, from ARG_TYPES (and DESCRIPTORS, whose tile widths
    come from the constexpr ``values``)."""
    types = {}
    for param in fn.params:
        if param.is_constexpr:
            continue
        base = param.name.removesuffix("_ptr")
        if param.name in DESCRIPTORS:
            tensor, cols = DESCRIPTORS[param.name]
            values = values or {}
            cols = values.get(cols, values.get("K") if cols == "BK" else cols)
            dtype = ARG_TYPES[tensor].lstrip("*")
            types[param.name] = f"tensordesc<{dtype}[64, {cols}]>"
            if fn.is_gluon():  # a Gluon descriptor's type names its shared-memory layout too
                layout = gl.NVMMASharedLayout.get_default_for(
                    [64, cols], getattr(gl, {"bf16": "bfloat16"}[dtype])
                )
                types[param.name] = f"tensordesc<{dtype}[64, {cols}],{layout}>"
        elif param.name.startswith("stride_"):
            types[param.name] = I64
        elif base in ARG_TYPES:
            types[param.name] = ARG_TYPES[base]
        else:
            raise KeyError(f"{fn.__name__}: argument {param.name!r} has no type in ARG_TYPES; add it there")
    return types


def constexpr_gaps(fn, values: dict) -> set:
    """Constexpr arguments of ``fn`` without a value, and values for names that are not one."""
    wanted = {param.name for param in fn.params if param.is_constexpr}
    return wanted ^ set(values)


_default = chunk_config.launch_config(4096, 1, HV, V, interpret=False)
_batch = chunk_config.launch_config(16 * 2048, 16, HV, V, interpret=False)  # chunk_gluon_batch's
_lightning = lightning_chunk.launch_config(4096, 64, 128, 128, interpret=False)
_kda = kda_chunk.LaunchConfig()
# (kernel, label, meta-parameters, num_warps, num_stages[, compile options]); the first row of each
# kernel is its default.
# The fused pass's default constants; its rows vary the form (one item a program or persistent), K and
# the source of Tβ
_FUSED = dict(
    STAGES=_batch.gluon_batch_stages,
    WORKER_REGS=chunk_gluon_fused.WORKER_REGS,
    MAKE_TBETA=chunk_config.worker_makes_tbeta(_batch),
    STAMPS=False,
    PREFETCH=True,  # the pool's rows 16-byte aligned, as every contiguous pool's are
)
VARIANTS = [
    ("decode", "default", dict(BV=8), 1, 3),
    ("verify", "default", dict(BV=4), 1, 3),
    ("intra", "default", {}, _default.intra_warps, 1, dict(maxnreg=_default.intra_maxnreg)),
    ("intra", "maxnreg 168", {}, _default.intra_warps, 1, dict(maxnreg=168)),
    ("intra", "no register cap", {}, _default.intra_warps, 1),
    ("intra", "8 warps", {}, 8, 1),
    (
        "intra",
        "PDL primary",
        dict(LAUNCH_DEPENDENTS=True),
        _default.intra_warps,
        1,
        dict(maxnreg=_default.intra_maxnreg),
    ),
    # the solve's dots on tf32 operands, as for fp32 inputs' ieee (and for 16-bit ones before the
    # 16-bit solve: bf16 before 906032d, fp16 before RESULTS.md's "GDN prefill precision")
    (
        "intra",
        "tf32 solve",
        dict(SOLVE_16=False),
        _default.intra_warps,
        1,
        dict(maxnreg=_default.intra_maxnreg),
    ),
    (
        "segment",
        "default",
        dict(BV=_default.block_v),
        _default.state_warps,
        _default.segment_stages,
        dict(maxnreg=_default.segment_maxnreg),
    ),
    ("segment", "no register cap", dict(BV=_default.block_v), _default.state_warps, 2),
    ("segment", "1 stage", dict(BV=_default.block_v), _default.state_warps, 1),
    ("segment", "BV=32", dict(BV=32), _default.state_warps, _default.segment_stages),
    (
        "segment",
        "3 stages",
        dict(BV=_default.block_v),
        _default.state_warps,
        3,
        dict(maxnreg=_default.segment_maxnreg),
    ),
    ("state", "default", dict(BV=_default.block_v), 4, _default.state_stages),
    ("state", "1 stage", dict(BV=_default.block_v), 4, 1),
    ("state", "3 stages", dict(BV=_default.block_v), 4, 3),
    ("state", "BV=32, 2 stages", dict(BV=32), 4, 2),
    ("state", "maxnreg 168", dict(BV=_default.block_v), 4, 2, dict(maxnreg=168)),
    ("carry", "default", dict(BV=_default.block_v), _default.carry_warps, _default.carry_stages),
    ("carry", "2 stages", dict(BV=_default.block_v), _default.carry_warps, 2),
    ("carry", "8 warps", dict(BV=_default.block_v), 8, _default.carry_stages),
    ("gluon_state", "default", dict(BV=chunk_gluon.BLOCK_V), 4, 1),
    ("gluon_state", "PDL after intra", dict(BV=chunk_gluon.BLOCK_V, PDL=True), 4, 1),
    ("gluon_state", "P from the intra launch", dict(BV=chunk_gluon.BLOCK_V, P_IN=True), 4, 1),
    ("gluon_batch", "default", dict(BV=_batch.gluon_batch_block_v, STAGES=_batch.gluon_batch_stages), 8, 1),
    ("gluon_batch", "2 stages", dict(BV=_batch.gluon_batch_block_v, STAGES=2), 8, 1),
    ("gluon_batch", "BV=64, 4 warps", dict(BV=64, STAGES=_batch.gluon_batch_stages), 4, 1),
    ("gluon_intra", "PDL primary", dict(LAUNCH_DEPENDENTS=True, FUSED_MAKES_LAST=False), 4, 1),
    ("gluon_intra", "non-last segments", dict(LAUNCH_DEPENDENTS=False, FUSED_MAKES_LAST=True), 4, 1),
    (
        "gluon_intra",
        "P stored",
        dict(LAUNCH_DEPENDENTS=False, FUSED_MAKES_LAST=False) | dict(STORE_P=True),
        4,
        1,
    ),
    (
        "gluon_intra",
        "P, heads inner",
        dict(LAUNCH_DEPENDENTS=False, FUSED_MAKES_LAST=False, STORE_P=True, HEADS_INNER=True),
        4,
        1,
    ),
    ("gate_sums", "default", {}, 4, 1),
    ("gluon_fused", "default", dict(_FUSED, PERSISTENT=False), 8, 1),
    ("gluon_fused", "persistent", dict(_FUSED, PERSISTENT=True), 8, 1),
    ("gluon_fused", "K=64", dict(_FUSED, K=64, PERSISTENT=True), 8, 1),
    # with gdn_fused_timeline.py's time stamps at each item's start and end
    ("gluon_fused", "stamped", dict(_FUSED, PERSISTENT=True, STAMPS=True), 8, 1),
    (
        "gluon_fused",
        "Tβ loaded" if _FUSED["MAKE_TBETA"] else "Tβ by the worker",
        dict(_FUSED, MAKE_TBETA=not _FUSED["MAKE_TBETA"], PERSISTENT=True),
        8,
        1,
    ),
    ("kda_intra", "default", dict(BKB=_kda.key_block, LEVELS=False), _kda.intra_warps, 1),
    ("kda_intra", "key block 128", dict(BKB=128, LEVELS=False), _kda.intra_warps, 1),
    ("kda_intra", "8 warps", dict(BKB=_kda.key_block, LEVELS=False), 8, 1),
    ("kda_intra", "levels", dict(BKB=_kda.key_block, LEVELS=True), _kda.intra_warps, 1),
    (
        "kda_intra",
        "K̃ by token",
        dict(BKB=_kda.key_block, LEVELS=False, K_BY_CHUNK=False),
        _kda.intra_warps,
        1,
    ),
    ("kda_state", "default", dict(BV=32), _kda.warps, _kda.stages),
    ("kda_state", "BV=16", dict(BV=16), _kda.warps, _kda.stages),
    ("kda_state", "2 stages", dict(BV=32), _kda.warps, 2),
    ("kda_state", "BV=64, 8 warps", dict(BV=64), 8, _kda.stages),
    ("kda_state", "BV=64", dict(BV=64), _kda.warps, _kda.stages),
    ("kda_state", "pointer loads", dict(BV=32, TMA=False), _kda.warps, _kda.stages),
    (
        "lightning_output",
        "default",
        dict(BV=_lightning.block_v, TMA_STORE=True),
        _lightning.warps,
        _lightning.stages,
    ),
    ("lightning_output", "8 warps", dict(BV=_lightning.block_v, TMA_STORE=True), 8, _lightning.stages),
    ("lightning_output", "pointer stores", dict(BV=_lightning.block_v, TMA_STORE=False), _lightning.warps, 2),
    ("lightning_gluon", "default", dict(BV=64), 4, 1),
    ("lightning_gluon", "BV=32", dict(BV=32), 4, 1),
    ("lightning_gluon", "PDL dependent", dict(BV=64, PDL=True), 4, 1),
    (
        "lightning_segment",
        "default",
        dict(BV=_lightning.segment_block_v),
        _lightning.segment_warps,
        _lightning.segment_stages,
    ),
    (
        "lightning_segment",
        "PDL primary",
        dict(BV=_lightning.segment_block_v, COPY_START=False, LAUNCH_DEPENDENTS=True),
        _lightning.segment_warps,
        _lightning.segment_stages,
    ),
]


def _aligned(fn, signature: dict) -> dict:
    """The divisibility a real launch specializes on: torch's buffers (every pointer) and the strides of
    Qwen3-Next shapes are multiples of 16. Without it Triton cannot vectorize a load and keeps one address
    per element (the register counts double and the spills grow tenfold)."""
    return {
        (fn.arg_names.index(name),): [["tt.divisibility", 16]]
        for name, kind in signature.items()
        if kind.startswith("*") or "stride" in name
    }


def _ptxas_info(ptx: str, workdir: Path, name: str) -> tuple[int, int, bool, Path]:
    """(registers per thread, spill bytes stored + loaded, whether ptxas serialized the kernel's wgmma)
    from ptxas -v, and the cubin it wrote. Serialized (ptxas's "Potential Performance Loss" note, e.g.
    C7512 for too few registers, C7514 for an accumulator read while its product may be in flight)
    means ptxas waits for each wgmma k-step before issuing the next: the products of a step no longer
    overlap each other or the code between them, whatever the kernel's own waits say."""
    ptx_path, cubin = workdir / f"{name}.ptx", workdir / f"{name}.cubin"
    ptx_path.write_text(ptx)
    arch = re.search(r"\.target\s+(sm_\w+)", ptx).group(1)
    done = subprocess.run(
        [BIN / "ptxas", "-v", "--gpu-name", arch, ptx_path, "-o", cubin], capture_output=True, text=True
    )
    if done.returncode != 0:
        sys.exit(f"{name}: ptxas failed ({done.returncode}):\n{done.stderr.strip()}")
    out = done.stderr
    regs = int(re.search(r"Used (\d+) registers", out).group(1))
    spills = sum(int(n) for n in re.findall(r"(\d+) bytes spill (?:stores|loads)", out))
    serialized = re.search(r"wgmma\.mma_async instructions are serialized", out) is not None
    return regs, spills, serialized, cubin


def _listing(cubin: Path) -> list[tuple[int, str, tuple[str, int] | None]]:
    """(address, opcode, (file, line) or None) of every SASS instruction, from ``nvdisasm -g``; branch
    targets as addresses in place of labels (the opcode field keeps them: ``BRA@<address>``)."""
    text = subprocess.run(
        [BIN / "nvdisasm", "-g", "-c", cubin], capture_output=True, text=True, check=True
    ).stdout
    rows, labels, pending, where = [], {}, [], None
    for line in text.splitlines():
        if m := re.search(r'//## File "([^"]+)", line (\d+)', line):
            where = (Path(m.group(1)).name, int(m.group(2)))
        elif m := re.match(r"\s*(\.L_x_\d+):", line):
            pending.append(m.group(1))
        elif m := re.match(r"\s*/\*([0-9a-f]{4,})\*/\s*(?:@!?U?P\w+\s+)?([A-Z0-9_]+)(.*)", line):
            addr = int(m.group(1), 16)
            labels.update((label, addr) for label in pending)
            pending = []
            target = re.search(r"(\.L_x_\d+)", m.group(3)) if m.group(2) == "BRA" else None
            rows.append((addr, m.group(2) + (f"@{target.group(1)}" if target else ""), where))
    return [
        (a, op.split("@")[0] + (f"@{labels.get(op.split('@')[1], -1)}" if "@" in op else ""), w)
        for a, op, w in rows
    ]


def _listing_text(listing) -> str:
    """A listing as ``ncu_source_summary.py --listing`` reads it: address, opcode and source line (file:line,
    or ``?``), tab-separated, an instruction a line."""
    return "".join(f"{a:#x}\t{op}\t{f'{w[0]}:{w[1]}' if w else '?'}\n" for a, op, w in listing)


def _spans(listing) -> set[tuple[int, int]]:
    """Every loop's span (a backward branch's target, the branch). A span with an ``EXIT`` in it is no
    loop: ptxas places the retry of a TMA barrier wait after the kernel's end, and its branch back into
    the body would otherwise pass for the longest loop."""
    exits = [a for a, op, _ in listing if op == "EXIT"]
    branches = [(int(op.split("@")[1]), a) for a, op, _ in listing if "@" in op]
    return {(lo, hi) for lo, hi in branches if 0 <= lo < hi and not any(lo <= e <= hi for e in exits)}


def _inside(inner: tuple[int, int], outer: tuple[int, int]) -> bool:
    return inner != outer and outer[0] <= inner[0] and inner[1] <= outer[1]


def _step_loops(listing, share: int = 20) -> list[tuple[int, int]]:
    """The innermost loops of at least 1/``share`` of the kernel, in address order: a kernel's steps (a
    warp-specialized kernel's partitions each have theirs; a persistent kernel's item loop holds them).
    Not the outermost loops, which also count what runs once an item or a program, nor the waits' retry
    loops inside a step, too short to count."""
    big = {
        s for s in _spans(listing) if sum(s[0] <= a <= s[1] for a, _, _ in listing) * share >= len(listing)
    }
    return sorted(s for s in big if not any(_inside(o, s) for o in big))


def _step_rows(listing, share: int = 20) -> list[list]:
    """Each step loop's instructions (``_step_loops``), in address order."""
    return [[row for row in listing if lo <= row[0] <= hi] for lo, hi in _step_loops(listing, share)]


def _longest_loop(listing, share: int = 20):
    """The instructions of the longest step loop (``_step_loops``), or []."""
    return max(_step_rows(listing, share), key=len, default=[])


# The modules whose source lines ``--lines`` shows: where the kernels and their helpers are.
SOURCES = (
    chunk_common,
    chunk_intra,
    chunk_state,
    chunk_gluon,
    chunk_intra_gluon,
    fused_recurrent,
    kda_chunk,
    lightning_chunk,
)


def _print_lines(rows, top: int, scope: str, kernel_file: str) -> None:
    """The ``top`` source lines with the most SASS instructions among ``rows``, with the line's text.
    The line table names files without their folder, so a name several modules share (``chunk.py``)
    is read as the kernel's own module."""
    counts = Counter(where for _, _, where in rows if where)
    paths = [Path(kernel_file), *(Path(m.__file__) for m in SOURCES)]
    for (file, line), n in counts.most_common(top):
        path = next((p for p in paths if p.name == file), None)
        text = path.read_text().splitlines()[line - 1].strip() if path else ""
        print(f"    {n:5d} of the {scope}'s {len(rows):5d}  {file}:{line}  {text[:90]}")


def _programs_per_sm(regs: int, shared: int, warps: int) -> tuple[int, str]:
    """How many programs of this kernel fit on one SM, and the resource that limits them."""
    regs_per_warp = -(-regs * 32 // 256) * 256  # allocated per warp in units of 256
    limits = {
        "registers": REGS_PER_SM // (regs_per_warp * warps),
        "shared memory": SMEM_PER_SM // (shared + SMEM_PER_PROGRAM_RESERVED),
        "warps": WARPS_PER_SM // warps,
        "programs": PROGRAMS_PER_SM,
    }
    limit = min(limits, key=limits.get)
    return limits[limit], limit


def _sass_hash(sass: str) -> str:
    """A hash of the instructions alone: kernel names, addresses and comments stripped, and the offsets
    of kernel parameters in the constant bank too (a new argument moves them, not the code)."""
    lines = []
    for line in sass.splitlines():
        m = re.match(r"\s*/\*[0-9a-f]{4,}\*/\s*(.*?)\s*;", line)
        if m:
            lines.append(re.sub(r"c\[0x0\]\[0x[0-9a-f]+\]", "c[0x0][param]", m.group(1)))
    return hashlib.sha256("\n".join(lines).encode()).hexdigest()[:12]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--only", default=",".join(KERNELS), help="comma-separated kernels")
    parser.add_argument(
        "--defaults", action="store_true", help="each kernel's default configuration only (its first row)"
    )
    parser.add_argument("--sass", type=Path, help="folder to write each kernel's SASS into")
    parser.add_argument(
        "--listing",
        type=Path,
        help="folder to write each kernel's instructions into, one a line with its source line "
        "(for ncu_source_summary.py --listing)",
    )
    parser.add_argument(
        "--lines", type=int, default=0, help="list the N source lines with most loop instructions"
    )
    args = parser.parse_args()
    wanted = args.only.split(",")
    unknown = sorted(set(wanted) - set(KERNELS))
    if unknown:
        parser.error(f"unknown kernel(s) {', '.join(unknown)}; choose from {', '.join(KERNELS)}")
    for option, folder in (("--sass", args.sass), ("--listing", args.listing)):
        out_dir(parser, folder, option)  # made before any compile
    missing = [tool for tool in ("ptxas", "cuobjdump", "nvdisasm") if not (BIN / tool).exists()]
    if missing:
        sys.exit(
            f"this Triton ({triton.__version__}) has no CUDA backend tools ({', '.join(missing)} not in {BIN})"
        )
    print(f"triton {triton.__version__}, target sm_90a; Qwen3-Next shapes H={H} HV={HV} K={K} V={V}, bf16")
    print(
        f"{'kernel':11s} {'variant':15s} {'warps':>5s} {'stages':>6s} {'regs':>4s} {'spill B':>7s} "
        f"{'smem KiB':>8s} {'per SM':>6s}  {'limited by':13s} {'wgmma':6s} {'HGMMA':>5s} {'LDL+STL':>7s} {'BAR':>4s} {'loop':>5s} {'instr':>5s}  sass"
    )
    with tempfile.TemporaryDirectory() as tmp:
        workdir = Path(tmp)
        done = set()
        for name, label, meta, warps, stages, *extra in VARIANTS:
            if name not in wanted or (args.defaults and name in done):
                continue
            done.add(name)
            fn, constexprs = KERNELS[name]
            gaps = constexpr_gaps(fn, constexprs | meta)
            if gaps:
                sys.exit(
                    f"{name} ({label}): constexpr values {sorted(gaps)} unlike the kernel's; update KERNELS"
                )
            try:
                types = signature(fn, constexprs | meta)
            except KeyError as err:
                sys.exit(err.args[0])
            source = (GluonASTSource if fn.is_gluon() else ASTSource)(
                fn=fn, signature=types, constexprs=constexprs | meta, attrs=_aligned(fn, types)
            )
            compiled = triton.compile(
                source,
                target=TARGET,
                # a compile option set to None (a default register cap of none) is left out
                options=dict(num_warps=warps, num_stages=stages)
                | {key: value for options in extra for key, value in options.items() if value is not None},
            )
            tag = f"{name}-{label}".replace(" ", "").replace(",", "_").replace("=", "")
            regs, spills, serialized, cubin = _ptxas_info(compiled.asm["ptx"], workdir, tag)
            sass = subprocess.run(
                [BIN / "cuobjdump", "-sass", cubin], capture_output=True, text=True, check=True
            ).stdout
            shared = compiled.metadata.shared
            fit, limit = _programs_per_sm(regs, shared, warps)

            mma, local, bars = (
                len(re.findall(p, sass)) for p in (r"HGMMA", r"\b(?:LDL|STL)\b", r"BAR\.SYNC")
            )
            listing = _listing(cubin)
            loop = _longest_loop(listing)
            wgmma = "serial" if serialized else "async" if mma else "-"
            print(
                f"{name:11s} {label:15s} {warps:5d} {stages:6d} {regs:4d} {spills:7d} {shared / 1024:8.1f} "
                f"{fit:6d}  {limit:13s} {wgmma:6s} {mma:5d} {local:7d} {bars:4d} {len(loop) or '-':>5} {len(listing):5d}  {_sass_hash(sass)}",
                flush=True,
            )
            # A warp-specialized kernel (``gl.warp_specialize``) has a step loop per partition
            steps = _step_rows(listing)
            if len(steps) > 1:
                print(
                    "    step loops (innermost, a twentieth of the kernel or more; local accesses): "
                    + ", ".join(
                        f"{len(rows)} ({sum(op in ('LDL', 'STL') for _, op, _ in rows)})" for rows in steps
                    )
                )
            if args.lines:
                # a loop of a tenth of the kernel (a binary search before the work) says little
                in_loop = len(loop) * 10 >= len(listing)
                _print_lines(
                    loop if in_loop else listing,
                    args.lines,
                    "loop" if in_loop else "kernel",
                    fn.fn.__code__.co_filename,
                )
            if args.sass:
                (args.sass / f"{tag}.sass").write_text(sass)
            if args.listing:
                (args.listing / f"{tag}.lines").write_text(_listing_text(listing))


if __name__ == "__main__":
    main()
