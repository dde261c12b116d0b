"""The intra launch's 16-bit solve (``chunk_intra._intra_chunk``, ``SOLVE_16``, and ``chunk_intra_gluon``: the
four 64×64 dots of (I + A)⁻¹ on fp16 operands for 16-bit inputs) is accurate enough: emulated in torch
(operands rounded, exact products, fp32 sums) its Tβ stays within a fifth of the rounding that storing Tβ
in the input dtype costs anyway, except on correlated keys stored in fp16, where it is about that
rounding (what it does to the whole prefill, where tf32's truncation, unlike fp16's rounding, adds up
over the chunks: ``test_gdn_prefill_emulation.py``). On bf16 operands (the bf16 solve before) it moved
Tβ by more than fp16 storage rounds. The kernels themselves run 16-bit dots only on a GPU (the
interpreter's bf16 math is wrong); this checks the algorithm's precision, the GPU tests the kernels'."""

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


def _worst_solve_and_best_storage(keys, normalizer, operands, storage):
    gen = torch.Generator().manual_seed(0)
    worst_solve, best_storage = 0.0, 1.0
    for _ in range(30):
        draw = torch.rand if keys == "correlated" else torch.randn
        k = draw(64, 128, generator=gen, dtype=torch.float64)
        k = (k / k.norm(dim=1, keepdim=True)).to(storage).double()
        g = torch.nn.functional.logsigmoid(torch.randn(64, generator=gen, dtype=torch.float64)) / normalizer
        beta = torch.sigmoid(torch.randn(64, generator=gen, dtype=torch.float64))
        tbeta, exact = _tbeta(k, g, beta, operands)
        worst_solve = max(worst_solve, _rel(tbeta, exact))
        best_storage = min(best_storage, _rel(exact.to(storage).double(), exact))
    return worst_solve, best_storage


# The fp16 solve's worst Tβ error over its best storage rounding, allowed per (keys, storage).
SHARE_OF_STORAGE = {
    ("normal", torch.float16): 0.2,
    ("normal", torch.bfloat16): 0.2,
    ("correlated", torch.float16): 1.25,
    ("correlated", torch.bfloat16): 0.2,
}


@pytest.mark.parametrize("storage", [torch.float16, torch.bfloat16], ids=["fp16", "bf16"])
@pytest.mark.parametrize("keys", ["normal", "correlated"])
@pytest.mark.parametrize("normalizer", [1.0, 10.0], ids=["strong-decay", "weak-decay"])
def test_the_fp16_solve_moves_tbeta_by_a_fraction_of_its_16_bit_storage_rounding(normalizer, keys, storage):
    worst_solve, best_storage = _worst_solve_and_best_storage(keys, normalizer, torch.float16, storage)
    share = SHARE_OF_STORAGE[(keys, storage)]
    assert worst_solve <= share * best_storage, f"solve {worst_solve:.2e}, storage {best_storage:.2e}"


def test_a_bf16_solve_would_cost_more_than_fp16_storage_rounds():
    worst_solve, best_storage = _worst_solve_and_best_storage("normal", 10.0, torch.bfloat16, torch.float16)
    assert worst_solve > best_storage
