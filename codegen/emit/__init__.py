"""Emitters: a checked Model → view records of generated code, one module per rule kind.

codegen/emit/module.py runs them for one generated module, codegen/emit/suite.py for its tests;
codegen/render.py lays the views out through the templates.
"""
