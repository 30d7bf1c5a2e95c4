"""Keep torch's and onnx's chatter (graph dumps, log lines, warnings) off the console."""

from __future__ import annotations

import contextlib
import io
import logging
import warnings


@contextlib.contextmanager
def quiet(enabled: bool = True):
    """Capture stdout, stderr, logging and warnings; yields the buffer holding what was captured.

    A failing export logs its whole partial graph and a conversion prints progress lines:
    useful when debugging (``-v`` shows them), noise when the failure is the expected one.
    Warnings raised while captured are written to the buffer, not lost.
    """
    buffer = io.StringIO()
    if not enabled:
        yield buffer
        return
    handler = logging.StreamHandler(buffer)
    # torch puts handlers bound to the real stderr on several of its loggers ("torch", "torch.onnx"...)
    loggers = [
        logging.getLogger(),
        *(lg for lg in logging.Logger.manager.loggerDict.values() if getattr(lg, "handlers", None)),
    ]
    saved = [(lg, lg.handlers) for lg in loggers]
    try:
        for lg in loggers:
            lg.handlers = [handler]
        with (
            warnings.catch_warnings(record=True) as caught,
            contextlib.redirect_stdout(buffer),
            contextlib.redirect_stderr(buffer),
        ):
            warnings.simplefilter("always")
            try:
                yield buffer
            finally:
                for w in caught:
                    buffer.write(warnings.formatwarning(w.message, w.category, w.filename, w.lineno))
    finally:
        for lg, handlers in saved:
            lg.handlers = handlers
