"""``benchmarks/gdn_kernel_resources.py`` keeps up with the kernels it compiles.

The tool compiles for sm_90a, which needs the kernels as real ``@triton.jit`` functions; this test
process runs Triton's interpreter (root conftest), so the tool runs in a subprocess of its own.
"""

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
TOOL = ROOT / "benchmarks" / "gdn_kernel_resources.py"
# The tool loaded as module ``tool`` in a script of a test's own (``importlib.util`` imported before)
LOAD_TOOL = (
    f"spec = importlib.util.spec_from_file_location('tool', {str(TOOL)!r})\n"
    "tool = importlib.util.module_from_spec(spec); spec.loader.exec_module(tool)\n"
)


def _run(*args: str) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}
    return subprocess.run(
        [sys.executable, *args], cwd=ROOT, env=env, capture_output=True, text=True, timeout=600
    )


def test_every_kernel_argument_has_a_type_and_every_constexpr_a_value():
    # The tool's type table and constexpr values against the kernels' real argument lists, for every
    # variant; an argument added to a kernel without a type here fails this test, not a later compile.
    check = (
        "import importlib.util, re, sys\n"
        f"{LOAD_TOOL}"
        "for name, label, meta, *_ in tool.VARIANTS:\n"
        "    fn, constexprs = tool.KERNELS[name]\n"
        "    assert not tool.constexpr_gaps(fn, constexprs | meta), (name, label)\n"
        "    types = tool.signature(fn, constexprs | meta)\n"
        "    assert set(types) | set(constexprs) | set(meta) == set(fn.arg_names), (name, label)\n"
        "    plain = (tool.BF16, tool.F32, tool.I32, tool.I64P, tool.I64, 'i32', 'fp32')\n"
        "    desc = r'tensordesc<bf16\\[64, \\d+\\](,NVMMASharedLayout\\(.*\\))?>'\n"
        "    assert all(kind in plain or re.fullmatch(desc, kind) for kind in types.values()), (name, label)\n"
        "print(len(tool.VARIANTS))\n"
    )
    done = _run("-c", check)
    assert done.returncode == 0, done.stderr
    assert int(done.stdout.split()[-1]) >= 6


def test_an_argument_without_a_type_is_named(tmp_path):
    # Triton's @jit needs its source in a file.
    script = tmp_path / "check.py"
    script.write_text(
        "import importlib.util\n"
        "import triton\n"
        "import triton.language as tl\n"
        f"{LOAD_TOOL}"
        "@triton.jit\n"
        "def kernel(q_ptr, mystery, stride_q_tok, BK: tl.constexpr):\n"
        "    pass\n"
        "try:\n"
        "    tool.signature(kernel)\n"
        "except KeyError as err:\n"
        "    print(err.args[0])\n"
    )
    done = _run(str(script))
    assert done.returncode == 0, done.stderr
    assert "kernel: argument 'mystery' has no type in ARG_TYPES" in done.stdout


def test_the_recurrent_kernels_compile_for_sm90_and_report_their_resources():
    done = _run(str(TOOL), "--only", "decode,verify")
    assert done.returncode == 0, done.stderr
    rows = [line.split() for line in done.stdout.splitlines() if re.match(r"(decode|verify)\s", line)]
    assert [row[0] for row in rows] == ["decode", "verify"]
    for row in rows:
        regs, spills, fit = int(row[4]), int(row[5]), int(row[7])
        assert 0 < regs <= 255 and spills >= 0 and fit >= 1


def test_the_gluon_kernels_compile_for_sm90_and_report_their_resources():
    # Gluon kernels have no interpreter: this compile (Gluon → PTX → ptxas for sm_90a) is what the CPU
    # run can check of kernels/gdn/chunk_gluon.py and chunk_intra_gluon.py; their numerics are held by
    # the GPU tests.
    done = _run(str(TOOL), "--only", "gluon_state,gluon_intra")
    assert done.returncode == 0, done.stderr
    # kernel, variant (words), warps, stages, regs, spill B, smem KiB, per SM, limited by (words), wgmma,
    # HGMMA, …
    row = re.compile(
        r"(gluon_\w+)\s+(.+?)\s+\d+\s+\d+\s+(\d+)\s+(\d+)\s+[\d.]+\s+(\d+)\s+\D+?\s(async|serial|-)\s+(\d+)\s"
    )
    rows = [m.groups() for m in map(row.match, done.stdout.splitlines()) if m]
    # the state pass with the intra launch before it, before it as its programmatic dependent, and
    # reading P from it; the Gluon intra launch, of every chunk, of the chunks of no sequence's last
    # segment (as before the fused pass), and writing P too (in both program orders)
    assert [name for name, *_ in rows] == ["gluon_state"] * 3 + ["gluon_intra"] * 4, done.stdout
    for _name, _label, regs, _spills, fit, wgmma, mma in rows:
        assert 0 < int(regs) <= 255 and int(fit) >= 1 and int(mma) > 0
        # ptxas serializing the wgmma (an accumulator read while its product may be in flight, C7514) is
        # a slowdown no output shows: a wait moved in the P-from-intra step once did it
        assert wgmma == "async", done.stdout
    # the intra launch's four programs per SM, which its speed rests on (RESULTS.md), with no spills
    intra = {label: (spills, fit) for name, label, _, spills, fit, _, _ in rows if name == "gluon_intra"}
    assert len(intra) == 4, done.stdout
    for label, (spills, fit) in intra.items():
        assert int(fit) == 4 and int(spills) == 0, (label, done.stdout)


def test_the_fused_state_pass_compiles_with_its_worker_warpgroup_and_fits_an_sm():
    # kernels/gdn/chunk_gluon_fused.py: three warpgroups (gl.warp_specialize) whose registers ptxas
    # splits by setmaxnreg; its shared memory (three TMA stages, two slots of Tβ and P, the output
    # buffers) must fit one program on an SM, and its wgmma stay asynchronous (the next test)
    done = _run(str(TOOL), "--only", "gluon_fused")
    assert done.returncode == 0, done.stderr
    row = re.compile(r"gluon_fused\s+(\S.*?)\s+(\d+)\s+\d+\s+(\d+)\s+(\d+)\s+([\d.]+)\s+(\d+)\s")
    rows = {m.group(1): m.groups()[1:] for m in map(row.match, done.stdout.splitlines()) if m}
    # Tβ made by the worker (the default, one item a program or persistent, also at K = 64; those two
    # persistent) and copied in (persistent); and the build benchmarks/gdn_fused_timeline.py runs (time
    # stamps at each item's ends: a diagnostic, whose spills are not the default's, so no bound on them)
    made = {"default", "persistent", "K=64"}
    assert set(rows) == {"Tβ loaded", "stamped"} | made, done.stdout
    for variant, (warps, regs, spills, smem, fit) in rows.items():
        # the state warpgroups' warps launched (the worker's four are added by warp_specialize: 384
        # threads, 168 registers a thread at entry)
        assert int(warps) == 8 and int(regs) == 65536 // 384 // 8 * 8, done.stdout
        assert int(fit) == 1 and float(smem) <= 227, done.stdout
        # none where the worker copies Tβ in; where it makes Tβ (at 120 registers a thread), persistent,
        # a register or two (16 B on 12-06: one in the worker's loop, 2 local accesses a chunk); more is a
        # regression on the pass's pace, which is the worker's chain
        if variant != "stamped":
            assert int(spills) <= 32 if variant in made else int(spills) == 0, done.stdout
    # one item a program, the worker making Tβ spills nothing (the persistent form's one spilled register
    # is why batches of few items an SM keep that form: chunk_gluon_fused.PERSISTENT_ITEMS)
    assert int(rows["default"][2]) == 0, done.stdout


def test_the_lightning_prefill_compiles_for_sm90_with_tma_tiles_and_no_spills():
    # the output pass's whole chunks come by TMA (HGMMA on its tiles) at two programs per SM with no
    # spills, which its speed rests on (RESULTS.md); the segment pass with them
    done = _run(str(TOOL), "--only", "lightning_output,lightning_segment")
    assert done.returncode == 0, done.stderr
    row = re.compile(
        r"(lightning_\w+)\s+(default)\s+\d+\s+\d+\s+(\d+)\s+(\d+)\s+[\d.]+\s+(\d+)\s+\D+\s(\d+)\s"
    )
    rows = {m.group(1): m.groups()[2:] for m in map(row.match, done.stdout.splitlines()) if m}
    assert set(rows) == {"lightning_output", "lightning_segment"}, done.stdout
    for regs, spills, fit, mma in rows.values():
        assert 0 < int(regs) <= 255 and int(spills) == 0 and int(fit) >= 1 and int(mma) > 0
    assert int(rows["lightning_output"][2]) == 2, done.stdout


def test_an_unknown_kernel_is_refused_with_the_known_names():
    done = _run(str(TOOL), "--only", "decode,nope")
    assert done.returncode == 2
    assert "unknown kernel(s) nope" in done.stderr and "decode" in done.stderr


def test_lines_names_the_source_lines_that_issue_the_most_instructions():
    # decode has no loop left after unrolling: the lines are counted over the whole kernel, and the
    # kernel's own file shows up with the text of its lines (Triton's library lines have no text here).
    done = _run(str(TOOL), "--only", "decode", "--lines", "3")
    assert done.returncode == 0, done.stderr
    row = next(line.split() for line in done.stdout.splitlines() if line.startswith("decode"))
    assert row[-3] == "-"  # the loop column
    assert int(row[-2]) > 0  # the kernel's instructions
    listed = [line for line in done.stdout.splitlines() if "of the kernel's" in line]
    assert len(listed) == 3
    counts = [int(line.split()[0]) for line in listed]
    assert counts == sorted(counts, reverse=True) and all(n > 0 for n in counts)
    assert any("fused_recurrent.py:" in line and "tl." in line for line in listed)


def test_the_longest_loop_is_a_real_loop_not_a_wait_retry_after_the_kernels_end():
    # (address, opcode, line) rows as _listing makes them: a loop 0x10..0x30, the kernel's EXIT, and a
    # barrier-wait retry placed after it that branches back to 0x10 (a longer span, but no loop).
    check = (
        "import importlib.util\n"
        f"{LOAD_TOOL}"
        "rows = [(0x0, 'MOV', None), (0x10, 'HGMMA', None), (0x20, 'IADD3', None), (0x30, 'BRA@16', None),\n"
        "        (0x40, 'EXIT', None), (0x50, 'SYNCS', None), (0x60, 'BRA@16', None)]\n"
        "print([hex(a) for a, _, _ in tool._longest_loop(rows)])\n"
        "print(tool._longest_loop(rows[:4] + [(0x40, 'EXIT', None)]) == rows[1:4])\n"
    )
    done = _run("-c", check)
    assert done.returncode == 0, done.stderr
    assert done.stdout.split("\n")[:2] == ["['0x10', '0x20', '0x30']", "True"]


def test_the_step_loops_are_the_innermost_long_loops_inside_an_outer_one():
    # A persistent kernel's item loop 0x0..0x100 holds two step loops, 0x10..0x30 and 0x40..0x90; the
    # second holds a wait's retry loop 0x60..0x70, too short to count at a share of 8 (2 of 17 rows; 3 count).
    check = (
        "import importlib.util\n"
        f"{LOAD_TOOL}"
        "ops = {0x30: 'BRA@16', 0x70: 'BRA@96', 0x90: 'BRA@64', 0x100: 'BRA@0'}\n"
        "rows = [(a, ops.get(a, 'FFMA'), None) for a in range(0, 0x110, 0x10)]\n"
        "print([(hex(lo), hex(hi)) for lo, hi in tool._step_loops(rows, share=8)])\n"
        "loop = tool._longest_loop(rows, share=8)\n"
        "print(hex(loop[0][0]), hex(loop[-1][0]))\n"
    )
    done = _run("-c", check)
    assert done.returncode == 0, done.stderr
    # the loop column counts the longer step, not the item loop around both
    assert done.stdout.split("\n")[:2] == ["[('0x10', '0x30'), ('0x40', '0x90')]", "0x40 0x90"]


def test_no_kernel_at_its_default_configuration_has_its_wgmma_serialized():
    # ptxas serializes a kernel's wgmma (each k-step waited for before the next) on its own judgement,
    # e.g. where a product stays in flight across a loop's back edge: the chunked GDN batch pass ran so,
    # 9% slower, until its waits moved (RESULTS.md). The tool reads ptxas's note; every kernel that
    # uses wgmma must keep them asynchronous at its default configuration.
    done = _run(str(TOOL), "--defaults")
    assert done.returncode == 0, done.stderr
    # kernel, variant (words), warps, stages, regs, spill B, smem KiB, per SM, limited by (words), wgmma, HGMMA
    row = re.compile(r"(\w+)\s+.+?\s+\d+\s+\d+\s+\d+\s+\d+\s+[\d.]+\s+\d+\s+\D+?\s(async|serial|-)\s+(\d+)\s")
    rows = {m.group(1): m.groups()[1:] for m in map(row.match, done.stdout.splitlines()) if m}
    with_mma = {name: wgmma for name, (wgmma, mma) in rows.items() if int(mma) > 0}
    assert {"gluon_batch", "gluon_fused", "gluon_state", "state", "kda_state", "lightning_gluon"} <= set(
        with_mma
    ), done.stdout
    assert all(wgmma == "async" for wgmma in with_mma.values()), with_mma
    assert all(wgmma == "-" for name, (wgmma, mma) in rows.items() if int(mma) == 0), rows


def test_a_ptx_that_ptxas_refuses_is_named_with_its_error_not_a_traceback():
    check = (
        "import importlib.util, tempfile\n"
        "from pathlib import Path\n"
        f"{LOAD_TOOL}"
        "with tempfile.TemporaryDirectory() as tmp:\n"
        "    tool._ptxas_info('.version 8.0\\n.target sm_90a\\nbogus;\\n', Path(tmp), 'broken')\n"
    )
    done = _run("-c", check)
    assert done.returncode == 1
    assert done.stderr.startswith("broken: ptxas failed") and "bogus" in done.stderr
    assert "Traceback" not in done.stderr


@pytest.mark.parametrize("option", ["--sass", "--listing"])
def test_an_output_folder_that_cannot_be_made_is_a_usage_error_before_any_compile(tmp_path, option):
    blocker = tmp_path / "a-file"
    blocker.write_text("in the way")
    done = _run(str(TOOL), "--only", "decode", option, str(blocker / "out"))
    assert done.returncode == 2 and "Traceback" not in done.stderr, done.stderr
    last = done.stderr.strip().splitlines()[-1]
    assert "error:" in last and option in last, last
    assert "kernel" not in done.stdout, "a kernel was compiled before the folder was checked"
