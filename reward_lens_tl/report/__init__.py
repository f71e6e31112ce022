"""``reward-lens report``: one self-contained HTML page about a reward model on a pair set.

:func:`build_report` scores the pairs, runs the pair lens, the margin's direct attribution,
activation patching of the largest-margin pairs and token views of the most and least
preferred responses, plus any extra sections registered with :func:`register_section` (the
probe suite, token sweeps and benchmark failures register theirs). A data-quality note comes
first, on the page and in ``report.json`` (``data_quality``): the share of unknown tokens in the
scored pairs, and the pairs skipped or truncated with the reasons. The page has no scripts
and needs no network: figures are inline PNGs and every text is escaped. It is written to a
temporary name and moved into place at the end, next to ``report.json`` with its numbers;
``resume=True`` continues an interrupted run from ``.work/`` (with the same arguments).
"""

from . import sections  # noqa: F401  (registers the extra sections)
from .build import ReportError, build_report, register_section

__all__ = ["ReportError", "build_report", "register_section"]
