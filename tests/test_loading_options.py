"""TransformerLens's ``from_pretrained`` keywords on ``HookedRewardModel.from_pretrained``.

Every keyword of TL's ``HookedTransformer.from_pretrained`` is honoured with TL's meaning (and
the reward still equals HF's, ≤ 1e-4 in float32) or refused with a typed error that says why
and what to do; a keyword that is no option at all names the closest one.
"""

from __future__ import annotations

import inspect
import typing

import pytest
import torch
import transformers
from transformer_lens import HookedTransformer
from transformer_lens.weight_processing import ProcessWeights

from reward_lens_tl import HookedRewardModel
from reward_lens_tl.errors import (
    ArgumentTypeError,
    InvalidArgumentError,
    NotForRewardModelsError,
    RewardLensError,
    UnsafeCheckpointError,
)
from reward_lens_tl.loading import (
    HF_LOADER_KEYWORDS,
    OPTIONS,
    TL_NO_OP_KEYWORDS,
    convert_hf_model,
)
from reward_lens_tl.testing import VOCAB, perturb_, tiny_reward_model

TOL = 1e-4
LENGTHS = [12, 9, 5, 16]


def hf_rewards(hf, ids, mask):
    with torch.no_grad():
        logits = hf(input_ids=ids, attention_mask=mask).logits
    return logits[:, 0] if logits.shape[-1] == 1 else logits


def batch(seed: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Right-padded random ids and mask: HF GPT-2 without ``position_ids`` counts positions
    from column 0, so right padding is where HF's own batched output is the reference."""
    gen = torch.Generator().manual_seed(seed)
    ids = torch.zeros(len(LENGTHS), max(LENGTHS), dtype=torch.long)
    mask = torch.zeros_like(ids)
    for i, n in enumerate(LENGTHS):
        ids[i, :n] = torch.randint(3, VOCAB, (n,), generator=gen)
        mask[i, :n] = 1
    return ids, mask


def parity(model, hf, seed=1) -> float:
    ids, mask = batch(seed)
    with torch.no_grad():
        ours = model.rewards(ids, mask)
    return float((ours.float() - hf_rewards(hf, ids, mask)).abs().max())


@pytest.fixture(scope="module")
def gpt2():
    return tiny_reward_model("gpt2")


@pytest.fixture(scope="module")
def llama():
    return tiny_reward_model("llama")


def tiny_opt():
    """A tiny OPT reward model: the generic adapter, learned absolute positions."""
    torch.manual_seed(0)
    config = transformers.OPTConfig(
        vocab_size=VOCAB,
        hidden_size=64,
        num_hidden_layers=2,
        ffn_dim=128,
        num_attention_heads=4,
        max_position_embeddings=64,
        word_embed_proj_dim=64,
        pad_token_id=0,
        bos_token_id=1,
        eos_token_id=2,
        num_labels=1,
    )
    return perturb_(transformers.OPTForSequenceClassification(config)).eval()


# ---- every TL keyword is classified ------------------------------------------------------------
def test_every_tl_from_pretrained_keyword_is_honoured_or_refused():
    """Guards against a TL upgrade adding a keyword nobody looked at."""
    params = inspect.signature(HookedTransformer.from_pretrained).parameters
    names = {
        n
        for n, p in params.items()
        if n not in ("cls", "model_name") and p.kind is not inspect.Parameter.VAR_KEYWORD
    }
    handled = set(OPTIONS) | set(TL_NO_OP_KEYWORDS) | {"hf_model"}
    assert names <= handled, names - handled
    no_processing = inspect.signature(HookedTransformer.from_pretrained_no_processing)
    skip = ("cls", "model_name", "from_pretrained_kwargs")
    assert {n for n in no_processing.parameters if n not in skip} <= handled


# ---- honoured keywords: parity with HF ---------------------------------------------------------
HONOURED = {
    "defaults": {},
    "center_unembed_off": dict(center_unembed=False),
    "raw": dict(fold_ln=False, center_writing_weights=False, fold_value_biases=False),
    "fold_ln_only": dict(fold_ln=True, center_writing_weights=False, fold_value_biases=False),
    "device": dict(device="cpu"),
    "torch_device": dict(device=torch.device("cpu")),
    "dtype_float32": dict(dtype=torch.float32),
    "dtype_string": dict(dtype="float32"),
    "dtype_fp32": dict(dtype="fp32"),
    "torch_dtype": dict(torch_dtype=torch.float32),
    "n_ctx": dict(n_ctx=32),
    "tl_no_op_values": dict(
        n_devices=1,
        move_to_device=True,
        first_n_layers=None,
        checkpoint_index=None,
        checkpoint_value=None,
        checkpoint_label=None,
        default_prepend_bos=None,
        default_padding_side=None,
        trust_remote_code=False,
        load_in_8bit=False,
        load_in_4bit=False,
        use_safetensors=True,
    ),
    "local_files_only": dict(local_files_only=True),
    "tl_no_op_alternatives": dict(default_prepend_bos=False, default_padding_side="left"),
    "verify": dict(verify=True),
}


@pytest.mark.parametrize("family", ["gpt2", "llama"])
@pytest.mark.parametrize("name", list(HONOURED))
def test_honoured_keywords_keep_parity(family, name, gpt2, llama):
    hf = gpt2 if family == "gpt2" else llama
    model = HookedRewardModel.from_pretrained(hf, **HONOURED[name])
    assert parity(model, hf) <= TOL
    assert model.cfg.d_vocab_out == 1 and bool((model.W_U != 0).any())


def test_hf_model_keyword_accepts_the_model_itself(gpt2):
    model = HookedRewardModel.from_pretrained(gpt2, hf_model=gpt2)
    assert parity(model, gpt2) <= TOL


def test_device_and_n_ctx_are_honoured(llama):
    model = HookedRewardModel.from_pretrained(llama, device="cpu", n_ctx=24)
    assert model.cfg.n_ctx == 24 and model.W_U.device.type == "cpu"
    assert str(model.cfg.device) == "cpu"


@pytest.mark.parametrize(
    ("dtype", "expected"),
    [
        ("bf16", torch.bfloat16),
        ("bfloat16", torch.bfloat16),
        ("fp16", torch.float16),
        ("float16", torch.float16),
        (torch.bfloat16, torch.bfloat16),
    ],
)
def test_tl_dtype_strings_are_honoured(llama, dtype, expected):
    model = HookedRewardModel.from_pretrained(llama, dtype=dtype)
    assert model.W_U.dtype == expected and model.blocks[0].attn.W_Q.dtype == expected
    assert parity(model, llama) <= 5e-2
    alias = HookedRewardModel.from_pretrained(llama, torch_dtype=dtype)
    assert alias.W_U.dtype == expected


def test_from_pretrained_no_processing_takes_tl_keywords(gpt2):
    model = HookedRewardModel.from_pretrained_no_processing(
        gpt2, center_unembed=False, refactor_factored_attn_matrices=False, dtype="float32"
    )
    assert model.cfg.normalization_type == "LN"  # nothing folded
    assert parity(model, gpt2) <= TOL


# ---- refactor_factored_attn_matrices -----------------------------------------------------------
@pytest.mark.parametrize("fold", [True, False], ids=["folded", "raw"])
def test_refactor_factored_attn_matrices_is_honoured_for_gpt2(gpt2, fold):
    flags = dict(fold_ln=fold, center_writing_weights=fold, fold_value_biases=fold)
    plain = HookedRewardModel.from_pretrained(gpt2, **flags)
    model = HookedRewardModel.from_pretrained(
        gpt2, refactor_factored_attn_matrices=True, verify=True, **flags
    )
    assert parity(model, gpt2) <= TOL
    assert parity(model, gpt2, seed=5) <= TOL
    with torch.no_grad():
        # the weights really changed, the circuits did not
        assert (model.W_Q - plain.W_Q).abs().max() > 1e-2
        assert (model.W_O - plain.W_O).abs().max() > 1e-2
        assert (model.OV.AB - plain.OV.AB).abs().max() < 1e-4
        # W_O is a rotation per head: orthonormal rows (d_head x d_model)
        W_O = model.W_O[0]  # [head, d_head, d_model]
        eye = torch.eye(W_O.shape[1]).expand(W_O.shape[0], -1, -1)
        assert (W_O @ W_O.transpose(-1, -2) - eye).abs().max() < 1e-4
        assert model.b_V.abs().max() == 0
    conv = convert_hf_model(gpt2, refactor_factored_attn_matrices=True)
    assert conv.fold_flags["refactor_factored_attn_matrices"] is True
    assert conv.fold_flags["center_unembed"] is False


def test_refactor_leaves_the_hf_model_unchanged(gpt2):
    before = {k: v.clone() for k, v in gpt2.state_dict().items()}
    HookedRewardModel.from_pretrained(gpt2, refactor_factored_attn_matrices=True)
    after = gpt2.state_dict()
    assert all(torch.equal(before[k], after[k]) for k in before)


def test_refactor_is_honoured_through_the_generic_adapter():
    hf = tiny_opt()
    model = HookedRewardModel.from_pretrained(hf, refactor_factored_attn_matrices=True)
    assert model.cfg.positional_embedding_type == "standard"
    assert parity(model, hf) <= TOL


@pytest.mark.parametrize("family", ["llama", "gemma2", "qwen2", "armorm"])
def test_refactor_is_refused_for_rotary_models(family):
    with pytest.raises(InvalidArgumentError, match="rotary") as info:
        HookedRewardModel.from_pretrained(
            tiny_reward_model(family), refactor_factored_attn_matrices=True
        )
    assert "refactor_factored_attn_matrices=False" in str(info.value)


def test_refactor_is_refused_for_the_zoo_checkpoint():
    from reward_lens_tl.zoo import zoo_path

    path = zoo_path("scalar")
    if not (path / "config.json").exists():
        pytest.skip("zoo model missing")
    with pytest.raises(InvalidArgumentError, match="rotary"):
        HookedRewardModel.from_pretrained(path, refactor_factored_attn_matrices=True)
    model = HookedRewardModel.from_pretrained(path, center_unembed=False, n_devices=1)
    assert model.cfg.d_vocab_out == 1


# ---- center_unembed ----------------------------------------------------------------------------
def test_center_unembed_would_zero_a_scalar_head():
    """Why it is refused: TL's centring subtracts the mean over output columns."""
    W = torch.randn(8, 1)
    centred = ProcessWeights.center_unembed({"unembed.W_U": W, "unembed.b_U": torch.ones(1)})
    assert centred["unembed.W_U"].abs().max() == 0
    W2 = torch.randn(8, 2)
    mixed = ProcessWeights.center_unembed({"unembed.W_U": W2.clone(), "unembed.b_U": torch.ones(2)})
    assert torch.allclose(mixed["unembed.W_U"][:, 0], (W2[:, 0] - W2[:, 1]) / 2)


@pytest.mark.parametrize("objectives", [None, ["helpful", "harmless"]], ids=["scalar", "multi"])
def test_center_unembed_true_is_refused(objectives):
    hf = tiny_reward_model("llama", num_labels=2 if objectives else 1)
    with pytest.raises(NotForRewardModelsError, match="center_unembed=False") as info:
        HookedRewardModel.from_pretrained(hf, center_unembed=True, objective_names=objectives)
    msg = str(info.value)
    assert "sets W_R to zero" in msg and "mixing them" in msg
    assert isinstance(info.value, RewardLensError)
    model = HookedRewardModel.from_pretrained(hf, center_unembed=False, objective_names=objectives)
    assert parity(model, hf) <= TOL


# ---- refused keywords --------------------------------------------------------------------------
REFUSED = [
    (dict(n_devices=2), InvalidArgumentError, "torchrun"),
    (dict(move_to_device=False), InvalidArgumentError, "device='cpu'"),
    (dict(first_n_layers=1), NotForRewardModelsError, "stop_at_layer"),
    (dict(checkpoint_index=3), InvalidArgumentError, "checkpoint's directory"),
    (dict(checkpoint_value=1000), InvalidArgumentError, "checkpoint's directory"),
    (dict(checkpoint_label=1000), InvalidArgumentError, "checkpoint's directory"),
    (dict(default_prepend_bos=True), NotForRewardModelsError, "chat template"),
    (dict(default_padding_side="up"), InvalidArgumentError, "padding_side='up'"),
    (dict(trust_remote_code=True), UnsafeCheckpointError, "remote code"),
    (dict(load_in_8bit=True), InvalidArgumentError, "quantised"),
    (dict(load_in_4bit=True), InvalidArgumentError, "quantised"),
    (dict(revision="main"), InvalidArgumentError, "only apply to a hub id"),
    (dict(cache_dir="/tmp/cache"), InvalidArgumentError, "only apply to a hub id"),
    (dict(use_safetensors=False), UnsafeCheckpointError, "safetensors"),
    (dict(center_unembed=True), NotForRewardModelsError, "no softmax"),
    (dict(fold_ln="yes"), InvalidArgumentError, "True or False"),
    (dict(refactor_factored_attn_matrices=1), InvalidArgumentError, "True or False"),
    (dict(dtype="int8"), InvalidArgumentError, "floating"),
    (dict(dtype=torch.int64), InvalidArgumentError, "floating"),
    (dict(dtype=torch.float16, torch_dtype=torch.bfloat16), InvalidArgumentError, "disagree"),
]


@pytest.mark.parametrize(("kwargs", "error", "match"), REFUSED, ids=lambda x: None)
def test_refused_keywords_raise_typed_errors(gpt2, kwargs, error, match):
    with pytest.raises(error, match=match) as info:
        HookedRewardModel.from_pretrained(gpt2, **kwargs)
    assert isinstance(info.value, RewardLensError)


def test_another_hf_model_is_refused(gpt2):
    with pytest.raises(InvalidArgumentError, match=r"from_pretrained\(hf_model"):
        HookedRewardModel.from_pretrained("gpt2", hf_model=gpt2)


@pytest.mark.parametrize("name", HF_LOADER_KEYWORDS)
def test_hf_loader_keywords_are_refused(gpt2, name):
    with pytest.raises(InvalidArgumentError, match="loading keyword"):
        HookedRewardModel.from_pretrained(gpt2, **{name: "x"})


def test_refusals_happen_before_the_checkpoint_is_read(tmp_path):
    """A refused keyword fails fast: no checkpoint is opened (this directory does not exist)."""
    missing = tmp_path / "nowhere"
    for kwargs in (dict(center_unembed=True), dict(fold_lnn=True), dict(n_devices=4)):
        with pytest.raises(RewardLensError) as info:
            HookedRewardModel.from_pretrained(missing, **kwargs)
        assert "does not exist" not in str(info.value)


# ---- unknown keywords --------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("typo", "suggestion"),
    [
        ("fold_lnn", "fold_ln"),
        ("center_unembedd", "center_unembed"),
        ("refactor_factored_attn_matrix", "refactor_factored_attn_matrices"),
        ("dtpye", "dtype"),
        ("objective_name", "objective_names"),
        ("verfy", "verify"),
        ("n_device", "n_devices"),
        ("fold_value_bias", "fold_value_biases"),
    ],
)
def test_a_typo_names_the_close_match(gpt2, typo, suggestion):
    """A keyword that is no parameter is a ``TypeError`` (as Python's own), typed and helpful."""
    with pytest.raises(ArgumentTypeError) as info:
        HookedRewardModel.from_pretrained(gpt2, **{typo: True})
    assert isinstance(info.value, TypeError)
    msg = str(info.value)
    assert f"unknown keyword {typo!r}" in msg
    assert repr(suggestion) in msg.split("Did you mean ")[1].split("?")[0]
    for option in ("fold_ln", "center_writing_weights", "dtype", "objective_names", "verify"):
        assert option in msg


def test_an_unrelated_keyword_lists_the_options(gpt2):
    with pytest.raises(ArgumentTypeError, match="Options: tokenizer, fold_ln") as info:
        HookedRewardModel.from_pretrained(gpt2, banana=1)
    assert "Did you mean" not in str(info.value)
    assert isinstance(info.value, TypeError) and isinstance(info.value, RewardLensError)


@pytest.mark.parametrize(
    "load", ["from_pretrained", "from_pretrained_no_processing", "load", "convert"]
)
def test_every_loading_entry_point_takes_the_same_keywords(gpt2, load):
    """The four entry points share one explicit signature (``verify`` aside) and refuse the
    same way."""
    from reward_lens_tl.model import load_reward_model

    fn = {
        "from_pretrained": HookedRewardModel.from_pretrained,
        "from_pretrained_no_processing": HookedRewardModel.from_pretrained_no_processing,
        "load": load_reward_model,
        "convert": convert_hf_model,
    }[load]
    params = inspect.signature(fn).parameters
    first = "model_name" if load.startswith("from_pretrained") else "model_or_path"
    expected = {*OPTIONS, *TL_NO_OP_KEYWORDS, "hf_model", first}
    assert set(params) == (expected - {"verify"} if load == "convert" else expected)
    with pytest.raises(ArgumentTypeError, match="Did you mean 'n_ctx'"):
        fn(gpt2, n_ctxx=8)
    with pytest.raises(InvalidArgumentError, match="only apply to a hub id"):
        fn(gpt2, revision="main")
    with pytest.raises(InvalidArgumentError, match="torchrun"):
        fn(gpt2, n_devices=2)


def test_the_options_are_declared_once():
    """One ``TypedDict`` (``LoadOptions`` adds ``verify``), one table of defaults, and every
    entry point's shown signature is built from them."""
    from reward_lens_tl.adapters import ConversionOptions
    from reward_lens_tl.loading import OPTION_DEFAULTS, LoadOptions

    declared = set(typing.get_type_hints(LoadOptions))
    assert declared == set(ConversionOptions.__annotations__) | {"verify"}
    assert set(OPTION_DEFAULTS) == declared
    assert declared == {*OPTIONS, *TL_NO_OP_KEYWORDS, "hf_model"} - {"tokenizer"}
    shown = inspect.signature(HookedRewardModel.from_pretrained).parameters
    assert all(shown[k].default is v for k, v in OPTION_DEFAULTS.items())
    raw = inspect.signature(HookedRewardModel.from_pretrained_no_processing).parameters
    assert [raw[k].default for k in ("fold_ln", "center_writing_weights", "fold_value_biases")] == [
        False,
        False,
        False,
    ]


def test_transformer_lens_positional_flags_are_refused(gpt2):
    """TL's ``from_pretrained(name, fold_ln, ...)`` form: the second positional argument is
    the tokenizer here, so a flag there (or any further positional) is a typed error."""
    with pytest.raises(ArgumentTypeError, match="keyword-only"):
        HookedRewardModel.from_pretrained(gpt2, False)
    with pytest.raises(ArgumentTypeError, match="keyword-only"):
        HookedRewardModel.from_pretrained(gpt2, None, True)


def test_a_subclass_refuses_another_kind(gpt2):
    from reward_lens_tl.errors import UnsupportedArchitectureError
    from reward_lens_tl.model import HookedArmoRM

    with pytest.raises(UnsupportedArchitectureError, match="not a HookedArmoRM"):
        HookedArmoRM.from_pretrained(gpt2)
