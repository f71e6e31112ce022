"""The TransformerLens line the SAE tools need, checked when `reward_lens_tl.sae` is imported.

Internal (no public names): imported first by `reward_lens_tl.sae`, so that under
TransformerLens 4, where sae_lens does not import, the import fails with a typed
`BridgeUnsupportedError` that says which environment runs the SAE tools, instead of an
`ImportError` from deep inside a dependency (`reward_lens_tl.bridge.versions.require_sae_lens`).
"""

from __future__ import annotations

from ..bridge.versions import require_sae_lens

__all__: list[str] = []

require_sae_lens()
