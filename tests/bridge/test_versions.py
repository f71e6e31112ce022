"""The bridge backend in the default environment: it refuses with the install command."""

import pytest

from reward_lens_tl.bridge.versions import require_sae_lens, transformer_lens_version
from reward_lens_tl.errors import TransformerLensVersionError

TL3 = int(transformer_lens_version().split(".")[0]) < 4


@pytest.mark.skipif(not TL3, reason="checks the refusal under TransformerLens 3 (default tier)")
def test_booting_a_bridge_under_tl3_says_how_to_install_tl4():
    from reward_lens_tl.bridge import boot_reward_bridge
    from reward_lens_tl.testing import tiny_reward_model

    with pytest.raises(TransformerLensVersionError, match=r"3\.9.*requirements-tl4\.txt"):
        boot_reward_bridge(tiny_reward_model("llama"))


@pytest.mark.skipif(not TL3, reason="checks the default environment (TransformerLens 3)")
def test_sae_tools_import_under_tl3():
    require_sae_lens()
    import reward_lens_tl.sae  # noqa: F401
