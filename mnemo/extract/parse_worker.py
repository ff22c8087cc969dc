"""A second process that parses ahead, so a long write parses its next block while it writes this one.

    later = parse_later(texts)    # queued for this process's worker, a chunk at a time
    ...                           # the caller reads and writes what it parsed before
    later.wait()                  # the parses are kept (parser.keep); chunks the worker had not begun are parsed here

The parser is the larger half of `remember_many`'s time, and it runs on one core. The worker is a
plain child interpreter (`python -c "...parse_worker import main; main()"`, not `multiprocessing`,
which would import the caller's `__main__` again) that loads the same parser, reads requests from
its stdin and writes the parses to its stdout as spaCy DocBins: a frame is a 4-byte length, then a
tag (R ready, T texts, D docs, E error) and its payload. It says which parser it loaded before it
is sent work, and is refused if that is not the parser of this process, so a parse is the same
wherever it ran.

The worker pulls: one chunk of CHUNK texts is in flight at a time, the next sent when it answers.
When the caller is ready for texts the worker has not begun, it takes chunks back from the end and
parses them itself while the worker goes on from the front, so the two processes share the parse
whichever is faster (a worker still loading its parser gets none of it).

One worker per process, started on the first call that asks for one on a machine with at least two
cores; it exits when its stdin closes (this process ended, however it ended). A worker that dies
or errs costs time, never a result: `wait` parses here what it did not get and logs why.
"""

from __future__ import annotations

import atexit
import json
import logging
import os
import struct
import subprocess
import sys
import threading
from collections import deque
from concurrent.futures import Future
from pathlib import Path

from .parser import keep, parse, parse_to_wire, parser_name

log = logging.getLogger(__name__)
_HEADER = struct.Struct(">I")
CHUNK = 16  # texts a request carries: ~50 ms of parsing, so little is left to wait for when the caller comes
WAIT_S = 60.0  # a chunk not back from the worker by then is parsed here
RESTARTS = 3  # workers started after one died, per process, before parsing stays here
_UNAVAILABLE: str | None = None  # why no worker can be started in this process, once that is known
PARSED = {"worker": 0, "here": 0}  # texts parse_later has had parsed in each place, in this process


def cores() -> int:
    """Return the cores this process may run on."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # pragma: no cover - not Linux
        return os.cpu_count() or 1


def _send(stream, tag: bytes, payload: bytes) -> None:
    stream.write(_HEADER.pack(len(payload) + 1) + tag + payload)
    stream.flush()


def _read(stream) -> tuple[bytes, bytes] | None:
    """Return (tag, payload) of the next frame, or None at the end of the stream."""
    head = stream.read(_HEADER.size)
    if len(head) < _HEADER.size:
        return None
    n = _HEADER.unpack(head)[0]
    body = stream.read(n)
    if len(body) < n or n < 1:
        return None
    return body[:1], body[1:]


class ParseWorker:
    """One child process that parses chunks of texts; `submit` queues one and returns a Future of its wire bytes."""

    def __init__(self) -> None:
        package_root = str(Path(__file__).resolve().parents[2])  # this mnemo, wherever it was imported from
        env = {**os.environ, "PYTHONPATH": os.pathsep.join(p for p in (package_root, os.environ.get("PYTHONPATH"))
                                                           if p)}
        self.proc = subprocess.Popen([sys.executable, "-c", "from mnemo.extract.parse_worker import main; main()"],
                                     stdin=subprocess.PIPE, stdout=subprocess.PIPE, env=env)
        self.parent = os.getpid()
        self.ready = False
        self.refused = False  # it loaded another parser: no worker will do here
        self.failed: str | None = None
        self._queue: deque[tuple[list[str], Future]] = deque()  # not sent yet
        self._sent: Future | None = None  # the chunk the worker is parsing
        self._lock = threading.Lock()
        threading.Thread(target=self._listen, name="mnemo-parse-worker", daemon=True).start()

    def _listen(self) -> None:
        expected = parser_name()
        why = None
        while why is None and (frame := _read(self.proc.stdout)) is not None:
            tag, payload = frame
            with self._lock:
                if tag == b"R":
                    loaded = payload.decode(errors="replace")
                    if loaded != expected:
                        self.refused, why = True, f"the worker loaded {loaded}, not {expected}"
                    else:
                        self.ready = True
                        self._pump()
                    continue
                future, self._sent = self._sent, None
                if future is None:
                    why = "the parse worker answered a request it was not sent"
                    continue
                self._pump()
            if tag == b"D":
                future.set_result(payload)
            else:
                future.set_exception(RuntimeError(f"the parse worker failed: {payload.decode(errors='replace')}"))
        self._fail(why or f"the parse worker exited (code {self.proc.poll()})")

    def _pump(self) -> None:
        """Send the next queued chunk if the worker is ready and idle (the caller holds `_lock`)."""
        while self.ready and self.failed is None and self._sent is None and self._queue:
            texts, future = self._queue.popleft()
            try:
                _send(self.proc.stdin, b"T", json.dumps(texts).encode())
            except (OSError, ValueError) as exc:  # the worker is gone; the listener will see its end
                future.set_exception(RuntimeError(f"the parse worker cannot be reached: {exc}"))
                continue
            self._sent = future

    def _fail(self, why: str) -> None:
        with self._lock:
            if self.failed is None:
                self.failed = why
            lost = [f for _, f in self._queue] + ([self._sent] if self._sent is not None else [])
            self._queue, self._sent = deque(), None
        for future in lost:
            future.set_exception(RuntimeError(why))
        self.close()

    def submit(self, texts: list[str]) -> Future:
        """Queue `texts` to be parsed; the Future holds their wire bytes (`parser.keep`) or the failure."""
        future: Future = Future()
        with self._lock:
            if self.failed is not None:
                future.set_exception(RuntimeError(self.failed))
            else:
                self._queue.append((texts, future))
                self._pump()
        return future

    def withdraw(self, future: Future) -> bool:
        """Take back a chunk the worker has not been sent; return whether it was taken."""
        with self._lock:
            for item in self._queue:
                if item[1] is future:
                    self._queue.remove(item)
                    return True
        return False

    def close(self) -> None:
        """End the worker: its stdin closes and it exits."""
        try:
            self.proc.stdin.close()
        except OSError:  # pragma: no cover - already gone
            pass


_WORKER: ParseWorker | None = None
_STARTED = threading.Lock()


def start_parse_worker() -> ParseWorker | None:
    """Return this process's parse worker, started on first use; None on one core or when none can run."""
    global _WORKER, RESTARTS, _UNAVAILABLE
    with _STARTED:
        if _WORKER is not None and _WORKER.parent != os.getpid():
            _WORKER = None  # a forked child's copy: the pipes are its parent's, not to be written here
        if _WORKER is not None and _WORKER.failed is not None:
            if _WORKER.refused or RESTARTS <= 0:
                return None  # another parser, or a worker that keeps dying: parse here
            log.warning("starting a new parse worker: %s", _WORKER.failed)
            RESTARTS -= 1
            _WORKER = None
        if _WORKER is None:
            if cores() < 2 or _UNAVAILABLE is not None:
                return None
            try:
                _WORKER = ParseWorker()
            except OSError as exc:  # no process can be started here: parse here, and say so once
                _UNAVAILABLE = str(exc)
                log.warning("no parse worker (%s): parsing in this process", exc)
                return None
        return _WORKER


@atexit.register
def _shutdown() -> None:
    """End this process's worker with it (it would end at its stdin's close anyway)."""
    if _WORKER is not None:
        _WORKER.close()
        try:
            _WORKER.proc.wait(timeout=5)
        except subprocess.TimeoutExpired:  # pragma: no cover - a worker stuck in a parse
            _WORKER.proc.kill()


class Later:
    """Texts queued for the worker in chunks; `wait` keeps their parses, parsing here what the worker did not."""

    def __init__(self, chunks: list[tuple[list[str], Future]], source: ParseWorker | None):
        self.chunks, self.source = chunks, source
        self.where = {"worker": 0, "here": 0}  # texts parsed in each place, once waited for

    def wait(self) -> dict[str, int]:
        """Make every text's parse kept; return how many texts were parsed by the worker and here."""
        # The worker takes chunks from the front; the chunks it has not begun are taken back from the
        # back, one at a time, and parsed here, until the two meet.
        here = [self.source is None] * len(self.chunks)
        for k in range(len(self.chunks) - 1, -1, -1):
            texts, future = self.chunks[k]
            if not here[k] and not self.source.withdraw(future):
                break
            here[k] = True
            parse(texts)
            self.where["here"] += len(texts)
        for (texts, future), mine in zip(self.chunks, here, strict=True):
            if mine:
                continue
            try:
                keep(texts, future.result(timeout=WAIT_S))
                self.where["worker"] += len(texts)
            except Exception as exc:  # the worker's failure costs a parse here, never a result
                log.warning("parsing here: %s", exc or type(exc).__name__)
                parse(texts)
                self.where["here"] += len(texts)
        for k, v in self.where.items():
            PARSED[k] += v
        return self.where


def parse_later(texts: list[str]) -> Later:
    """Queue `texts` for the worker when there is one; `wait()` on the result before reading them."""
    texts = list(dict.fromkeys(texts))
    source = start_parse_worker() if texts else None
    chunks = [texts[k:k + CHUNK] for k in range(0, len(texts), CHUNK)]
    if source is None:
        return Later([(c, Future()) for c in chunks], None)
    return Later([(c, source.submit(c)) for c in chunks], source)


def main() -> None:
    """The worker: parse each request from stdin, answer on stdout, until stdin closes."""
    # Nothing but frames may reach the stream the parent reads: frames go to a copy of fd 1, and fd 1
    # itself (print, warnings, anything a library writes there) now goes to stderr.
    out, inp = os.fdopen(os.dup(1), "wb"), sys.stdin.buffer
    os.dup2(2, 1)
    sys.stdout = sys.stderr
    try:
        _send(out, b"R", parser_name().encode())
        while (frame := _read(inp)) is not None:
            try:
                answer = b"D", parse_to_wire(json.loads(frame[1]))
            except Exception as exc:  # answered, so the parent parses these itself and goes on
                answer = b"E", f"{type(exc).__name__}: {exc}".encode()
            _send(out, *answer)
    except BrokenPipeError:  # the parent is gone: so is the reason to parse
        pass
