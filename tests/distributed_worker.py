"""Run by ``torchrun`` in tests/test_distributed.py: the pair-set analyses on a tiny model.

``python -m torch.distributed.run --nproc_per_node N tests/distributed_worker.py OUT.pt``;
every rank saves :func:`analyses`'s results to ``OUT.pt.<rank>``. The test computes the same in one
process and compares exactly. ``... distributed_worker.py OUT.pt report PAIRS DIR`` instead runs
:func:`files`: benchmark scoring with a score file and the HTML report, written into ``DIR``.
"""

from __future__ import annotations

import sys
from pathlib import Path
from types import SimpleNamespace

import torch

from reward_lens_tl import HookedRewardModel
from reward_lens_tl.attribution import pair_attribution
from reward_lens_tl.data import RankedItem
from reward_lens_tl.distributed import world
from reward_lens_tl.lens import pair_lens
from reward_lens_tl.scoring import score_pairs
from reward_lens_tl.testing import tiny_reward_model, tiny_tokenizer

TOO_LONG = 4  # this pair's response does not fit the context of 64


def pair_set(n: int = 11) -> list[SimpleNamespace]:
    """``n`` pairs of different lengths, one too long, with subsets and records."""
    gen = torch.Generator().manual_seed(0)

    def words(k: int) -> str:
        return " ".join(f"w{int(i)}" for i in torch.randint(6, 97, (k,), generator=gen))

    pairs = []
    for i in range(n):
        chosen = words(80 if i == TOO_LONG else 2 + i % 5)
        pairs.append(
            SimpleNamespace(
                prompt=words(3 + i % 3),
                chosen=chosen,
                rejected=words(1 + (i * 7) % 6),
                subset=f"s{i % 2}",
                record=100 + i,
            )
        )
    return pairs


def model() -> HookedRewardModel:
    return HookedRewardModel.from_pretrained(tiny_reward_model("llama"), tiny_tokenizer())


def analyses(model: HookedRewardModel) -> dict:
    """Every pair-set analysis, as plain tensors/tuples (streamed input: a generator)."""
    pairs = pair_set()
    good = [p for i, p in enumerate(pairs) if i != TOO_LONG]
    scores = score_pairs(model, iter(pairs), batch_size=3, on_error="skip")
    small = score_pairs(model, good[:2], batch_size=4)  # one batch: rank 1 gets nothing
    attr = pair_attribution(model, iter(good), batch_size=3)
    lens = pair_lens(model, good, batch_size=3, resolution="sublayer")
    try:
        score_pairs(model, pairs, batch_size=3)  # the too-long pair is in batch 1 (rank 1)
        error = None
    except Exception as err:  # noqa: BLE001 - the error itself is the result compared
        error = (type(err).__name__, str(err))
    return {
        "chosen": scores.chosen,
        "rejected": scores.rejected,
        "indices": scores.indices,
        "records": scores.records,
        "subsets": scores.subsets,
        "skipped": [str(s) for s in scores.skipped],
        "small": small.margins,
        "attr_values": attr.margin.values,
        "attr_labels": attr.margin.labels,
        "attr_rewards": attr.chosen.rewards,
        "lens_margins": lens.margins,
        "lens_labels": lens.labels,
        "error": error,
    }


def files(model: HookedRewardModel, pairs_file: str, out: Path) -> dict:
    """Eval scoring (pairs and ranked items, with score files) and the report, into ``out``."""
    from reward_lens_tl.evals.run import score_items
    from reward_lens_tl.report import build_report
    from reward_lens_tl.zoo import zoo_path

    pairs = [p for i, p in enumerate(pair_set()) if i != TOO_LONG]
    ranked = [
        RankedItem(p.prompt, correct=p.chosen, wrong=(p.rejected, p.chosen[:5]), id=f"m{i}")
        for i, p in enumerate(pairs)
    ]
    scored = score_items(model, pairs, out=out / "pairs.jsonl", batch_size=3, progress=False)
    ranks = score_items(model, ranked, out=out / "ranked.jsonl", batch_size=4, progress=False)
    numbers = build_report(zoo_path("scalar"), pairs_file, out / "report", progress=False)
    return {
        "pair_scores": [r.to_json() for r in scored.scores],
        "ranked_scores": [r.to_json() for r in ranks.scores],
        "report": numbers,
    }


if __name__ == "__main__":
    torch.set_num_threads(1)
    if sys.argv[2:3] == ["report"]:
        results = files(model(), sys.argv[3], Path(sys.argv[4]))
    else:
        results = analyses(model())
    rank, size = world()
    results["world"] = size
    torch.save(results, f"{sys.argv[1]}.{rank}")  # every rank holds the full result
