"""Tests of `reward_lens_tl.bridge` that run in the default (TransformerLens 3.9) environment."""
