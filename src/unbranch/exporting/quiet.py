"""Keep torch's and onnx's chatter (graph dumps, log lines, warnings) off the console."""

from __future__ import annotations

import contextlib
import io
import logging
import sys
import warnings


class Captured(io.StringIO):
    """What was printed and logged while quiet; ``replay()`` shows it after all."""

    def replay(self) -> None:
        text = self.text()
        if text:
            sys.stderr.write(text + "\n")

    def text(self) -> str:
        """The captured text without its blank lines (torch logs empty records around graph dumps)."""
        return "\n".join(line for line in self.getvalue().splitlines() if line.strip())


@contextlib.contextmanager
def quiet(enabled: bool = True, warnings_too: bool = True):
    """Capture stdout, stderr, logging and (``warnings_too``) warnings; yields the Captured buffer.

    A failing export logs its whole partial graph and a conversion prints progress lines:
    useful when debugging (``-v`` shows them), noise when the failure is the expected one.
    Warnings raised while captured are written to the buffer, not lost.
    """
    buffer = Captured()
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
            warnings.catch_warnings(record=True) if warnings_too else contextlib.nullcontext() as caught,
            contextlib.redirect_stdout(buffer),
            contextlib.redirect_stderr(buffer),
        ):
            if warnings_too:
                warnings.simplefilter("always")
            try:
                yield buffer
            finally:
                for w in caught or ():
                    buffer.write(warnings.formatwarning(w.message, w.category, w.filename, w.lineno))
    finally:
        for lg, handlers in saved:
            lg.handlers = handlers
