"""`skip_unless_tl4()`, what every module of tests/tl4 calls first, and the families tested."""

import pytest

from reward_lens_tl.bridge.versions import transformer_lens_version

#: The reward-model families the bridge backend boots (`reward_lens_tl.testing` names).
FAMILIES = ["llama", "mistral", "qwen2", "qwen3", "gemma2", "gpt2"]


def skip_unless_tl4() -> None:
    """Skip the calling test module unless TransformerLens 4 is installed (`make test-tl4`)."""
    version = transformer_lens_version()
    if int(version.split(".")[0]) < 4:
        pytest.skip(
            f"the TransformerBridge backend needs TransformerLens 4, this environment has "
            f"{version}; run `make test-tl4`",
            allow_module_level=True,
        )
