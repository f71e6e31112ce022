"""`reward-lens report --backend` in the default environment (TransformerLens 3.9).

The bridge backend is refused with the install command before anything is written; a section
whose analysis raises `BridgeUnsupportedError` is shown as a one-line note (escaped, listed in
`report.json`'s `tl3_only`) instead of ending the report; a loaded model is taken as it is; the
TransformerLens 3.9 report's arguments carry no backend. On the bridge: tests/tl4/test_report.py.
"""

import json

import pytest

from reward_lens_tl import HookedRewardModel
from reward_lens_tl.cli import main
from reward_lens_tl.errors import BridgeUnsupportedError, ReportError
from reward_lens_tl.report import build, build_report, register_section
from reward_lens_tl.zoo import zoo_path

ROWS = [
    {"prompt": "how bake bread", "chosen": "oven flour", "rejected": "bomb"},
    {"prompt": "explain laptop", "chosen": "screen code", "rejected": "soup"},
]


@pytest.fixture
def pairs(tmp_path):
    path = tmp_path / "pairs.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in ROWS))
    return path


@pytest.fixture
def scores_only(monkeypatch):
    """The report's first step and no registered section: a fast build."""
    monkeypatch.setattr(build, "STEPS", build.STEPS[:1])
    monkeypatch.setattr(build, "SECTIONS", [])
    monkeypatch.setattr(build, "TITLES", {})


def test_the_bridge_backend_here_is_refused_with_the_install_command(tmp_path, pairs, capsys):
    out = tmp_path / "out"
    assert main(["report", str(zoo_path("scalar")), str(pairs), "--backend", "bridge",
                 "--out", str(out)]) == 2  # fmt: skip
    error = capsys.readouterr().err
    assert "TransformerLensVersionError" in error and "requirements-tl4.txt" in error
    assert not out.exists()  # refused before anything was written


def test_a_section_that_needs_tl39_becomes_an_escaped_note(tmp_path, pairs, scores_only):
    def needs_tl3(ctx):
        ctx["numbers"]["half"] = 1.0  # a number written before the refusal is not kept
        raise BridgeUnsupportedError("sae_lens pins TransformerLens <b>< 4</b>")

    register_section("needs_tl3", needs_tl3, title="SAE <features>")
    numbers = build_report(zoo_path("scalar"), pairs, tmp_path / "out", progress=False)
    assert numbers["sections"] == ["Scores", "SAE <features>"] and "half" not in numbers
    assert numbers["tl3_only"] == {"SAE <features>": "sae_lens pins TransformerLens <b>< 4</b>"}
    page = (tmp_path / "out" / "report.html").read_text(encoding="utf-8")
    assert (
        "Needs the TransformerLens 3.9 backend (--backend tl3, the default): sae_lens pins "
        "TransformerLens &lt;b&gt;&lt; 4&lt;/b&gt;" in page
    )
    assert "<b>" not in page and "SAE &lt;features&gt;" in page


def test_a_loaded_model_is_taken_as_it_is(tmp_path, pairs, scores_only):
    model = HookedRewardModel.from_pretrained(zoo_path("scalar"))
    numbers = build_report(model, pairs, tmp_path / "out", progress=False)
    from_dir = build_report(zoo_path("scalar"), pairs, tmp_path / "dir", progress=False)
    assert numbers["chosen"] == from_dir["chosen"] and numbers["args"]["model"] == "scalar"
    assert "backend" not in numbers["args"] and "tl3_only" not in numbers  # as they always were
    with pytest.raises(ReportError, match="backend='bridge' was given with a loaded model"):
        build_report(model, pairs, tmp_path / "other", backend="bridge", progress=False)
