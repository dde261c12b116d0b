"""The intra launch's bf16 solve (``chunk._intra_chunk``, ``SOLVE_BF16``: the four 64×64 dots of
(I + A)⁻¹ on bf16 operands for bf16 inputs) is accurate enough: emulated in torch (operands rounded, exact
products, fp32 sums) its Tβ stays within a fifth of the rounding that storing Tβ in bf16 costs anyway.
The kernel itself runs bf16 only on a GPU (the interpreter's bf16 math is wrong); this checks the
algorithm's precision, the GPU tests the kernel's."""

import pytest
import torch


def _round(x: torch.Tensor, dtype) -> torch.Tensor:
    return x.to(dtype).double()


def _tbeta(k, g, beta, dtype):
    """(Tβ as the kernel's Horner form makes it with ``dtype`` operands in its four dots, exact Tβ)."""
    T = k.shape[0]
    gam = torch.cumsum(g.double(), 0)
    low = torch.tril(torch.ones(T, T, dtype=torch.bool), -1)
    a = torch.where(low, (k @ k.T) * beta[:, None] * torch.exp(gam[:, None] - gam[None, :]), 0.0)
    eye = torch.eye(T, dtype=torch.float64)
    exact = torch.linalg.inv(eye + a) * beta[None, :]
    a = a.float().double()  # the kernel's A is fp32
    block = (torch.arange(T)[:, None] // 16) == (torch.arange(T)[None, :] // 16)
    d_inv = torch.linalg.inv(eye + torch.where(block, a, 0.0)).float().double()

    def dot(x, y):  # operands rounded to ``dtype``, exact products, an fp32 result
        return (_round(x, dtype) @ _round(y, dtype)).float().double()

    nil = dot(d_inv, torch.where(block, 0.0, a))
    t = d_inv - dot(nil, d_inv)
    t = d_inv - dot(nil, t)
    return (d_inv - dot(nil, t)) * beta[None, :], exact


def _rel(x, ref):
    return ((x - ref).norm() / ref.norm()).item()


@pytest.mark.parametrize("normalizer", [1.0, 10.0], ids=["strong-decay", "weak-decay"])
def test_the_bf16_solve_moves_tbeta_by_a_fraction_of_its_bf16_storage_rounding(normalizer):
    gen = torch.Generator().manual_seed(0)
    worst_solve, best_storage = 0.0, 1.0
    for _ in range(50):
        k = torch.randn(64, 128, generator=gen, dtype=torch.float64)
        k = (k / k.norm(dim=1, keepdim=True)).to(torch.bfloat16).double()
        g = torch.nn.functional.logsigmoid(torch.randn(64, generator=gen, dtype=torch.float64)) / normalizer
        beta = torch.sigmoid(torch.randn(64, generator=gen, dtype=torch.float64))
        tbeta, exact = _tbeta(k, g, beta, torch.bfloat16)
        worst_solve = max(worst_solve, _rel(tbeta, exact))
        best_storage = min(best_storage, _rel(exact.to(torch.bfloat16).double(), exact))
    assert worst_solve <= best_storage / 5
