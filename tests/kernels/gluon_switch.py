"""``GluonSwitch``: the GPU tests' switch of the Gluon launch paths of ``gdn.prefill`` (which state pass,
the intra launch, PDL, other ``LaunchConfig`` fields), counting what really ran; the ``gluon`` fixture
(``conftest.py``) makes one per test."""

from __future__ import annotations

from stampgen.kernels.gdn import chunk


class GluonSwitch:
    """Turns a Gluon state pass on for ``gdn.prefill`` (``on()``) and counts its launches."""

    def __init__(self, monkeypatch):
        from stampgen.kernels.gdn import chunk_gluon, chunk_gluon_batch, chunk_gluon_fused, chunk_intra_gluon

        # state passes: "gluon" (chunk_gluon), "batch64" / "batch128" (chunk_gluon_batch), "fused"
        # (chunk_gluon_fused)
        self.calls = []
        self.pdl = []  # whether each was launched as a programmatic dependent of the intra launch
        self.p_in = []  # whether each read P made by the intra launch (``gluon_p_from_intra``)
        self.gluon_intra = []  # Gluon intra launches (``gluon_intra``)
        # their ``fused_makes_last`` (False: every chunk; True: none of a sequence's last segment of
        # ``seg_chunks`` chunks, whose Tβ the fused pass's worker makes: ``chunk_intra_gluon.launch``)
        # and ``seg_chunks``
        self.intra_fused_makes_last = []
        self.intra_seg_chunks = []
        self._monkeypatch = monkeypatch
        launch_intra = chunk_intra_gluon.launch

        def counted(module, name):
            launch = module.launch_state

            def launch_state(*args, **kwargs):
                # chunk_gluon_batch.launch_state's last argument is the LaunchConfig
                self.calls.append(name + (str(args[-1].gluon_batch_block_v) if name == "batch" else ""))
                self.pdl.append(kwargs.get("pdl", False))
                self.p_in.append(kwargs.get("p") is not None)
                return launch(*args, **kwargs)

            monkeypatch.setattr(module, "launch_state", launch_state)

        def counted_intra(*args, **kwargs):
            self.gluon_intra.append(args[0].shape)
            self.intra_fused_makes_last.append(kwargs.get("fused_makes_last", False))
            self.intra_seg_chunks.append(kwargs.get("seg_chunks", 1))
            return launch_intra(*args, **kwargs)

        counted(chunk_gluon, "gluon")
        counted(chunk_gluon_batch, "batch")
        counted(chunk_gluon_fused, "fused")
        monkeypatch.setattr(chunk_intra_gluon, "launch", counted_intra)
        self._default = chunk.launch_config
        # the Triton passes until on()
        self._pin(gluon_state=False, gluon_pdl=False, gluon_intra=False, gluon_batch=False)

    def on(self, pdl: bool = False, intra: bool = False, batch: int | None = None, **fields):
        """The intra launch before the state pass; with ``pdl`` the state pass its programmatic
        dependent (``gluon_pdl``); with ``intra`` the intra launch is the Gluon one (``gluon_intra``).
        With ``batch`` (a V tile) the Triton passes' launch 3 is ``chunk_gluon_batch``'s (``gluon_batch``;
        no PDL there), else ``chunk_gluon`` replaces the segment, carry and state passes. ``fields``:
        other ``LaunchConfig`` fields to pin."""
        if batch is None:
            self._pin(gluon_state=True, gluon_pdl=pdl, gluon_intra=intra, **fields)
        else:
            assert not pdl, "chunk_gluon_batch is not launched as a programmatic dependent"
            fields.setdefault("gluon_fused", False)  # the batch pass itself, not the fused one
            self._pin(
                gluon_state=False, gluon_pdl=False, gluon_intra=intra, gluon_batch=True,
                gluon_batch_block_v=batch, **fields,
            )  # fmt: skip

    def _pin(self, **fields):
        default = self._default
        self._monkeypatch.setattr(
            chunk, "launch_config", lambda *a, **kw: default(*a, **kw)._replace(**fields)
        )
