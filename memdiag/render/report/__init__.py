"""The interactive HTML report (`--html FILE`): one self-contained page, data embedded as JSON.

:mod:`.data` turns replay, diagnose and check results into the document; :mod:`.page` puts it in
the page with the script and the style shipped beside this module (no network, no CDN).
"""

from memdiag.render.report.data import TextRecorder, document, run_data
from memdiag.render.report.page import embed_json, report_page, write_report

__all__ = ["TextRecorder", "document", "embed_json", "report_page", "run_data", "write_report"]
