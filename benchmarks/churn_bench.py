"""Generated-line churn alone: how many lines of generated/*.py one small edit of rules/linear_attn.rules
changes (a comment line at the top; one `forbid` in `validate GDNAttnBackend`), with the targets beside.

    .venv/bin/python -m benchmarks.churn_bench

The same table as `python -m benchmarks.codegen_bench --only churn` (that module is the harness and says
how it is measured); this entry point is the quick check while changing templates or rendering.
"""

from __future__ import annotations

import sys

from benchmarks.codegen_bench import main

if __name__ == "__main__":
    raise SystemExit(main(["--only", "churn", *sys.argv[1:]], module="benchmarks.churn_bench"))
