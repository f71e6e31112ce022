"""The shared set-up of the TransformerLens ports (`test_habits.py`, `test_tl_habits.py`).

The HF side of every comparison: a batch's rows without their padding, each scored alone by the
plain HF model, with plain torch hooks where a cell intervenes. (Each port declares its own
`kind`/`model`/`hf` fixtures: fixtures imported from another module would shadow names.)
"""

from __future__ import annotations

import torch


def rows(model, ids):
    """The batch's rows without their padding (what HF scores one at a time)."""
    return [r[r != model.pad_token_id][None] for r in ids]


def hf_score(hf, row, hooks=()):
    """HF's reward of one unpadded row, with plain torch hooks ``(module, fn, pre)``."""
    handles = [
        (m.register_forward_pre_hook(fn) if pre else m.register_forward_hook(fn))
        for m, fn, pre in hooks
    ]
    try:
        with torch.no_grad():
            out = hf(input_ids=row)
    finally:
        for h in handles:
            h.remove()
    return out.score[0] if hasattr(out, "score") and out.score is not None else out.logits[0, 0]


def hf_rewards(hf, model, ids, hooks_for_row=lambda i: ()):
    return torch.stack([hf_score(hf, r, hooks_for_row(i)) for i, r in enumerate(rows(model, ids))])


def hf_layer_outputs(hf, row):
    """Each decoder layer's output (TL's ``resid_post``) for one unpadded row."""
    outs = []
    hooks = [(layer, lambda m, i, o: outs.append(o), False) for layer in hf.model.layers]
    hf_score(hf, row, hooks)
    return outs
