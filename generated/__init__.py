"""Checked-in output of `stampgen generate` (one module and one test module per rules/NAME.rules).

This package marker is the only hand-written file here; everything else is generated and listed in
MANIFEST.json. Edit the rules and run `make codegen` instead of editing the generated files.
"""
