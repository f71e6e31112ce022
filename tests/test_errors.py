"""Bad input gets a typed error with an actionable message; nothing the user passed is changed."""

import hashlib

import pytest
import torch
import transformers

from reward_lens_tl import HookedRewardModel, encode_conversation, pad_batch
from reward_lens_tl.errors import (
    MissingPadTokenError,
    NonFiniteWeightsError,
    RewardHeadError,
    SequenceTooLongError,
    ShapeMismatchError,
    TokenOutOfVocabError,
    UnknownHookError,
    UnsafeCheckpointError,
    UnsupportedArchitectureError,
)
from reward_lens_tl.testing import random_batch, tiny_reward_model, tiny_tokenizer


@pytest.fixture(scope="module")
def model():
    return HookedRewardModel.from_pretrained(tiny_reward_model("llama"))


def test_sequence_longer_than_context(model):
    ids = torch.randint(6, 90, (1, model.cfg.n_ctx + 1))
    with pytest.raises(SequenceTooLongError, match="truncat"):
        model.rewards(ids)


def test_truncation_option_keeps_the_response():
    tok = tiny_tokenizer()
    prompt, response = " ".join(f"w{i}" for i in range(6, 60)), "w70 w71 w72"
    with pytest.raises(SequenceTooLongError, match="truncation="):
        encode_conversation(tok, prompt, response, max_length=20)
    enc = encode_conversation(tok, prompt, response, max_length=20, truncation="left")
    assert len(enc) == 20 and enc.ids[0] == tok.bos_token_id
    assert tok.convert_ids_to_tokens(list(enc.ids[enc.response_start :])) == [
        "w70",
        "w71",
        "w72",
        "<eos>",
    ]


def test_token_ids_outside_vocabulary(model):
    ids = torch.tensor([[3, 5, model.cfg.d_vocab + 4]])
    with pytest.raises(TokenOutOfVocabError, match=str(model.cfg.d_vocab + 4)):
        model.rewards(ids)
    with pytest.raises(TokenOutOfVocabError):
        model(torch.tensor([[-1, 5]]))


def test_missing_pad_token():
    hf = tiny_reward_model("llama", pad_token_id=None)
    model = HookedRewardModel.from_pretrained(hf)
    ids, _ = random_batch(2, [5, 5])
    with pytest.raises(MissingPadTokenError, match="pad_token"):
        model.rewards(ids)
    assert model.rewards(ids[:1]).shape == (1,)  # a single sequence needs no pad id
    with pytest.raises(MissingPadTokenError):
        pad_batch([[1, 2], [3]], None)


def test_scalar_adapter_with_several_labels():
    hf = tiny_reward_model("mistral", num_labels=3)
    with pytest.raises(RewardHeadError, match="objective_names"):
        HookedRewardModel.from_pretrained(hf)
    with pytest.raises(RewardHeadError, match="2 names for 3"):
        HookedRewardModel.from_pretrained(hf, objective_names=["a", "b"])


def test_non_finite_weights():
    hf = tiny_reward_model("qwen2")
    with torch.no_grad():
        hf.model.layers[1].mlp.up_proj.weight[0, 0] = float("nan")
    with pytest.raises(NonFiniteWeightsError, match="layers.1.mlp.up_proj"):
        HookedRewardModel.from_pretrained(hf)


def test_unsupported_architecture_lists_supported():
    cfg = transformers.BertConfig(
        vocab_size=50,
        hidden_size=32,
        num_hidden_layers=1,
        num_attention_heads=2,
        intermediate_size=64,
        num_labels=1,
    )
    hf = transformers.BertForSequenceClassification(cfg)
    with pytest.raises(UnsupportedArchitectureError) as err:
        HookedRewardModel.from_pretrained(hf)
    assert "BertForSequenceClassification" in str(err.value)
    assert "LlamaForSequenceClassification" in str(err.value)
    assert "Gemma2ForSequenceClassification" in str(err.value)


def test_unsupported_rope_type():
    hf = tiny_reward_model(
        "llama", rope_parameters=dict(rope_type="linear", factor=2.0, rope_theta=10000.0)
    )
    with pytest.raises(UnsupportedArchitectureError, match="llama3"):
        HookedRewardModel.from_pretrained(hf)


def test_pickle_checkpoint_refused(tmp_path):
    hf = tiny_reward_model("llama")
    hf.save_pretrained(tmp_path, safe_serialization=False)
    if any(tmp_path.glob("*.safetensors")):  # transformers 5 may always write safetensors
        for f in tmp_path.glob("*.safetensors"):
            f.unlink()
        torch.save(hf.state_dict(), tmp_path / "pytorch_model.bin")
    with pytest.raises(UnsafeCheckpointError, match="safetensors"):
        HookedRewardModel.from_pretrained(tmp_path)


def test_missing_directory(tmp_path):
    with pytest.raises(FileNotFoundError, match="does not exist.*hub id"):
        HookedRewardModel.from_pretrained(tmp_path / "nope")


def test_unknown_hook_name(model):
    ids = torch.tensor([[3, 5, 7]])
    with pytest.raises(UnknownHookError, match="blocks.0.hook_resid_post"):
        model.run_with_cache(ids, names_filter=["blocks.0.hook_resid_pots"])
    with pytest.raises(UnknownHookError):
        model.run_with_hooks(ids, fwd_hooks=[("blocks.9.hook_resid_post", lambda a, hook: a)])
    assert len(model.hook_dict["blocks.0.hook_resid_post"].fwd_hooks) == 0


def test_mismatched_mask_shape(model):
    ids, mask = random_batch(2, [5, 3])
    with pytest.raises(ShapeMismatchError, match="attention_mask"):
        model.rewards(ids, mask[:, :2])


def test_pool_position_on_masked_token(model):
    ids, mask = random_batch(2, [5, 3])
    mask[0, 4] = 0  # ids say token 4 is real, the mask says padding
    with pytest.raises(Exception, match="disagree"):
        model.rewards(ids, mask)


def test_strings_rejected_with_a_pointer(model):
    with pytest.raises(TypeError, match="encode"):
        model.rewards("hello")


def _digest(module):
    h = hashlib.sha256()
    for k, v in sorted(module.state_dict().items()):
        h.update(k.encode())
        h.update(v.detach().cpu().numpy().tobytes())
    return h.hexdigest()


@pytest.mark.parametrize("family", ["llama", "gemma2", "gpt2", "armorm"])
def test_conversion_leaves_hf_model_unchanged(family):
    hf = tiny_reward_model(family)
    before = _digest(hf)
    grads = [p.requires_grad for p in hf.parameters()]
    cfg_before = hf.config.to_dict()
    HookedRewardModel.from_pretrained(hf)
    assert _digest(hf) == before
    assert grads == [p.requires_grad for p in hf.parameters()]
    assert hf.config.to_dict() == cfg_before


def test_no_bare_builtin_raises_in_the_library():
    """Every deliberate error is a RewardLensError subclass (``except RewardLensError`` catches
    it); the only built-in raise left is the abstract ``Result.to_dataframe``."""
    import re
    from pathlib import Path

    root = Path(__file__).resolve().parents[1] / "reward_lens_tl"
    pattern = re.compile(r"raise (ValueError|TypeError|KeyError|IndexError|RuntimeError)\(")
    found = [
        f"{path.relative_to(root)}:{n}"
        for path in root.rglob("*.py")
        for n, line in enumerate(path.read_text().splitlines(), 1)
        if pattern.search(line)
    ]
    assert found == []


def _exception_classes_outside_errors_module():
    """``(file, class)`` for every class defined outside ``errors.py`` whose bases name an
    exception (``...Error``, ``...Exception``, ``ProbeSkip``), found by parsing the source."""
    import ast
    from pathlib import Path

    root = Path(__file__).resolve().parents[1] / "reward_lens_tl"
    out = []
    for path in sorted(root.rglob("*.py")):
        if path == root / "errors.py":
            continue
        for node in ast.walk(ast.parse(path.read_text())):
            if not isinstance(node, ast.ClassDef):
                continue
            bases = [ast.unparse(b).rsplit(".", 1)[-1] for b in node.bases]
            if any(b.endswith(("Error", "Exception")) or b == "ProbeSkip" for b in bases):
                out.append(f"{path.relative_to(root)}:{node.name}")
    return out


def test_every_error_is_defined_in_the_one_errors_module():
    """One hierarchy in one place: no exception class is defined anywhere but errors.py (the
    subpackages' ``errors`` modules only re-export)."""
    assert _exception_classes_outside_errors_module() == []


def test_the_hierarchy_has_one_root_and_no_subpackage_reexports_it():
    import importlib.util
    import inspect

    from reward_lens_tl import errors

    classes = [
        c for _, c in inspect.getmembers(errors, inspect.isclass) if c.__module__ == errors.__name__
    ]
    assert len(classes) > 40
    for cls in classes:
        if cls is errors.ProbeSkip:  # a control-flow signal inside probe functions, not an error
            continue
        assert issubclass(cls, errors.RewardLensError), cls
        # each also subclasses the built-in a user would naturally catch
        assert (
            any(
                issubclass(cls, b)
                for b in (
                    ValueError,
                    KeyError,
                    TypeError,
                    RuntimeError,
                    NotImplementedError,
                    FileNotFoundError,
                    MemoryError,
                    ImportError,  # TransformerLensVersionError: the wrong TransformerLens line
                )
            )
            or cls is errors.RewardLensError
        ), cls
    for pkg in ("patching", "sae", "probes", "sweep", "implicit", "crossmodel", "evals"):
        assert importlib.util.find_spec(f"reward_lens_tl.{pkg}.errors") is None, pkg  # one module
    from reward_lens_tl.report import ReportError

    assert ReportError is errors.ReportError


def test_a_misspelt_keyword_is_both_a_type_error_and_the_old_value_error():
    from reward_lens_tl import HookedRewardModel
    from reward_lens_tl.errors import UnknownKeywordError
    from reward_lens_tl.zoo import zoo_path

    for caught in (TypeError, ValueError, UnknownKeywordError):
        with pytest.raises(caught, match="Did you mean 'fold_ln'"):
            HookedRewardModel.from_pretrained(zoo_path("scalar"), fold_lm=False)
