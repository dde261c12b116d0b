"""The KDA and lightning custom ops (``kernels.{kda,lightning}.library``): the same results as the direct
calls, valid registrations (opcheck), traceable by ``torch.compile(fullgraph=True)``, and (GPU, in
test_kda_lightning_gpu.py) capturable in a CUDA graph."""

import pytest
import torch
from gdn_inputs import clone_inputs
from test_kda_kernels import kda_inputs
from test_lightning_kernels import lightning_inputs

import stampgen.kernels.kda.library  # noqa: F401  (registers torch.ops.stampgen.kda_*)
import stampgen.kernels.lightning.library  # noqa: F401  (registers torch.ops.stampgen.lightning_*)
from stampgen.kernels import kda, lightning

SMALL = dict(N=3, H=1, HV=2, K=8, V=8)
EXTRA = {"prefill": ("cu_seqlens",), "decode": (), "verify": ("intermediate_states",)}
OPS = {"kda": (kda, kda_inputs), "lightning": (lightning, lightning_inputs)}


def op_args(phase, inputs):
    names = ("q", "k", "v", "g", "beta", "state_pool", "state_indices", *EXTRA[phase])
    return tuple(inputs[name] for name in names)


def small_inputs(op, phase, seed=0):
    inputs = OPS[op][1](phase, **SMALL, D=2 if phase == "verify" else None, pad=1, seed=seed, device="cpu")
    if phase == "verify":  # opcheck and compile compare buffers, and NaN != NaN
        inputs["intermediate_states"].normal_(generator=torch.Generator().manual_seed(seed))
    return inputs


def same(actual, expected, what):
    torch.testing.assert_close(actual, expected, rtol=0, atol=0, equal_nan=True, msg=lambda m: f"{what}: {m}")


@pytest.mark.parametrize("op", OPS)
@pytest.mark.parametrize("phase", ["prefill", "decode", "verify"])
def test_the_op_gives_the_direct_calls_output_and_state_updates(op, phase):
    direct = small_inputs(op, phase, seed=1)
    via_op = clone_inputs(direct)
    o_direct = getattr(OPS[op][0], phase)(**direct, backend="torch")
    o_op = getattr(torch.ops.stampgen, f"{op}_{phase}")(*op_args(phase, via_op), backend="torch")
    same(o_op, o_direct, "output")
    same(via_op["state_pool"], direct["state_pool"], "state_pool")
    if phase == "verify":
        same(via_op["intermediate_states"], direct["intermediate_states"], "intermediate_states")


@pytest.mark.parametrize("op", OPS)
@pytest.mark.parametrize("phase", ["prefill", "decode", "verify"])
def test_opcheck_passes_for_the_torch_backend(op, phase):
    inputs = small_inputs(op, phase, seed=2)
    torch.library.opcheck(
        getattr(torch.ops.stampgen, f"{op}_{phase}"), op_args(phase, inputs), {"backend": "torch"}
    )


@pytest.mark.parametrize("op", OPS)
def test_the_fake_op_gives_the_output_shape_and_dtype(op):
    from torch._subclasses.fake_tensor import FakeTensorMode

    inputs = small_inputs(op, "verify")
    inputs = {name: t.half() if name in ("q", "k", "v") else t for name, t in inputs.items()}
    with FakeTensorMode(allow_non_fake_inputs=True) as mode:
        fake = {name: mode.from_tensor(t) if isinstance(t, torch.Tensor) else t for name, t in inputs.items()}
        o = getattr(torch.ops.stampgen, f"{op}_verify")(*op_args("verify", fake), backend="torch")
    assert o.shape == inputs["v"].shape and o.dtype == torch.float16


@pytest.mark.parametrize("op", OPS)
def test_a_compiled_fullgraph_function_calling_the_op_matches_eager(op):
    if not torch._dynamo.is_dynamo_supported():
        pytest.skip("torch.compile is not supported on this platform")
    torch._dynamo.reset()
    decode_op = getattr(torch.ops.stampgen, f"{op}_decode")

    def step(q, k, v, g, beta, state_pool, state_indices, scale):
        return decode_op(q, k, v, g, beta, state_pool, state_indices, scale, backend="torch") * 2.0

    eager = small_inputs(op, "decode", seed=3)
    compiled_in = clone_inputs(eager)
    o_eager = step(*op_args("decode", eager), 0.5)
    compiled = torch.compile(step, fullgraph=True, backend="aot_eager")
    o_compiled = compiled(*op_args("decode", compiled_in), 0.5)
    same(o_compiled, o_eager, "output")
    same(compiled_in["state_pool"], eager["state_pool"], "state_pool")
