"""unbranch: rewrite Python control flow on tensors so that torch.export captures it."""

from .api import export, rewrite_source, torch_export_rewrite, transform_method
from .errors import UnbranchError
from .exporting.report import Report, observe_branches, report_of
from .hf.catalog import code_needing_rewriting
from .load.rewriting import RewrittenMethod
from .version import VERSION as __version__

__all__ = [
    "Report",
    "RewrittenMethod",
    "UnbranchError",
    "code_needing_rewriting",
    "export",
    "__version__",
    "observe_branches",
    "report_of",
    "rewrite_source",
    "torch_export_rewrite",
    "transform_method",
]
