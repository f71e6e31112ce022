"""Streaming conversion (reward_lens_tl.streaming): the same weights as converting the whole
state dict at once, in bounded memory, with a cheap check at load and typed errors for broken
sharded checkpoints.

The reference here is the conversion as it was before streaming, written out with plain
TransformerLens: the HF model loaded whole, its TL state dict, ``load_and_process_state_dict``
on a model built in float32, then ``.to(dtype)``.
"""

from __future__ import annotations

import json

import pytest
import torch
from safetensors.torch import load_file, save_file

from reward_lens_tl import HookedRewardModel, streaming
from reward_lens_tl.adapters import LlamaAdapter
from reward_lens_tl.errors import (
    CheckpointError,
    ConversionMismatchError,
    InvalidArgumentError,
    NonFiniteWeightsError,
)
from reward_lens_tl.loading import convert_hf_model
from reward_lens_tl.model import MODEL_KINDS, load_reward_model
from reward_lens_tl.testing import random_batch, tiny_reward_model, tiny_tokenizer
from reward_lens_tl.weights import CheckpointWeights

FAMILIES = ["llama", "mistral", "qwen2", "gemma2", "gpt2", "qwen3", "armorm"]


@pytest.fixture(autouse=True)
def mlp_in_blocks(monkeypatch):
    """Every test here processes MLPs in blocks of 48 hidden units (the tiny models have 128 or
    256, so 3 or 6 blocks, the last one short); the rest of the suite, with the default 4096,
    covers MLPs processed whole."""
    monkeypatch.setattr(streaming, "MLP_COLUMNS", 48)


def whole_conversion(source, dtype=torch.float32, **options):
    """The pre-streaming conversion, with plain TransformerLens calls."""
    conv = convert_hf_model(source, **options)
    model = MODEL_KINDS[conv.adapter.model_kind](
        conv.cfg,
        adapter=conv.adapter,
        pad_token_id=conv.pad_token_id,
        eos_token_id=conv.eos_token_id,
        bos_token_id=conv.bos_token_id,
        objective_names=conv.objective_names,
        tokenizer=conv.tokenizer,
    )
    flags = {"refactor_factored_attn_matrices": False, **conv.fold_flags}
    model.load_and_process_state_dict(conv.state_dict, **flags)
    if conv.extras:
        model.attach_gating(**conv.extras)
    return (model.to(dtype) if dtype != torch.float32 else model).eval()


def max_difference(a, b, skip=()) -> float:
    sa, sb = a.state_dict(), b.state_dict()
    assert sa.keys() == sb.keys(), set(sa) ^ set(sb)
    keys = [k for k in sa if sa[k].numel() and k not in skip]
    diffs = [(sa[k].double() - sb[k].double()).abs().max() for k in keys]
    return float(max(diffs))


def save(hf, path, **kwargs):
    hf.save_pretrained(path, safe_serialization=True, **kwargs)
    tiny_tokenizer().save_pretrained(path)
    return path


@pytest.fixture(scope="module", params=FAMILIES)
def family_checkpoint(request, tmp_path_factory):
    hf = tiny_reward_model(request.param)
    return request.param, hf, save(hf, tmp_path_factory.mktemp(request.param))


def test_streamed_checkpoint_equals_whole_conversion(family_checkpoint):
    family, hf, path = family_checkpoint
    streamed = HookedRewardModel.from_pretrained(path, verify=False)
    reference = whole_conversion(hf)
    assert max_difference(streamed, reference) <= 1e-6
    ids, mask = random_batch(3, [12, 9, 7])
    if family == "armorm":  # the gate reads the position after the prompt-end marker
        ids[:, -4:-2] = torch.tensor(streamed.gating_token_pattern)
    torch.testing.assert_close(streamed.rewards(ids, mask), reference.rewards(ids, mask))
    expected = streamed.adapter.reference_rewards(hf, ids[:1])  # plain HF, one row unpadded
    torch.testing.assert_close(streamed.rewards(ids[:1]), expected.reshape(-1), atol=1e-4, rtol=0)


def test_truncated_verification_passes_for_every_family(family_checkpoint):
    import reward_lens_tl.model as model_module

    family, hf, path = family_checkpoint
    error = model_module.parity_at_load(path)
    assert 0 <= error <= 1e-4
    model = HookedRewardModel.from_pretrained(path, verify=True)
    assert model.cfg.n_layers == hf.config.num_hidden_layers


@pytest.mark.parametrize(
    "options",
    [
        dict(fold_ln=False, center_writing_weights=False, fold_value_biases=False),
        dict(center_writing_weights=False),
        dict(fold_value_biases=False),
        dict(dtype=torch.bfloat16),
        dict(dtype="float16", fold_ln=False),
    ],
    ids=["raw", "no_centring", "no_value_bias_fold", "bf16", "fp16_raw"],
)
@pytest.mark.parametrize("family", ["gpt2", "llama", "gemma2"])
def test_every_option_streams_to_the_same_weights(tmp_path, family, options):
    hf = tiny_reward_model(family)
    path = save(hf, tmp_path)
    dtype = {"bfloat16": torch.bfloat16, "float16": torch.float16}.get(
        str(options.get("dtype", "")).replace("torch.", ""), torch.float32
    )
    whole_options = {k: v for k, v in options.items() if k != "dtype"}
    streamed = HookedRewardModel.from_pretrained(path, verify=False, **options)
    reference = whole_conversion(hf, dtype, **whole_options)
    assert streamed.cfg.dtype == dtype and next(streamed.parameters()).dtype == dtype
    assert streamed.cfg.normalization_type == reference.cfg.normalization_type
    assert max_difference(streamed, reference) <= 1e-6


@pytest.mark.parametrize("target", [torch.bfloat16, torch.float32], ids=["to_bf16", "to_fp32"])
@pytest.mark.parametrize("family", FAMILIES)
def test_a_bf16_checkpoint_streams_to_the_float32_processed_weights_bit_for_bit(
    tmp_path, family, target
):
    """A checkpoint stored in the target dtype is converted without a float32 copy of each
    weight (rearranged as stored, scaled block by block behind an RMS norm): the weights are
    still exactly those of the float32 processing, cast once (the reference reads the same
    bf16 values into float32 and converts them whole with plain TransformerLens)."""
    hf = tiny_reward_model(family).to(torch.bfloat16)
    path = save(hf, tmp_path)
    streamed = HookedRewardModel.from_pretrained(path, verify=False, dtype=target)
    reference = whole_conversion(hf.float(), target)
    assert next(streamed.parameters()).dtype == target
    # GPT-2's LayerNorm centring, done per part, rounds differently in float32 (≤ 1e-8 here)
    exact = target == torch.bfloat16 or family != "gpt2"
    assert max_difference(streamed, reference) <= (0.0 if exact else 1e-6)


def test_refactored_attention_streams_to_the_same_weights(tmp_path):
    hf = tiny_reward_model("gpt2")
    path = save(hf, tmp_path)
    streamed = HookedRewardModel.from_pretrained(path, refactor_factored_attn_matrices=True)
    reference = whole_conversion(hf, refactor_factored_attn_matrices=True)
    assert max_difference(streamed, reference) <= 1e-6


@pytest.mark.parametrize("family", ["gpt2", "llama", "armorm"])
def test_in_memory_models_stream_too_and_are_not_modified(family):
    hf = tiny_reward_model(family)
    before = {k: v.clone() for k, v in hf.state_dict().items()}
    streamed = HookedRewardModel.from_pretrained(hf, verify=False)
    assert max_difference(streamed, whole_conversion(hf)) <= 1e-6
    after = hf.state_dict()
    assert all(torch.equal(after[k], v) for k, v in before.items())


@pytest.mark.parametrize("in_memory", [False, True], ids=["checkpoint", "in_memory"])
@pytest.mark.parametrize("family", ["gpt2", "llama", "armorm"])
def test_embedding_processed_in_blocks_of_rows(tmp_path, monkeypatch, family, in_memory):
    hf = tiny_reward_model(family)
    path = save(hf, tmp_path)
    monkeypatch.setattr(streaming, "EMBEDDING_ROWS", 7)  # vocab 97: 14 blocks, the last short
    read_rows = CheckpointWeights.read_rows
    blocks: list[tuple[int, int]] = []

    def recording(self, name, start, stop, dtype=None):
        blocks.append((start, stop))
        return read_rows(self, name, start, stop, dtype)

    monkeypatch.setattr(CheckpointWeights, "read_rows", recording)
    streamed = HookedRewardModel.from_pretrained(hf if in_memory else path, verify=False)
    assert blocks == ([] if in_memory else [(i, i + 7) for i in range(0, 97, 7)])
    assert max_difference(streamed, whole_conversion(hf)) <= 1e-6
    if family == "gpt2":  # LayerNorm: every row of W_E is centred
        W_E = streamed.W_E
        torch.testing.assert_close(W_E.mean(-1), torch.zeros(W_E.shape[0]), atol=1e-6, rtol=0)


def test_without_a_layer_list_the_whole_model_is_one_part(tmp_path, monkeypatch):
    hf = tiny_reward_model("gemma2")
    path = save(hf, tmp_path)
    monkeypatch.setattr("reward_lens_tl.loading.find_layer_list", lambda model, n: None)
    with pytest.warns(streaming.WholeModelWarning, match="one part"):
        streamed = HookedRewardModel.from_pretrained(path, verify=True)
    assert max_difference(streamed, whole_conversion(hf)) <= 1e-6


def test_mlp_blocks_are_what_tl_processes(monkeypatch):
    hf = tiny_reward_model("gpt2")
    sizes: list[int] = []
    process = streaming.process_weights

    def recording(part, cfg, flags):
        if "blocks.0.mlp.W_in" in part:
            sizes.append(part["blocks.0.mlp.W_in"].shape[1])
        return process(part, cfg, flags)

    monkeypatch.setattr(streaming, "process_weights", recording)
    streamed = HookedRewardModel.from_pretrained(hf)
    assert sizes == [48, 48, 48, 48, 48, 16] * 2  # d_mlp 256, 2 layers
    assert max_difference(streamed, whole_conversion(hf)) <= 1e-6


def test_when_tl_needs_the_mlp_with_the_rest_the_layer_is_processed_whole(monkeypatch):
    hf = tiny_reward_model("llama")
    process = streaming.process_weights
    calls: list[bool] = []

    def needs_mlp(part, cfg, flags):  # what TL does for a layout whose MLP it cannot skip
        has_attention = "blocks.0.attn.W_Q" in part
        calls.append(has_attention and "blocks.0.mlp.W_in" in part)
        if has_attention and "blocks.0.mlp.W_in" not in part:
            raise AssertionError("MLP W_in not found")
        return process(part, cfg, flags)

    monkeypatch.setattr(streaming, "process_weights", needs_mlp)
    streamed = HookedRewardModel.from_pretrained(hf)
    assert calls.count(True) == 2  # each layer's retry, whole
    assert max_difference(streamed, whole_conversion(hf)) <= 1e-6


def test_find_layer_list_names_the_module_list():
    layers = streaming.find_layer_list(tiny_reward_model("gpt2"), 2)
    assert layers is not None and layers.path == ("transformer", "h")
    assert streaming.find_layer_list(tiny_reward_model("llama"), 99) is None
    # ArmoRM's gate is a ModuleList too; with as many layers as the backbone, the backbone's wins
    armorm = tiny_reward_model("armorm", num_hidden_layers=3)
    assert len(armorm.gating.layers) == 3
    assert streaming.find_layer_list(armorm, 3).path == ("model", "layers")


def test_the_zoo_models_stream_layer_by_layer_without_a_warning(recwarn):
    from reward_lens_tl.zoo import zoo_path

    for kind in ("scalar", "multi"):
        HookedRewardModel.from_pretrained(zoo_path(kind))
    assert not [w for w in recwarn if issubclass(w.category, streaming.WholeModelWarning)]


# -- memory: at most one part of HF weights is ever real, and nothing is built twice -----------
def test_one_layer_of_hf_weights_in_memory_at_a_time(tmp_path, monkeypatch):
    hf = tiny_reward_model("llama", num_hidden_layers=4)
    path = save(hf, tmp_path)
    sizes = {k: v.numel() for k, v in hf.state_dict().items()}
    layer = max(
        sum(n for k, n in sizes.items() if k.startswith(f"model.layers.{i}.")) for i in range(4)
    )
    outside = sum(n for k, n in sizes.items() if not k.startswith("model.layers."))
    real_counts: list[int] = []
    loaded = streaming.CheckpointSource.loaded

    def counting(self, names, *args):
        context = loaded(self, names, *args)

        class Wrapper:
            def __enter__(self_inner):
                context.__enter__()
                real_counts.append(
                    sum(p.numel() for p in self.model.state_dict().values() if not p.is_meta)
                )

            def __exit__(self_inner, *exc):
                return context.__exit__(*exc)

        return Wrapper()

    monkeypatch.setattr(streaming.CheckpointSource, "loaded", counting)
    model = HookedRewardModel.from_pretrained(path, verify=False)
    buffers = sum(b.numel() for b in hf.buffers())
    assert len(real_counts) == 5  # the globals, then 4 layers
    assert real_counts[0] <= outside + buffers
    assert max(real_counts[1:]) <= layer + buffers
    assert all(not p.is_meta for p in model.parameters())


def test_each_part_is_placed_as_soon_as_it_is_converted(tmp_path, monkeypatch):
    hf = tiny_reward_model("llama", num_hidden_layers=3)
    path = save(hf, tmp_path)
    real_blocks: list[list[int]] = []
    place = streaming.Streamer.place

    def recording(self, part):
        place(self, part)
        blocks = self.model.blocks
        real_blocks.append(
            [i for i, b in enumerate(blocks) if not any(p.is_meta for p in b.parameters())]
        )

    monkeypatch.setattr(streaming.Streamer, "place", recording)
    HookedRewardModel.from_pretrained(path, dtype=torch.bfloat16, device="cpu")
    assert real_blocks == [[], [0], [0, 1], [0, 1, 2]]  # the globals, then one layer at a time


def test_every_hooked_parameter_is_set_once_already_cast(tmp_path, monkeypatch):
    hf = tiny_reward_model("llama")
    path = save(hf, tmp_path)
    assigned: list[tuple[str, torch.dtype]] = []
    set_tensor = streaming.set_tensor

    def recording(model, name, value):
        if isinstance(model, HookedRewardModel):
            assigned.append((name, value.dtype))
        set_tensor(model, name, value)

    monkeypatch.setattr(streaming, "set_tensor", recording)
    model = HookedRewardModel.from_pretrained(path, dtype=torch.bfloat16, device="cpu")
    names = [name for name, _ in assigned]
    assert sorted(names) == sorted(n for n, _ in model.named_parameters())  # each exactly once
    assert {dtype for _, dtype in assigned} == {torch.bfloat16}  # never a float32 copy
    dtypes = {p.dtype for p in model.parameters()}
    assert dtypes == {torch.bfloat16}
    assert model.cfg.device == "cpu" and {p.device.type for p in model.parameters()} == {"cpu"}


def test_gated_model_in_bf16_casts_the_gate_like_the_whole_conversion(tmp_path):
    hf = tiny_reward_model("armorm")
    path = save(hf, tmp_path)
    streamed = HookedRewardModel.from_pretrained(path, dtype=torch.bfloat16)
    reference = whole_conversion(hf, torch.bfloat16)
    assert {p.dtype for p in streamed.parameters()} == {torch.bfloat16}
    assert streamed.reward_transform_matrix.dtype == torch.bfloat16
    assert max_difference(streamed, reference) == 0.0


GENERIC = {  # tiny configs of families the generic adapter converts with TL's converters
    "Bloom": dict(hidden_size=64, n_layer=3, n_head=4),  # alibi: TL's unused W_pos is zeros
    "GPTNeoX": dict(
        hidden_size=64,
        intermediate_size=128,
        num_hidden_layers=3,
        num_attention_heads=4,
        max_position_embeddings=64,
    ),
    "Phi3": dict(
        hidden_size=64,
        intermediate_size=128,
        num_hidden_layers=3,
        num_attention_heads=4,
        num_key_value_heads=4,
        max_position_embeddings=64,
    ),
    "OPT": dict(
        hidden_size=64,
        ffn_dim=128,
        num_hidden_layers=3,
        num_attention_heads=4,
        max_position_embeddings=64,
        word_embed_proj_dim=64,
    ),
    "Mixtral": dict(  # transformers renames its expert tensors on load: converted whole
        hidden_size=64,
        intermediate_size=128,
        num_hidden_layers=3,
        num_attention_heads=4,
        num_key_value_heads=2,
        max_position_embeddings=64,
        num_local_experts=4,
        num_experts_per_tok=2,
    ),
}


@pytest.mark.parametrize("family", sorted(GENERIC))
def test_generic_families_stream_to_the_same_weights(tmp_path, family):
    import transformers

    from reward_lens_tl.testing import perturb_

    torch.manual_seed(0)
    ids_config = dict(vocab_size=97, pad_token_id=0, bos_token_id=1, eos_token_id=2, num_labels=1)
    config = getattr(transformers, family + "Config")(**ids_config, **GENERIC[family])
    hf = perturb_(getattr(transformers, family + "ForSequenceClassification")(config)).eval()
    path = save(hf, tmp_path)
    if family == "Mixtral":
        with pytest.warns(streaming.WholeModelWarning, match="renam|maps these names"):
            streamed = HookedRewardModel.from_pretrained(path)  # verify: on (generic adapter)
    else:
        streamed = HookedRewardModel.from_pretrained(path)
    # alibi models have no positional table; TL fills its unused W_pos with uninitialised memory
    unused = ("pos_embed.W_pos",) if streamed.cfg.positional_embedding_type == "alibi" else ()
    assert max_difference(streamed, whole_conversion(hf), skip=unused) <= 1e-6
    if unused:
        assert not streamed.W_pos.any()  # zeros here
    ids, _ = random_batch(1, [10])
    torch.testing.assert_close(streamed.rewards(ids), hf(ids).logits[:, 0], atol=1e-4, rtol=0)


# -- the cheap check at load ----------------------------------------------------------------------
class PerturbedAdapter(LlamaAdapter):
    """Converts the query weights wrongly: what a mapping bug looks like."""

    def backbone_state_dict(self, hf_model, cfg):
        sd = super().backbone_state_dict(hf_model, cfg)
        return {k: v * 1.5 if k.endswith("attn.W_Q") else v for k, v in sd.items()}


def test_truncated_verification_catches_a_wrong_mapping(tmp_path):
    hf = tiny_reward_model("llama", num_hidden_layers=4)
    path = save(hf, tmp_path)
    HookedRewardModel.from_pretrained(path, verify=True)  # the right mapping passes
    with pytest.raises(ConversionMismatchError, match="differs from HF"):
        HookedRewardModel.from_pretrained(path, adapter=PerturbedAdapter(), verify=True)


def test_truncated_verification_builds_two_layers(tmp_path, monkeypatch):
    hf = tiny_reward_model("llama", num_hidden_layers=5)
    path = save(hf, tmp_path)
    import reward_lens_tl.loading as loading_module

    built: list[int] = []
    build = loading_module.build_model

    def recording(model_class, plan, n_layers=None, dtype=None, device=None):
        model = build(model_class, plan, n_layers, dtype, device)
        built.append(model.cfg.n_layers)
        return model

    monkeypatch.setattr(loading_module, "build_model", recording)
    load_reward_model(path, verify=True)
    assert built == [2, 5]


# -- broken checkpoints ----------------------------------------------------------------------------
@pytest.fixture()
def sharded(tmp_path):
    hf = tiny_reward_model("llama")
    path = save(hf, tmp_path, max_shard_size="40KB")
    assert len(list(path.glob("*.safetensors"))) > 2
    return hf, path


def test_sharded_checkpoint_streams_to_the_same_weights(sharded):
    hf, path = sharded
    streamed = HookedRewardModel.from_pretrained(path)
    assert max_difference(streamed, whole_conversion(hf)) <= 1e-6


def test_missing_shard_is_named(sharded):
    _, path = sharded
    shard = sorted(path.glob("*.safetensors"))[1]
    shard.unlink()
    with pytest.raises(CheckpointError, match=shard.name):
        HookedRewardModel.from_pretrained(path)


def test_index_naming_a_tensor_no_shard_holds(sharded):
    _, path = sharded
    index_file = path / "model.safetensors.index.json"
    index = json.loads(index_file.read_text())
    first = sorted(path.glob("*.safetensors"))[0].name
    index["weight_map"]["model.layers.0.mlp.extra.weight"] = first
    index_file.write_text(json.dumps(index))
    with pytest.raises(CheckpointError, match=r"model\.layers\.0\.mlp\.extra\.weight.*no shard"):
        HookedRewardModel.from_pretrained(path)


def test_tensor_stored_twice_is_refused(sharded):
    _, path = sharded
    files = sorted(path.glob("*.safetensors"))
    tensors = load_file(files[0])
    name = next(iter(tensors))
    extra = load_file(files[1])
    extra[name] = tensors[name]
    save_file(extra, files[1])
    with pytest.raises(CheckpointError, match="stored twice"):
        CheckpointWeights(path)


@pytest.mark.parametrize(
    "weight_map", [["a"], {"x": 3}, {"x": "../elsewhere.safetensors"}], ids=["list", "int", "path"]
)
def test_malformed_index_is_a_typed_error(sharded, weight_map):
    _, path = sharded
    (path / "model.safetensors.index.json").write_text(json.dumps({"weight_map": weight_map}))
    with pytest.raises(CheckpointError, match="weight_map|not a safetensors index"):
        HookedRewardModel.from_pretrained(path)


def test_other_safetensors_files_beside_the_model_are_not_read(tmp_path):
    hf = tiny_reward_model("llama")
    path = save(hf, tmp_path)
    save_file({"base_model.model.lora_A.weight": torch.ones(2, 2)}, path / "adapter.safetensors")
    streamed = HookedRewardModel.from_pretrained(path)
    assert max_difference(streamed, whole_conversion(hf)) <= 1e-6
    (path / "model.safetensors").rename(path / "consolidated.safetensors")
    with pytest.raises(CheckpointError, match="no model.safetensors"):
        HookedRewardModel.from_pretrained(path)


def test_an_integer_stored_weight_is_refused(tmp_path):
    path = save(tiny_reward_model("llama"), tmp_path)
    tensors = load_file(path / "model.safetensors")
    tensors["model.layers.1.mlp.up_proj.weight"] = torch.ones_like(
        tensors["model.layers.1.mlp.up_proj.weight"], dtype=torch.int8
    )
    save_file(tensors, path / "model.safetensors", metadata={"format": "pt"})
    with pytest.raises(CheckpointError, match=r"up_proj\.weight stored as torch\.int8"):
        HookedRewardModel.from_pretrained(path)


def test_non_finite_weight_in_a_late_layer_is_named(tmp_path):
    hf = tiny_reward_model("llama")
    path = save(hf, tmp_path)
    tensors = load_file(path / "model.safetensors")
    tensors["model.layers.1.mlp.down_proj.weight"][0, 0] = float("nan")
    save_file(tensors, path / "model.safetensors", metadata={"format": "pt"})
    with pytest.raises(NonFiniteWeightsError, match=r"model\.layers\.1\.mlp\.down_proj"):
        HookedRewardModel.from_pretrained(path)


@pytest.mark.parametrize(
    ("device", "match"),
    [("nonsense", "not a torch device"), ("meta", "holds no values"), ("cuda:7", "cannot hold")],
)
def test_bad_device_refused_before_any_weight_is_read(tmp_path, monkeypatch, device, match):
    if device == "cuda:7" and torch.cuda.device_count() > 7:
        pytest.skip("this machine has a cuda:7")
    path = save(tiny_reward_model("llama"), tmp_path)

    def no_reading(*args, **kwargs):
        raise AssertionError("weights were read")

    monkeypatch.setattr(CheckpointWeights, "read", no_reading)
    with pytest.raises(InvalidArgumentError, match=match):
        HookedRewardModel.from_pretrained(path, device=device)
