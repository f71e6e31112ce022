"""Judges and PRMs load like reward models: from a directory or a cached hub id (offline), in
bfloat16, and a directory is untrusted input (pickles and remote code refused, typed)."""

from __future__ import annotations

import json

import pytest
import torch

from reward_lens_tl.errors import UnsafeCheckpointError
from reward_lens_tl.hub import resolve_checkpoint
from reward_lens_tl.judges import HookedJudge, HookedPRM
from reward_lens_tl.testing import tiny_causal_lm
from tests.hub.test_hub import MAIN, V1, add_snapshot

TOL = 1e-4
VERDICT, TEMPLATE = ("w10", "w11"), "{prompt} w8 {response} w9"
ITEM = ("w12 w13 w14", "w20 w21")
PROMPT, STEPS = "w12 w13", ["w20 w21", "w22", "w23 w24"]


def hf_margin(hf, tok) -> torch.Tensor:
    ids = torch.tensor([tok(TEMPLATE.format(prompt=ITEM[0], response=ITEM[1]))["input_ids"]])
    with torch.no_grad():
        logits = hf(input_ids=ids).logits[0, -1]
    return logits[10] - logits[11]


def saved(folder, family: str = "llama", head: str = "lm", seed: int = 0):
    """A tiny HF model and its tokenizer saved in ``folder`` (safetensors), and the model."""
    hf, tok = tiny_causal_lm(family, head=head, seed=seed)
    hf.save_pretrained(folder)
    tok.save_pretrained(folder)
    assert any(folder.glob("*.safetensors"))
    return hf, tok


def load_judge(source, **kw) -> HookedJudge:
    return HookedJudge.from_pretrained(source, verdict=VERDICT, template=TEMPLATE, **kw)


def test_a_judge_loads_from_a_directory(tmp_path):
    hf, tok = saved(tmp_path)
    judge = load_judge(str(tmp_path))
    torch.testing.assert_close(judge.score(*ITEM), hf_margin(hf, tok), atol=TOL, rtol=0)
    torch.testing.assert_close(load_judge(tmp_path).score(*ITEM), judge.score(*ITEM))


def test_a_directory_with_an_explicit_tokenizer(tmp_path):
    """transformers reads a Qwen2 directory's tokenizer as Qwen2's own class, which does not
    know the tiny word-level vocabulary: ``tokenizer=`` overrides the directory's."""
    hf, tok = saved(tmp_path, "qwen2")
    judge = load_judge(str(tmp_path), tokenizer=tok)
    torch.testing.assert_close(judge.score(*ITEM), hf_margin(hf, tok), atol=TOL, rtol=0)


@pytest.mark.parametrize(("kind", "head"), [("token", "lm"), ("value", "value")])
def test_a_prm_loads_from_a_directory(tmp_path, kind, head):
    hf, _ = saved(tmp_path, head=head)
    options = dict(kind=kind, step_tag="w40", labels=("w41", "w42"), step_format="{step} {tag}")
    from_dir = HookedPRM.from_pretrained(str(tmp_path), **options)
    in_memory = HookedPRM.from_pretrained(hf, tokenizer=from_dir.tokenizer, **options)
    scores = from_dir.step_rewards(PROMPT, STEPS)
    assert scores.shape == (3,)
    torch.testing.assert_close(scores, in_memory.step_rewards(PROMPT, STEPS), atol=TOL, rtol=0)


def test_a_judge_loads_from_a_cached_hub_id_at_a_revision(tmp_path):
    cache = tmp_path / "cache"
    models = {}
    for name, seed, commit in (("main", 0, MAIN), ("v1", 1, V1)):
        folder = tmp_path / name
        folder.mkdir()
        models[name] = saved(folder, seed=seed)
        add_snapshot(cache, "org/tiny-judge", folder, commit, refs=[name])
    for revision in ("main", "v1"):
        judge = load_judge("org/tiny-judge", cache_dir=cache, revision=revision)
        torch.testing.assert_close(
            judge.score(*ITEM), hf_margin(*models[revision]), atol=TOL, rtol=0
        )
    assert (hf_margin(*models["main"]) - hf_margin(*models["v1"])).abs() > 1e-2


def test_bfloat16_scores_are_close_to_float32():
    hf, tok = tiny_causal_lm("llama")
    options = dict(tokenizer=tok, kind="likert", verdict=("w10", "w11", "w12"), template=TEMPLATE)
    f32 = HookedJudge.from_pretrained(hf, **options)
    b16 = HookedJudge.from_pretrained(hf, dtype=torch.bfloat16, **options)
    assert b16.W_E.dtype == torch.bfloat16 and f32.W_E.dtype == torch.float32
    items = [ITEM, ("w15", "w30 w31 w32"), ("w16 w17", "w33")]
    a = torch.stack([f32.score(*item) for item in items])
    b = torch.stack([b16.score(*item) for item in items]).float()
    torch.testing.assert_close(b, a, rtol=5e-2, atol=0)


def test_bfloat16_prm_step_scores_are_close_to_float32():
    hf, tok = tiny_causal_lm("qwen2")
    options = dict(tokenizer=tok, step_tag="w40", labels=("w41", "w42"))
    a = HookedPRM.from_pretrained(hf, **options).step_rewards(PROMPT, STEPS)
    b = HookedPRM.from_pretrained(hf, dtype=torch.bfloat16, **options).step_rewards(PROMPT, STEPS)
    torch.testing.assert_close(b.float(), a, rtol=5e-2, atol=0)


def test_a_pickle_only_directory_is_refused(tmp_path):
    hf, _ = saved(tmp_path)
    for file in tmp_path.glob("*.safetensors"):
        file.unlink()
    torch.save(hf.state_dict(), tmp_path / "pytorch_model.bin")
    with pytest.raises(UnsafeCheckpointError, match="safetensors"):
        load_judge(str(tmp_path))
    with pytest.raises(UnsafeCheckpointError, match="safetensors"):
        HookedPRM.from_pretrained(str(tmp_path), step_tag="w40", labels=("w41", "w42"))


def test_a_cached_pickle_only_snapshot_is_refused(tmp_path):
    source = tmp_path / "pickled"
    source.mkdir()
    hf, _ = saved(source)
    for file in source.glob("*.safetensors"):
        file.unlink()
    torch.save(hf.state_dict(), source / "pytorch_model.bin")
    add_snapshot(tmp_path / "cache", "org/pickled-judge", source, MAIN, refs=["main"])
    with pytest.raises(UnsafeCheckpointError, match="safetensors"):
        load_judge("org/pickled-judge", cache_dir=tmp_path / "cache")


def with_remote_code(folder, model_type: str):
    """Give the saved checkpoint's config an ``auto_map`` to a module that leaves a marker."""
    marker = folder / "EXECUTED"
    config = json.loads((folder / "config.json").read_text())
    config.update(
        model_type=model_type,
        auto_map={
            "AutoConfig": "modeling_evil.EvilConfig",
            "AutoModelForCausalLM": "modeling_evil.EvilForCausalLM",
        },
    )
    (folder / "config.json").write_text(json.dumps(config))
    (folder / "modeling_evil.py").write_text(f"open({str(marker)!r}, 'w').write('ran')\n")
    return marker


def test_a_config_with_auto_map_is_refused_and_its_code_never_runs(tmp_path, monkeypatch):
    saved(tmp_path)
    marker = with_remote_code(tmp_path, "evil_judge")
    monkeypatch.setattr("builtins.input", lambda *a: pytest.fail("read standard input"))
    with pytest.raises(UnsafeCheckpointError, match="auto_map"):
        load_judge(str(tmp_path))
    with pytest.raises(UnsafeCheckpointError, match="auto_map"):
        HookedPRM.from_pretrained(tmp_path, step_tag="w40", labels=("w41", "w42"))
    assert not marker.exists(), "the checkpoint's code was executed"


def test_auto_map_on_a_known_architecture_is_ignored_not_run(tmp_path):
    """As for reward models: a model type transformers knows is loaded by transformers' own
    class (``trust_remote_code=False``); the checkpoint's code is never imported."""
    hf, tok = saved(tmp_path)
    marker = with_remote_code(tmp_path, "llama")
    torch.testing.assert_close(
        load_judge(str(tmp_path)).score(*ITEM), hf_margin(hf, tok), atol=TOL, rtol=0
    )
    assert not marker.exists(), "the checkpoint's code was executed"


def test_resolve_checkpoint_is_what_loads_a_hub_id(tmp_path):
    """The hub id and the snapshot directory it resolves to give the same judge."""
    folder = tmp_path / "src"
    folder.mkdir()
    saved(folder)
    add_snapshot(tmp_path / "cache", "org/j", folder, MAIN, refs=["main"])
    path = resolve_checkpoint("org/j", cache_dir=tmp_path / "cache")
    by_id = load_judge("org/j", cache_dir=tmp_path / "cache")
    torch.testing.assert_close(by_id.score(*ITEM), load_judge(path).score(*ITEM), atol=0, rtol=0)


@pytest.mark.parametrize("family", ["gpt2", "qwen2"])
def test_a_causal_lm_whose_config_has_no_pad_id_loads_with_the_tokenizers(family):
    """Causal LMs often ship no ``pad_token_id`` (GPT-2, Llama-3): the load-time check reads
    HF at the last token of its unpadded rows, and batches are padded with the tokenizer's."""
    hf, tok = tiny_causal_lm(family, pad_token_id=None)
    assert hf.config.pad_token_id is None and tok.pad_token_id == 0
    judge = load_judge(hf, tokenizer=tok)
    prm = HookedPRM.from_pretrained(hf, tokenizer=tok, step_tag="w40", labels=("w41", "w42"))
    items = [ITEM, ("w15", "w30 w31 w32 w33 w34 w35")]
    ids = judge.item_ids(*[list(col) for col in zip(*items, strict=True)])
    assert int((ids == 0).sum()) > 0  # left padded
    want = []
    for prompt, response in items:
        row = tok(TEMPLATE.format(prompt=prompt, response=response))["input_ids"]
        with torch.no_grad():
            logits = hf(input_ids=torch.tensor([row])).logits[0, -1]
        want.append(logits[10] - logits[11])
    torch.testing.assert_close(judge.rewards(ids), torch.stack(want), atol=TOL, rtol=0)
    assert prm.step_rewards(PROMPT, STEPS).shape == (3,)


def test_without_any_pad_id_single_items_work_and_ragged_batches_say_to_set_one():
    from reward_lens_tl.errors import MissingPadTokenError

    hf, tok = tiny_causal_lm("gpt2", pad_token_id=None)
    tok.pad_token = None
    judge = load_judge(hf, tokenizer=tok)  # verified at load on unpadded rows
    assert judge.pad_token_id is None
    torch.testing.assert_close(judge.score(*ITEM), hf_margin(hf, tok), atol=TOL, rtol=0)
    same = judge.item_ids(["w12 w13 w14", "w15 w16 w17"], ["w20 w21", "w30 w31"])
    assert same.shape[0] == 2  # equal lengths: nothing to pad
    with pytest.raises(MissingPadTokenError, match="set tokenizer.pad_token"):
        judge.item_ids(["w12", "w15 w16 w17"], ["w20", "w30 w31"])
