"""The GDN custom ops (``kernels.gdn.library``): same results as the direct calls, valid registrations,
traceable by ``torch.compile(fullgraph=True)``, and (GPU) capturable in a CUDA graph."""

import pytest
import torch
from gdn_inputs import capture_cuda_graph, clone_inputs, make_inputs

import stampgen.kernels.gdn.library  # noqa: F401  (registers torch.ops.stampgen.gdn_*)
from stampgen.kernels import gdn

SMALL = dict(N=3, H=1, HV=2, K=8, V=8)
# What each phase writes besides its output.
MUTATED = {"prefill": "state_pool", "decode": "state_pool", "verify": "intermediate_states"}
# The op's positional tensors after q, k, v, g, beta, state_pool, state_indices.
EXTRA = {"prefill": ("cu_seqlens",), "decode": (), "verify": ("intermediate_states",)}


def _op(phase):
    return getattr(torch.ops.stampgen, f"gdn_{phase}")


def _op_args(phase, inputs):
    names = ("q", "k", "v", "g", "beta", "state_pool", "state_indices", *EXTRA[phase])
    return tuple(inputs[name] for name in names)


def _small_inputs(phase, seed=0, **kwargs):
    inputs = make_inputs(phase, **SMALL, D=2 if phase == "verify" else None, pad=1, seed=seed, **kwargs)
    if phase == "verify":
        # make_inputs poisons the buffer with NaN; opcheck and compile compare buffers with NaN != NaN.
        inputs["intermediate_states"].normal_(generator=torch.Generator().manual_seed(seed))
    return inputs


def _assert_same(actual, expected, what):
    torch.testing.assert_close(actual, expected, rtol=0, atol=0, equal_nan=True, msg=lambda m: f"{what}: {m}")


@pytest.mark.parametrize("phase", ["prefill", "decode", "verify"])
def test_the_op_gives_the_direct_calls_output_and_state_updates(phase):
    direct = make_inputs(phase, **SMALL, D=2 if phase == "verify" else None, pad=1, seed=1)
    via_op = clone_inputs(direct)
    o_direct = getattr(gdn, phase)(**direct, backend="torch")
    o_op = _op(phase)(*_op_args(phase, via_op), backend="torch")
    _assert_same(o_op, o_direct, "output")
    _assert_same(via_op["state_pool"], direct["state_pool"], "state_pool")
    if phase == "verify":
        _assert_same(via_op["intermediate_states"], direct["intermediate_states"], "intermediate_states")


@pytest.mark.parametrize("phase", ["prefill", "decode", "verify"])
def test_opcheck_passes_for_the_torch_backend(phase):
    inputs = _small_inputs(phase, seed=2)
    torch.library.opcheck(_op(phase), _op_args(phase, inputs), {"backend": "torch"})


def test_the_fake_op_gives_the_output_shape_and_dtype_without_running_a_kernel():
    from torch._subclasses.fake_tensor import FakeTensorMode

    inputs = make_inputs("verify", **SMALL, D=2, dtype=torch.float16)
    with FakeTensorMode(allow_non_fake_inputs=True) as mode:
        fake = {name: mode.from_tensor(t) for name, t in inputs.items()}
        o = torch.ops.stampgen.gdn_verify(*_op_args("verify", fake), backend="torch")
    assert o.shape == inputs["v"].shape
    assert o.dtype == torch.float16


def test_a_compiled_fullgraph_function_calling_the_ops_matches_eager():
    if not torch._dynamo.is_dynamo_supported():
        pytest.skip(f"torch.compile is not supported on Python {torch.__version__} / this platform")
    torch._dynamo.reset()

    def step(q, k, v, g, beta, state_pool, state_indices, scale):
        o = torch.ops.stampgen.gdn_decode(q, k, v, g, beta, state_pool, state_indices, scale, backend="torch")
        return o * 2.0  # some surrounding work the compiler keeps in the same graph

    eager = make_inputs("decode", **SMALL, pad=1, seed=3)
    compiled_in = clone_inputs(eager)
    o_eager = step(*_op_args("decode", eager), 0.5)
    # aot_eager: Dynamo + AOTAutograd functionalisation of the mutated pool, no C++ compiler needed.
    compiled = torch.compile(step, fullgraph=True, backend="aot_eager")
    o_compiled = compiled(*_op_args("decode", compiled_in), 0.5)
    _assert_same(o_compiled, o_eager, "output")
    _assert_same(compiled_in["state_pool"], eager["state_pool"], "state_pool")


# ----------------------------------------------------------------------------------------------- GPU


@pytest.mark.gpu
@pytest.mark.parametrize("phase", ["decode", "verify"])
def test_the_op_captured_in_a_cuda_graph_replays_like_eager_calls(phase):
    backend = "triton"
    shape = dict(N=8, H=4, HV=8, K=128, V=128, D=3 if phase == "verify" else None, pad=2)
    static = make_inputs(phase, **shape, dtype=torch.bfloat16, device="cuda", seed=10)
    graph, o_static = capture_cuda_graph(lambda: _op(phase)(*_op_args(phase, static), backend=backend))

    for seed in (11, 12):  # each replay on new inputs, slots and pool contents
        fresh = make_inputs(phase, **shape, dtype=torch.bfloat16, device="cuda", seed=seed)
        for name, t in fresh.items():
            static[name].copy_(t)
        expected = clone_inputs(fresh)
        o_eager = _op(phase)(*_op_args(phase, expected), backend=backend)
        graph.replay()
        torch.cuda.synchronize()
        # Same kernel on the same data: replay and eager call agree bit for bit.
        _assert_same(o_static, o_eager, "output")
        _assert_same(static[MUTATED[phase]], expected[MUTATED[phase]], MUTATED[phase])
        _assert_same(static["state_pool"], expected["state_pool"], "state_pool")
