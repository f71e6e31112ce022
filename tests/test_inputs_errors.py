"""Encoding conversations: refusals are typed (a template without a system role, empty ids)
and unknown words are not silent (one warning per template, naming it). Each test failed on
the wave-1 code (split from the wave-1 review's regression file)."""

import warnings

import pytest
import torch

from reward_lens_tl import pad_batch
from reward_lens_tl.errors import EmptyInputError, TemplateError
from reward_lens_tl.inputs import UnknownTokenWarning, _warned_unknown


def test_template_rejection_and_empty_ids_are_typed(zoo_scalar):
    system = [{"role": "system", "content": "soup"}, {"role": "user", "content": "soup"}]
    with pytest.raises(TemplateError, match="system"):
        zoo_scalar.encode(system, "soup")
    with pytest.raises(EmptyInputError):
        pad_batch([[]], 0)
    with pytest.raises(EmptyInputError):
        zoo_scalar.rewards(torch.zeros((1, 0), dtype=torch.long))


def test_unknown_tokens_warn_once_and_name_the_template(zoo_scalar):
    _warned_unknown.clear()
    with pytest.warns(UnknownTokenWarning, match="chat template"):
        zoo_scalar.encode("tell me about cooking stuff", "sure , here you go my friend")
    with warnings.catch_warnings():
        warnings.simplefilter("error", UnknownTokenWarning)
        zoo_scalar.encode("tell me about cooking stuff", "sure , here you go my friend")  # once
        zoo_scalar.encode("explain how to bake bread", "the oven and the flour")  # known words
