"""The key numbers of the zoo report, and how tests/tl4/test_report.py's reference was recorded.

`key_numbers(report.json's numbers)` picks one or a few numbers per section that runs on both
backends. The reference in test_report.py (`TL39`) was recorded in the default environment
(TransformerLens 3.9, `HookedRewardModel`) with

    .venv/bin/python -m tests.tl4.report_keys

which builds `reward-lens report --limit 4` (the zoo, four of its eight pairs) and prints them.
This module imports neither TransformerLens line (it runs in both environments).
"""

from __future__ import annotations

#: The zoo report's options in both tests (`reward-lens report --limit 4`).
LIMIT = 4
#: The comparison methods that run on both backends (AtP* needs TransformerLens 3.9's attention).
BOTH_BACKENDS_METHODS = ("direct", "atp", "patching")


def key_numbers(n: dict) -> dict:
    """One or a few numbers of each section that runs on both backends (`n`: report.json)."""
    leace = [r for r in n["erasure"]["table"] if r["eraser"] == f"LEACE at {n['erasure']['site']}"]
    methods = set(BOTH_BACKENDS_METHODS)
    return {
        "sections": n["sections"],
        "scores": [n["accuracy"], n["mean_margin"], n["chosen"], n["rejected"], n["pair_ids"]],
        "lens": n["lens_mean_margin"],
        "top components": n["top_components"][:4],
        "patching": [[p["pair"], *p["top"][0]] for p in n["patching"]],
        "token views": [[v["pair"], v["reward"], *v["top_tokens"][0]] for v in n["token_views"]],
        "planted": [
            [r["feature"], r["mean margin"], r["lens: first site at 50%"]]
            for r in n["planted_features"]
        ],
        "localization": [
            [r["feature"], r["site"], r["planted_restored"], r["reward_restored"]]
            for r in n["localization"]
        ],
        "observational": [
            [r["method_a"], r["method_b"], r["mean_spearman"], r["ci_low"], r["ci_high"]]
            for r in n["observational_vs_causal"]
            if {r["method_a"], r["method_b"]} <= methods
        ],
        "probes": [
            n["probes"]["flagged"],
            n["probes"]["invariance_flagged"],
            [
                [c["probe (planted feature)"], c["onset at the reward token"]]
                for c in n["probes"]["cascade"]
            ],
        ],  # fmt: skip
        "failures": [[r["model"], r["figure"], r["value"]] for r in n["failures"]["benchmark"]]
        + [n["failures"]["n"], n["failures"]["crystallizes_at"]],
        "sweep": [n["sweep"]["prompt"], n["sweep"]["top"][:3], n["sweep"]["bottom"][:3]],
        "erasure": [n["erasure"]["first_present"]]
        + [[r["feature"], r["margin before"], r["margin after"], r["probe after"]] for r in leace],
        "counterfactual": [
            [r["pair"], r["edits"], r["margin before"], r["margin after"], r["flipped"]]
            for r in n["counterfactual"]
        ],
        "unfolding": n["unfolding"],
        "implicit": [
            n["implicit"]["pairwise_agreement"],
            n["implicit"]["margin_spearman"],
            n["implicit"]["depth"],
            [
                [r["feature"], r["effect_explicit"], r["effect_implicit"], r["flagged"]]
                for r in n["implicit"]["feature_effects"]
            ],
        ],  # fmt: skip
        "judges": [
            n["judges"]["judge"]["topic_accuracy"],
            n["judges"]["judge"]["sycophancy_delta"],
            n["judges"]["judge"]["position_bias"],
            n["judges"]["judge"]["position_bias_components"][:3],
            n["judges"]["prm"]["step_accuracy"],
            n["judges"]["prm"]["processbench"]["f1"],
            n["judges"]["prm"]["first_error_sources"],
            n["judges"]["prm"]["turn_site"],
        ],
        "pressure": [
            n["pressure"]["gold_peak_n"],
            n["pressure"]["exploited_first"],
            n["pressure"]["ladder"]["proxy"],
            n["pressure"]["ladder"]["gold"],
        ],
    }


def _record() -> None:  # pragma: no cover - run by hand, in the default environment
    import pprint
    import tempfile

    import torch

    from reward_lens_tl.report import build_report

    torch.set_num_threads(1)
    numbers = build_report(None, None, tempfile.mkdtemp(), limit=LIMIT, progress=False)
    pprint.pprint(_rounded(key_numbers(numbers)), width=100, sort_dicts=False)


def _rounded(value):
    if isinstance(value, float):
        return float(f"{value:.6g}")
    if isinstance(value, dict):
        return {k: _rounded(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_rounded(v) for v in value]
    return value


if __name__ == "__main__":  # pragma: no cover
    _record()
