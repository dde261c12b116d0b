"""Gated DeltaNet kernels."""
