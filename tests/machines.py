"""The machines the runtime tests describe to ``runner_facts_for``: one place, so that every test file's
"CPU" or "SM90" means the same device facts.

``SM90`` is a Hopper machine on which a GDN runner meets every FlashInfer-prefill condition (fp32 state
pool, 128-wide heads, ``flashinfer.gdn_prefill`` importable); ``CPU`` one on which no CUDA rule applies.
"""

CPU = dict(
    platform="cpu",
    sm=0,
    sm_minor=0,
    cuda=0,
    pool_dtype="float32",
    head_k_dim=128,
    head_v_dim=128,
    flashinfer_gdn_prefill=False,
)
SM90 = CPU | dict(platform="cuda", sm=9, cuda=13, flashinfer_gdn_prefill=True)
