"""The chunked GDN prefill's algorithm (``kernels/gdn/chunk.py``) in float64 with each 16-bit, fp32 and
tf32 rounding of the kernels switchable, and the fp64 token recurrence it is measured against.

Used to find where the chunked prefill loses precision without a GPU: switch one rounding off at a time
and see which one the error follows (``benchmarks/gdn_precision.py`` prints these side by side with the
kernels' own errors on the GPU; ``tests/kernels/test_gdn_prefill_emulation.py`` holds the stage that
mattered). Runs on any device, in float64. What each switch models:

- ``diag``: the precision of the six 16×16 dots of the diagonal blocks' inverse
  ``D^{-1} = (I − a)(I + a²)(I + a⁴)(I + a⁸)``: ``"tf32"`` as the tensor cores take fp32 operands
  (their low 13 mantissa bits dropped, a truncation: what this emulation finds matches what the H200
  measured, where rounding to nearest does not), ``"tf32+refine"`` (then one step of iterative
  refinement, X + X R with R = (I − X) − a X on tf32x3 operands: the kernels since the fix),
  ``"tf32x3"`` (each operand split into a tf32 high part and a tf32 low part, three products), ``"fp32"``,
  ``"exact"``; ``"substitution"``: forward substitution row by row in fp32 (fla's way). ``diag_form``:
  ``"product"`` multiplies x by (I + y) (``chunked.solve.inv_unit_lower_blocks``), ``"accumulate"`` adds x y
  onto x (the Gluon intra launch's form before it took forward substitution);
- ``merge``: the four 64×64 dots of ``(I + A)^{-1} = D^{-1} − N(D^{-1} − N(D^{-1} − N D^{-1}))``:
  ``"fp16"`` (operands and N rounded to fp16: the kernels' solve since the fix, for either 16-bit
  input), ``"bf16"`` (the same in bf16: bf16 inputs before it), ``"tf32"`` (fp16 inputs before it),
  ``"fp32"``, ``"exact"``; ``"bf16-pair"`` / ``"fp16-pair"``: A's off-diagonal blocks as a pair
  hi + lo in N = D^{-1}(A − blocks) (one more dot; not in the kernels); ``"fp16-blocks"``: instead of
  that series, the inverse merged from D^{-1}'s blocks 16 → 32 → 64, each off-diagonal block
  ``−L_hi (A_hl L_lo)`` on fp16 operands (A_hl L_lo rounded to fp16 in between): three dependent levels
  of small products that a warpgroup can keep in registers (not in the kernels); ``"fp16-blocks-left"``:
  the same as ``−(L_hi A_hl) L_lo`` (the Gluon intra launch's and the fused pass's worker's solve since
  12-06); ``"fp16-depth3"``: the same series as ``(I + N²)(I − N) D^{-1}``, N² made beside
  (I − N) D^{-1}, three dependent dots where the Triton launch chains four (the Gluon solve before);
- ``tbeta_16``: Tβ stored in the input dtype; ``state_operand_16``: the state rounded to the input dtype
  as the dots' operand; ``residual_16``: V − exp(γ)⊙(K S) rounded before Tβ(·); ``v_new_16``: v_new and
  exp(γ_C − γ)⊙v_new rounded for their dots; ``p_16``: P rounded;
- ``carry``: the precision of the carry kernel's ``S ← M S + B`` when a sequence is split into segments
  of ``seg_chunks`` chunks (``None``: unsplit): tf32 there moves nothing measurable;
- ``beta_in_t``: the stored 16-bit matrix is Tβ = (I + A)^{-1} diag(β), as in our kernels (its diagonal,
  β, rounded too), else (I + A)^{-1} (unit diagonal, exact) with β applied to the rows it multiplies
  before their 16-bit rounding (fla's way; for us V − exp(γ)⊙(K S), one multiply an element more in
  the state pass: not in the kernels);
- ``wy``: instead of ``Tβ(V − exp(γ)⊙(K S))``, the WY vectors ``w = Tβ (exp(γ)⊙K)`` and ``u = Tβ V`` are
  formed from 16-bit operands and stored in 16 bits, then ``v_new = u − w S`` is rounded (fla's form,
  with ``FLA_ROUNDINGS``: to check this model against fla's measured errors); ``wy_in_pass``: the same
  vectors made by a state pass from the stored Tβ, one product shorter on the state's chain (K S and
  Tβ(·) become one product w S): w = Tβ (exp(γ)⊙K) on 16-bit operands (K's rows scaled in fp32 first),
  rounded to 16 bits as that product's operand, u = Tβ V and v_new = u − w S in fp32 (not in the
  kernels); ``residual_split``: v_new as two products accumulated in fp32, Tβ V on V as given and
  Tβ (exp(γ)⊙(K S)) on that term rounded to 16 bits, where the kernels round V − exp(γ)⊙(K S) whole
  (so that a state pass can issue V's product before K S is done and skip V's unpacking; not in the
  kernels).
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

F64 = torch.float64
CHUNK = 64


@dataclass(frozen=True)
class Roundings:
    """Which roundings the emulated prefill makes (the defaults: the kernels' own, after the fix)."""

    diag: str = "tf32+refine"
    diag_form: str = "product"
    merge: str = "tf32"
    tbeta_16: bool = True
    state_operand_16: bool = True
    residual_16: bool = True
    v_new_16: bool = True
    p_16: bool = True
    carry: str = "tf32"
    wy: bool = False
    wy_in_pass: bool = False
    residual_split: bool = False
    beta_in_t: bool = True


def kernel_roundings(dtype: torch.dtype, *, gluon_intra: bool = False, fixed: bool = True) -> Roundings:
    """The roundings of our kernels for 16-bit inputs of ``dtype``; ``gluon_intra``: the Gluon intra
    launch's (D^{-1} by forward substitution in fp32 and the solve in three dependent products; before
    the fix, D^{-1}'s tf32 product form accumulated); ``fixed``: since the fix (D^{-1} refined or
    substituted, the solve on fp16 operands), else before it (D^{-1} on tf32, the solve on bf16 operands
    for bf16 inputs and tf32 for fp16)."""
    form = "accumulate" if gluon_intra else "product"
    if not fixed:
        return Roundings(diag="tf32", diag_form=form, merge="bf16" if dtype == torch.bfloat16 else "tf32")
    if gluon_intra:
        return Roundings(diag="substitution", diag_form=form, merge="fp16-blocks-left")
    return Roundings(diag="tf32+refine", diag_form=form, merge="fp16")


FLA_ROUNDINGS = Roundings(diag="substitution", merge="tf32", wy=True, beta_in_t=False)


def round_to(x: torch.Tensor, dtype: torch.dtype) -> torch.Tensor:
    """x rounded to ``dtype`` (to nearest, as a cast does), back in float64."""
    return x.to(dtype).to(F64)


def truncate_tf32(x: torch.Tensor) -> torch.Tensor:
    """x rounded to fp32, then its low 13 mantissa bits dropped: the tf32 operand a tensor core takes."""
    bits = x.to(torch.float32).contiguous().view(torch.int32) & ~0x1FFF
    return bits.view(torch.float32).to(F64)


def dot(a: torch.Tensor, b: torch.Tensor, precision: str, dtype: torch.dtype | None = None) -> torch.Tensor:
    """a @ b as a kernel's dot makes it: operands rounded per ``precision`` ("input": to ``dtype``),
    exact products, the sum rounded to fp32 ("exact": neither)."""
    if precision == "exact":
        return a @ b
    if precision == "tf32x3":
        a_hi, b_hi = truncate_tf32(a), truncate_tf32(b)
        a_lo, b_lo = (
            truncate_tf32(round_to(a, torch.float32) - a_hi),
            truncate_tf32(round_to(b, torch.float32) - b_hi),
        )
        return round_to(a_lo @ b_hi + a_hi @ b_lo + a_hi @ b_hi, torch.float32)
    operand = {
        "fp32": lambda x: round_to(x, torch.float32),
        "tf32": truncate_tf32,
        "bf16": lambda x: round_to(x, torch.bfloat16),
        "input": lambda x: round_to(x, dtype),
    }[precision]
    return round_to(operand(a) @ operand(b), torch.float32)


def _blocks(x: torch.Tensor) -> torch.Tensor:
    """The block-diagonal part (16×16 blocks) of [..., 64, 64] tiles."""
    block = torch.arange(CHUNK, device=x.device) // 16
    return torch.where(block[:, None] == block[None, :], x, 0.0)


def diag_inverse(a: torch.Tensor, precision: str, form: str = "product") -> torch.Tensor:
    """(I + the 16×16 diagonal blocks of a)^{-1} for strictly lower [..., 64, 64] tiles a (fp32 values)."""
    blk = _blocks(a)
    eye = torch.eye(CHUNK, dtype=F64, device=a.device)
    if precision == "exact":
        return round_to(torch.linalg.inv(eye + blk), torch.float32)
    if precision == "substitution":
        inv = eye.expand_as(blk).clone()
        for i in range(1, CHUNK):  # row i = e_i − Σ_j a_ij row_j, rows within i's block
            lo = i - i % 16
            row = inv[..., i, :] - (blk[..., i, lo:i, None] * inv[..., lo:i, :]).sum(-2)
            inv[..., i, :] = round_to(row, torch.float32)
        return inv
    refine = precision == "tf32+refine"
    precision = "tf32" if refine else precision
    x = eye - blk
    power = blk
    for _ in range(3):
        power = dot(power, power, precision)
        if form == "product":
            x = dot(x, eye + power, precision)
        else:
            x = round_to(x + dot(x, power, precision), torch.float32)
    if refine:
        residual = round_to(round_to(eye - x, torch.float32) - dot(blk, x, "tf32x3"), torch.float32)
        x = round_to(x + dot(x, residual, "tf32"), torch.float32)
    return x


def tbeta(
    k: torch.Tensor, gam: torch.Tensor, beta: torch.Tensor, roundings: Roundings, dtype
) -> torch.Tensor:
    """Tβ = (I + A)^{-1} diag(β) of chunks: k [..., 64, K] (16-bit values), γ and β [..., 64]."""
    low = torch.tril(torch.ones(CHUNK, CHUNK, dtype=torch.bool, device=k.device), -1)
    kk = round_to(k @ k.transpose(-1, -2), torch.float32)
    decay = torch.exp(gam[..., :, None] - gam[..., None, :])
    a = round_to(torch.where(low, kk * beta[..., :, None] * decay, 0.0), torch.float32)
    d_inv = diag_inverse(a, roundings.diag, roundings.diag_form)
    off = a - _blocks(a)
    if roundings.merge in ("fp16-blocks", "fp16-blocks-left"):
        t = _merge_blocks(d_inv, off, torch.float16, left=roundings.merge.endswith("-left"))
    elif roundings.merge.split("-")[0] in ("bf16", "fp16"):
        half = torch.bfloat16 if roundings.merge.startswith("bf16") else torch.float16
        d_lo = round_to(d_inv, half)
        if roundings.merge.endswith("-pair"):
            off_hi = round_to(off, half)
            nil = round_to(round_to(d_lo @ off_hi + d_lo @ round_to(off - off_hi, half), torch.float32), half)
        else:
            nil = round_to(round_to(d_lo @ round_to(off, half), torch.float32), half)
        t = d_inv - round_to(nil @ d_lo, torch.float32)
        if roundings.merge.endswith("-depth3"):
            # (I − N + N² − N³) D^{-1} = (I + N²)(I − N) D^{-1}: N² beside (I − N) D^{-1}, then one product
            n2 = round_to(round_to(nil @ nil, torch.float32), half)
            t = t + round_to(n2 @ round_to(t, half), torch.float32)
        else:
            t = d_inv - round_to(nil @ round_to(t, half), torch.float32)
            t = d_inv - round_to(nil @ round_to(t, half), torch.float32)
    else:
        nil = dot(d_inv, off, roundings.merge)
        t = round_to(d_inv - dot(nil, d_inv, roundings.merge), torch.float32)
        t = round_to(d_inv - dot(nil, t, roundings.merge), torch.float32)
        t = d_inv - dot(nil, t, roundings.merge)
    if roundings.beta_in_t:
        t = round_to(t * beta[..., None, :], torch.float32)
    return round_to(t, dtype) if roundings.tbeta_16 else t


def _merge_blocks(
    d_inv: torch.Tensor, off: torch.Tensor, half: torch.dtype, left: bool = False
) -> torch.Tensor:
    """(I + A)^{-1} from the inverses of its 16×16 diagonal blocks (``d_inv``) and its off-diagonal part
    ``off``: at each level the inverse of a [lo, hi] pair of diagonal blocks gets the lower-left block
    −L_hi (A_hl L_lo), on ``half`` operands with fp32 sums, A_hl L_lo rounded to ``half`` between; with
    ``left``, −(L_hi A_hl) L_lo, L_hi A_hl rounded between (the first product's result is then the
    second's left operand, which a warp's mma.sync takes from its accumulator in registers)."""
    t = d_inv.clone()
    for size in (16, 32):
        for start in range(0, CHUNK, 2 * size):
            lo, hi = slice(start, start + size), slice(start + size, start + 2 * size)
            a_hl, l_lo, l_hi = (round_to(x, half) for x in (off[..., hi, lo], t[..., lo, lo], t[..., hi, hi]))
            if left:
                t[..., hi, lo] = -round_to(
                    round_to(round_to(l_hi @ a_hl, torch.float32), half) @ l_lo, torch.float32
                )
            else:
                t[..., hi, lo] = -round_to(
                    l_hi @ round_to(round_to(a_hl @ l_lo, torch.float32), half), torch.float32
                )
    return t


def exact_tbeta(k: torch.Tensor, gam: torch.Tensor, beta: torch.Tensor) -> torch.Tensor:
    """Tβ in float64 from the same (16-bit) keys: the fp64 inverse."""
    low = torch.tril(torch.ones(CHUNK, CHUNK, dtype=torch.bool, device=k.device), -1)
    a = torch.where(
        low,
        (k @ k.transpose(-1, -2)) * beta[..., :, None] * torch.exp(gam[..., :, None] - gam[..., None, :]),
        0.0,
    )
    eye = torch.eye(CHUNK, dtype=F64, device=k.device)
    return torch.linalg.inv(eye + a) * beta[..., None, :]


def _per_head(inputs: dict, n: int):
    """Sequence n's q, k, v [HV, L, ·], gates g and β [HV, L] in float64 (q, k expanded to the
    value heads), zero-padded to whole chunks (a padded row has k = v = β = g = 0: it changes nothing)."""
    cu = inputs["cu_seqlens"].tolist()
    lo, hi = cu[n], cu[n + 1]
    HV = inputs["v"].shape[1]
    groups = HV // inputs["q"].shape[1]

    def heads(x, expand):
        x = x[lo:hi].to(F64)
        return (x.repeat_interleave(groups, 1) if expand else x).transpose(0, 1)

    length = hi - lo
    pad = -length % CHUNK
    q, k, v = heads(inputs["q"], True), heads(inputs["k"], True), heads(inputs["v"], False)
    g, beta = heads(inputs["g"], False), heads(inputs["beta"], False)
    q, k, v = (torch.nn.functional.pad(x, (0, 0, 0, pad)) for x in (q, k, v))
    g, beta = (torch.nn.functional.pad(x, (0, pad)) for x in (g, beta))
    return q, k, v, g, beta, length


def _initial_state(inputs: dict, n: int, K: int, V: int, HV: int, device) -> torch.Tensor:
    """Sequence n's initial state, K-major [HV, K, V] float64 (zeros for a padding slot)."""
    slot = int(inputs["state_indices"][n])
    if slot < 0:
        return torch.zeros(HV, K, V, dtype=F64, device=device)
    return inputs["state_pool"][slot].to(F64).transpose(-1, -2).clone()


def _step(seq: tuple, c: int, state: torch.Tensor, roundings: Roundings, scale: float, dtype, values=True):
    """Chunk ``c`` of a sequence ``seq`` = (q, k, v, g, β) [HV, L, ·] (inputs of ``dtype``) from
    ``state`` [HV, K, cols]: (the next state, the chunk's output rows [HV, 64, cols]); ``values``: the
    real V, else V = 0 (a segment's M)."""
    q, k, v, g, beta = seq
    HV = q.shape[0]
    s = slice(c * CHUNK, (c + 1) * CHUNK)
    k_c, q_c = k[:, s], q[:, s]
    v_c = v[:, s] if values else torch.zeros(HV, CHUNK, state.shape[-1], dtype=F64, device=q.device)
    gam = torch.cumsum(g[:, s], -1)
    t_c = tbeta(k_c, gam, beta[:, s], roundings, dtype)
    decayed = torch.exp(gam)[..., None]
    to_end = torch.exp(gam[:, -1:] - gam)[..., None]
    state_op = round_to(state, dtype) if roundings.state_operand_16 else state
    if roundings.wy:
        t16 = round_to(t_c, dtype)
        b = 1.0 if roundings.beta_in_t else beta[:, s][..., None]  # else (I + A)^{-1}: β on the operands
        w = round_to(dot(t16, round_to(k_c * decayed * b, dtype), "input", dtype), dtype)
        u = round_to(dot(t16, round_to(v_c * b, dtype), "input", dtype), dtype)
        v_new = round_to(u - dot(w, state_op, "input", dtype), dtype)
    elif roundings.wy_in_pass:
        w = round_to(dot(t_c, round_to(k_c * decayed, dtype), "input", dtype), dtype)
        u = dot(t_c, v_c, "input", dtype)
        v_new = round_to(u - dot(w, state_op, "input", dtype), torch.float32)
    elif roundings.residual_split:
        b = 1.0 if roundings.beta_in_t else beta[:, s][..., None]  # as the residual's rows below
        ks = round_to(dot(k_c, state_op, "input", dtype) * decayed * b, dtype)
        v_new = round_to(t_c @ (v_c * b) - t_c @ ks, torch.float32)
    else:
        residual = v_c - dot(k_c, state_op, "input", dtype) * decayed
        if not roundings.beta_in_t:  # (I + A)^{-1} stored, β applied to the residual's rows
            residual = residual * beta[:, s][..., None]
        if roundings.residual_16:
            residual = round_to(residual, dtype)
        v_new = round_to(t_c @ residual, torch.float32)
    v_dec = v_new * to_end
    if roundings.v_new_16:
        v_dec = round_to(v_dec, dtype)
    decay = torch.exp(gam[:, -1])[:, None, None]
    new_state = round_to(state * decay + k_c.transpose(-1, -2) @ v_dec, torch.float32)
    rows = torch.arange(CHUNK, device=q.device)
    e = torch.exp(gam[..., :, None] - gam[..., None, :])
    p = torch.where(rows[:, None] >= rows[None, :], (q_c @ k_c.transpose(-1, -2)) * scale * e, 0.0)
    p = round_to(p, dtype) if roundings.p_16 else p
    new = round_to(v_new, dtype) if roundings.v_new_16 else v_new
    return new_state, (q_c @ state_op) * (decayed * scale) + p @ new


def emulate_prefill(
    inputs: dict, scale: float, roundings: Roundings, seg_chunks: int | None = None
) -> tuple[torch.Tensor, torch.Tensor]:
    """The chunked prefill of ``inputs`` (``gdn.prefill``'s keyword arguments) with ``roundings``:
    (o [T, HV, V], each sequence's final state [N, HV, V, K], pool layout), float64. Padding slots are
    not modelled (zero output, state as given)."""
    device = inputs["v"].device
    T, HV, V = inputs["v"].shape
    K = inputs["k"].shape[2]
    dtype = inputs["v"].dtype
    o = torch.zeros(T, HV, V, dtype=F64, device=device)
    finals = []
    cu = inputs["cu_seqlens"].tolist()
    for n in range(len(cu) - 1):
        *seq, length = _per_head(inputs, n)
        n_chunks = seq[0].shape[1] // CHUNK
        state0 = _initial_state(inputs, n, K, V, HV, device)

        def run(state, c):  # a chunk with its output rows stored
            state, o_c = _step(seq, c, state, roundings, scale, dtype)  # noqa: B023 (called in this iteration)
            lo = cu[n] + c * CHUNK  # noqa: B023
            hi = min(lo + CHUNK, cu[n] + length)  # noqa: B023
            o[lo:hi] = o_c[:, : hi - lo].transpose(0, 1)
            return state

        if seg_chunks is None or n_chunks <= seg_chunks:
            state = state0
            for c in range(n_chunks):
                state = run(state, c)
        else:
            segments = -(-n_chunks // seg_chunks)
            starts = [state0]
            for j in range(segments - 1):
                chunks = range(j * seg_chunks, (j + 1) * seg_chunks)
                if j == 0:
                    end = state0
                    for c in chunks:
                        end = _step(seq, c, end, roundings, scale, dtype)[0]
                else:  # S' = M S + B: B from S = 0 with V, M from S = I with V = 0
                    b = torch.zeros(HV, K, V, dtype=F64, device=device)
                    m = torch.eye(K, dtype=F64, device=device).expand(HV, K, K).clone()
                    for c in chunks:
                        b = _step(seq, c, b, roundings, scale, dtype)[0]
                        m = _step(seq, c, m, roundings, scale, dtype, values=False)[0]
                    end = round_to(dot(m, starts[-1], roundings.carry) + b, torch.float32)
                starts.append(end)
            for j in range(segments):
                state = starts[j]
                for c in range(j * seg_chunks, min((j + 1) * seg_chunks, n_chunks)):
                    state = run(state, c)
        finals.append(state.transpose(-1, -2))
    return o, torch.stack(finals)


def reference_prefill(inputs: dict, scale: float) -> tuple[torch.Tensor, torch.Tensor]:
    """The token recurrence (``kernels/gdn/naive.py``) in float64 on the inputs' values: (o [T, HV, V],
    each sequence's final state [N, HV, V, K], pool layout)."""
    T, HV, V = inputs["v"].shape
    K = inputs["k"].shape[2]
    device = inputs["v"].device
    o = torch.zeros(T, HV, V, dtype=F64, device=device)
    finals = []
    cu = inputs["cu_seqlens"].tolist()
    for n in range(len(cu) - 1):
        q, k, v, g, beta, length = _per_head(inputs, n)
        state = _initial_state(inputs, n, K, V, HV, device)
        for t in range(length):
            state = state * torch.exp(g[:, t])[:, None, None]
            u = beta[:, t, None] * (v[:, t] - torch.einsum("hkv,hk->hv", state, k[:, t]))
            state = state + k[:, t, :, None] * u[:, None, :]
            o[cu[n] + t] = torch.einsum("hkv,hk->hv", state, q[:, t]) * scale
        finals.append(state.transpose(-1, -2))
    return o, torch.stack(finals)


def rel(x: torch.Tensor, ref: torch.Tensor) -> float:
    """‖x − ref‖ / ‖ref‖ in float64."""
    x, ref = x.to(F64), ref.to(F64).to(x.device)
    return ((x - ref).norm() / ref.norm()).item()
