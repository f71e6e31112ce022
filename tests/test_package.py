"""The package's lazy top-level exports."""

import reward_lens_tl


def test_every_export_resolves():
    assert sorted(reward_lens_tl.__all__) == sorted(reward_lens_tl._EXPORTS)
    for name in reward_lens_tl.__all__:
        assert getattr(reward_lens_tl, name).__name__ == name
