"""Summarize Nsight Compute's per-instruction page of one kernel: where its warps stall, by reason, by
SASS opcode and by instruction.

    ncu -i REPORT.ncu-rep --page source --csv --print-source sass -k regex:state_kernel > state.csv
    python3 benchmarks/ncu_source_summary.py state.csv [--top 30] [--listing KERNEL.lines [--span A:B]]

The page has one row per SASS instruction with its warp-stall samples (all of them, and per reason) and
how often it executed. Sampled stalls say where a kernel's time goes inside it without a source view of
Triton code: a long-scoreboard stall on a shared-memory store is a global load arriving late, a
``SHFL`` under short-scoreboard stalls a cross-lane scan or reduction, ``WARPGROUP.DEPBAR`` the wait
for a warpgroup MMA. Runs anywhere (no GPU): only the CSV is read.

``--listing`` gives the source lines too: a listing of the same kernel compiled here
(``gdn_kernel_resources.py --listing DIR``: one instruction a line, with the Python line it came
from), joined to the page instruction by instruction over ``--span A:B`` (instruction indices, e.g. one
``warp_specialize`` partition; default all). The join holds only where the GPU's binary is the one
compiled here, so every opcode of the span must match, else the tool refuses (naming the first that
differs) rather than attribute samples to the wrong lines.
"""

from __future__ import annotations

import argparse
import csv
import sys
from collections import Counter, defaultdict
from pathlib import Path

SAMPLES = "Warp Stall Sampling (All Samples)"
EXECUTED = "Instructions Executed"


def _number(text: str) -> float:
    return float(text.replace(",", "")) if text not in ("", "-") else 0.0


def read_page(path: Path) -> tuple[str, list[dict[str, str]]]:
    """(kernel name, one dict per SASS instruction) from ncu's ``--page source --csv`` output."""
    rows = list(csv.reader(path.read_text().splitlines()))
    # The first line names the kernel ("Kernel Name","<name>"); the header follows.
    start = next((i for i, row in enumerate(rows) if row[:2] == ["Address", "Source"]), None)
    if start is None:
        raise ValueError(f"{path}: no 'Address,Source' header: not an ncu --page source --csv output")
    kernel = rows[0][1] if rows[0] and rows[0][0] == "Kernel Name" else "?"
    header = rows[start]
    return kernel, [dict(zip(header, row)) for row in rows[start + 1 :] if len(row) == len(header)]


def opcode(sass: str) -> str:
    """``@!P3 LDG.E.128 R4, [...]`` → ``LDG``."""
    words = sass.split()
    if words and words[0].startswith("@"):
        words = words[1:]
    return words[0].split(".")[0] if words else "?"


def summarize(kernel: str, rows: list[dict[str, str]], top: int) -> str:
    total = sum(_number(r[SAMPLES]) for r in rows) or 1.0
    reasons = [c for c in rows[0] if c.startswith("stall_") and "Not Issued" not in c] if rows else []
    by_reason = Counter({c: sum(_number(r[c]) for r in rows) for c in reasons})
    by_op, executed = Counter(), Counter()
    for r in rows:
        by_op[opcode(r["Source"])] += _number(r[SAMPLES])
        executed[opcode(r["Source"])] += _number(r[EXECUTED])
    lines = [f"kernel {kernel}: {len(rows)} SASS instructions, {total:.0f} stall samples"]
    lines.append("stall reasons (% of samples):")
    lines += [f"  {c[len('stall_') :]:20s} {v / total * 100:5.1f}" for c, v in by_reason.most_common(10) if v]
    lines.append("by opcode (% of samples, warp-instructions executed):")
    lines += [f"  {op:12s} {v / total * 100:5.1f} {executed[op]:14.0f}" for op, v in by_op.most_common(20)]
    lines.append(f"top {top} instructions (% of samples, two main reasons):")
    for r in sorted(rows, key=lambda r: -_number(r[SAMPLES]))[:top]:
        main = sorted(((_number(r[c]), c[len("stall_") :]) for c in reasons), reverse=True)[:2]
        why = ", ".join(f"{name} {v / total * 100:.1f}" for v, name in main if v)
        lines.append(f"  {_number(r[SAMPLES]) / total * 100:5.1f}  {r['Source'].strip()[:64]:64s} {why}")
    return "\n".join(lines)


def read_listing(path: Path) -> list[tuple[str, str]]:
    """(opcode, source line) of every instruction of a ``gdn_kernel_resources.py --listing`` file."""
    rows = []
    for number, line in enumerate(path.read_text().splitlines(), 1):
        fields = line.split("\t")
        if len(fields) != 3:
            raise ValueError(f"{path}:{number}: not an address, opcode, source line triple: {line!r}")
        rows.append((fields[1], fields[2]))
    return rows


def by_line(rows: list[dict[str, str]], listing: list[tuple[str, str]], span: range) -> str:
    """The samples of the page's instructions in ``span`` by the source line the listing gives each, as
    a share of the span's samples with the two main reasons (a ``ValueError`` where an opcode differs:
    the binaries differ)."""
    if span.stop > min(len(rows), len(listing)):
        raise ValueError(
            f"span {span.start}:{span.stop} past the page ({len(rows)}) or listing ({len(listing)})"
        )
    for i in span:
        if opcode(rows[i]["Source"]) != listing[i][0].split("@")[0].split(".")[0]:
            raise ValueError(
                f"instruction {i} differs: {rows[i]['Source'].strip()!r} on the page, {listing[i][0]} in the "
                "listing (not the binary compiled here)"
            )
    reasons = [c for c in rows[0] if c.startswith("stall_") and "Not Issued" not in c]
    samples, why = Counter(), defaultdict(Counter)
    for i in span:
        where = listing[i][1]
        samples[where] += _number(rows[i][SAMPLES])
        for c in reasons:
            why[where][c[len("stall_") :]] += _number(rows[i][c])
    total = sum(samples.values()) or 1.0
    lines = [f"instructions {span.start}:{span.stop} by source line (% of their {total:.0f} samples):"]
    for where, v in samples.most_common():
        if v / total < 0.002:
            break
        main = ", ".join(f"{name} {n / v * 100:.0f}%" for name, n in why[where].most_common(2) if n)
        lines.append(f"  {v / total * 100:5.1f}  {where:40s} {main}")
    return "\n".join(lines)


def _span(text: str) -> tuple[int, int]:
    start, sep, stop = text.partition(":")
    if not sep or not start.isdigit() or not stop.isdigit() or int(start) >= int(stop):
        raise argparse.ArgumentTypeError(f"expected A:B with A < B, got {text!r}")
    return int(start), int(stop)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("csv", type=Path, help="ncu --page source --csv --print-source sass output")
    parser.add_argument("--top", type=int, default=30, help="how many instructions to list")
    parser.add_argument("--listing", type=Path, help="gdn_kernel_resources.py --listing file of the kernel")
    parser.add_argument("--span", type=_span, help="instructions A:B to join by source line (default all)")
    args = parser.parse_args(argv)
    if args.span and not args.listing:
        parser.error("--span needs --listing")
    for path in (args.csv, args.listing):
        if path and not path.is_file():
            parser.error(f"no such file {path}")
    try:
        kernel, rows = read_page(args.csv)
        listing = read_listing(args.listing) if args.listing else None
    except ValueError as err:
        parser.error(str(err))
    if not rows:
        parser.error(f"{args.csv}: no instruction rows")
    print(summarize(kernel, rows, args.top))
    if listing is not None:
        start, stop = args.span or (0, min(len(rows), len(listing)))
        try:
            print(by_line(rows, listing, range(start, stop)))
        except ValueError as err:
            parser.error(str(err))


if __name__ == "__main__":
    sys.exit(main())
