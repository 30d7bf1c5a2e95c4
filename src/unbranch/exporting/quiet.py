"""Keep torch's and onnx's chatter (graph dumps, log lines, warnings) off the console.

Only the thread that exports is quieted: stdout, stderr and the loggers are the process's, so
what other threads print or log while an export runs goes where it went before, and the
streams and handlers are put back as they were, whatever the order captures end in.
"""

from __future__ import annotations

import contextlib
import io
import logging
import sys
import threading
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


class _ThreadStream:
    """``sys.stdout``/``sys.stderr`` while one thread is quiet: its writes go to the buffer, others'
    to the stream it replaced."""

    def __init__(self, original, buffer: Captured, owner: int):
        self.original, self.buffer, self.owner = original, buffer, owner

    def _target(self):
        return self.buffer if threading.get_ident() == self.owner else self.original

    def write(self, text):
        return self._target().write(text)

    def flush(self):
        return self._target().flush()

    def __getattr__(self, name):  # (encoding, isatty, fileno...: the real stream's)
        return getattr(self.original, name)


class _ThreadHandler(logging.Handler):
    """A logger's handlers while one thread is quiet: its records go to the buffer, others' to the
    logger's own handlers."""

    def __init__(self, captured: logging.Handler, handlers: list, owner: int):
        super().__init__()
        self.captured, self.handlers, self.owner = captured, handlers, owner

    def handle(self, record):
        if record.thread == self.owner:
            return self.captured.handle(record)
        for h in self.handlers:
            if record.levelno >= h.level:
                h.handle(record)
        return True


@contextlib.contextmanager
def quiet(enabled: bool = True, warnings_too: bool = True):
    """Capture this thread's stdout, stderr, logging and (``warnings_too``) warnings; yields the
    Captured buffer.

    A failing export logs its whole partial graph and a conversion prints progress lines:
    useful when debugging (``-v`` shows them), noise when the failure is the expected one.
    Warnings raised while captured are written to the buffer, not lost (the warnings filters
    are the process's: unbranch exports one at a time, see exporting.session).
    """
    buffer = Captured()
    if not enabled:
        yield buffer
        return
    owner = threading.get_ident()
    captured = logging.StreamHandler(buffer)
    # torch puts handlers bound to the real stderr on several of its loggers ("torch", "torch.onnx"...)
    loggers = [
        logging.getLogger(),
        *(lg for lg in logging.Logger.manager.loggerDict.values() if getattr(lg, "handlers", None)),
    ]
    saved = [lg.handlers for lg in loggers]
    streams = sys.stdout, sys.stderr
    routes = [_ThreadHandler(captured, handlers, owner) for handlers in saved]
    proxies = tuple(_ThreadStream(s, buffer, owner) for s in streams)
    try:
        for lg, route in zip(loggers, routes):
            lg.handlers = [route]
        sys.stdout, sys.stderr = proxies
        with warnings.catch_warnings(record=True) if warnings_too else contextlib.nullcontext() as caught:
            if warnings_too:
                warnings.simplefilter("always")
            try:
                yield buffer
            finally:
                for w in caught or ():
                    buffer.write(warnings.formatwarning(w.message, w.category, w.filename, w.lineno))
    finally:
        # each put back where it is still in place; where another capture replaced it meanwhile
        # (and will put this one back), it forwards everything from now on
        for route in (*proxies, *routes):
            route.owner = None
        if sys.stdout is proxies[0]:
            sys.stdout = streams[0]
        if sys.stderr is proxies[1]:
            sys.stderr = streams[1]
        for lg, route, handlers in zip(loggers, routes, saved):
            if lg.handlers == [route]:
                lg.handlers = handlers
