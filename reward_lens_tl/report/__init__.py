"""`reward-lens report`: one report about a reward model on a pair set, as HTML and markdown.

A self-contained HTML page and markdown, both rendered from the same sections.

`build_report` scores the pairs, runs the pair lens, the margin's direct attribution,
activation patching of the largest-margin pairs and token views of the most and least
preferred responses, plus the sections registered with `register_section` (the probe
suite, failures explained, token sweeps; `reward_lens_tl.report.sections`). Without a pair
file it runs on the zoo (`make demo`): the zoo's rule-labelled pairs, the zoo's probes and
benchmark, and the sections only its ground truth allows (`reward_lens_tl.report.zoo`).
A data-quality note comes first, on the page and in `report.json` (`data_quality`): the
share of unknown tokens in the scored pairs, and the pairs skipped or truncated with the
reasons. The page needs no network: its figures are interactive plotly figures, drawn by
the plotly.js bundle inlined once in the page (legacy matplotlib figures are inline PNGs);
every text is escaped (in the markdown too, whose figures are PNG files). A linked table of
contents opens the page and every section folds. Files are written to a temporary name and
moved into place at the end, next to `report.json` with its numbers; `resume=True` continues
an interrupted run from `.work/` (with the same arguments). `backend="bridge"` (`reward-lens
report --backend bridge`), or a `BridgeRewardModel` given, runs it on TransformerLens 4's bridge,
where a section whose analysis needs TransformerLens 3.9 is a one-line note
(`reward_lens_tl.report.backends`).
"""

from . import sections  # noqa: F401  (registers the extra sections)
from .build import ReportError, build_report, register_section
from .page import Section
from .zoo import zoo_pairs

__all__ = ["ReportError", "Section", "build_report", "register_section", "zoo_pairs"]
