"""Views of a finished run: summary.json, junit.xml, report.html and the console text.

Each module turns a ``RunResult`` (plus the summary and regression block where needed) into one
artifact; none of them runs anything or writes files (``trialrun.base.fsutil`` does the writing).
The names below are imported on first use, so importing one view (``trialrun run`` needs the
console text) does not load the others; jinja2 is imported only when an HTML report is rendered.
"""

from __future__ import annotations

from trialrun.base.lazyexport import lazy_getattr

# Not typing.TYPE_CHECKING: see trialrun/__init__.py.
TYPE_CHECKING = False
if TYPE_CHECKING:
    from trialrun.report.console import format_run
    from trialrun.report.html import render_html
    from trialrun.report.junit import build_junit
    from trialrun.report.summary import build_summary

__all__ = ["build_junit", "build_summary", "format_run", "render_html"]

__getattr__ = lazy_getattr(
    globals(),
    {
        "build_junit": "trialrun.report.junit",
        "build_summary": "trialrun.report.summary",
        "format_run": "trialrun.report.console",
        "render_html": "trialrun.report.html",
    },
)
