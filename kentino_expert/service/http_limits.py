"""Transport limits uvicorn does not enforce: request-head size and field count (431), read timeouts (408).

uvicorn's httptools protocol buffers a header of any size (a 100 MB header cost 190 MB) and never
times out a connection that trickles its request: its only timer is the keep-alive one, armed after
a response. Its h11 protocol caps an incomplete event (h11_max_incomplete_event_size, 16 KB) but
answers that with a 400, counts no fields and has no read timeout either. `limit_concurrency` only
answers 503 once a request's head is complete. So the service runs its own subclass of uvicorn's
httptools protocol (httptools is a dependency, so it is always the one in use):

- the request line and header fields together may take `max_head_bytes`, and there may be at most
  `max_header_fields` fields, else 431 and the connection is closed;
- the head must arrive within `header_timeout` seconds of its first byte, the body within
  `body_timeout` seconds of the head, else 408 and close (a connection that has sent nothing is
  simply closed); a body, with its chunk framing and trailers, may take `max_body_bytes` on the wire.

Sizes are counted twice: exactly, field by field, as the parser completes them; and by the bytes fed
while one phase lasts the whole read, which bounds what the parser buffers inside one unfinished field.
Memory per connection is therefore at most a limit plus two socket reads (256 KiB each).
"""
from __future__ import annotations

from dataclasses import dataclass

import httptools
import uvicorn
from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol

from .error_codes import (
    BODY_TOO_LARGE,
    HEAD_TOO_LARGE,
    INVALID_HTTP,
    REQUEST_TIMEOUT,
    ErrorCode,
    error_bytes,
)

HEAD, BODY = "head", "body"


@dataclass(frozen=True)
class HttpLimits:
    """What one request may take on the wire; the defaults suit a JSON API of 1 MB bodies."""
    max_head_bytes: int = 16 * 1024
    max_header_fields: int = 100
    header_timeout: float = 10.0
    body_timeout: float = 30.0
    max_body_bytes: int = 2 * 1024 * 1024


class Refusal(Exception):
    """Raised inside a parser callback to stop parsing a request that breaks a limit."""

    def __init__(self, code: ErrorCode, field: str, message: str):
        super().__init__(message)
        self.code, self.field, self.message = code, field, message


def refusal_bytes(code: ErrorCode, field: str | None, message: str) -> bytes:
    """A whole `Connection: close` response with the API's {code, detail: [{field, message}]} body."""
    body = error_bytes(code, field, message)
    return b"".join([code.status_line, b"content-type: application/json\r\n",
                     b"content-length: %d\r\n" % len(body), b"connection: close\r\n\r\n", body])


class LimitedHttpToolsProtocol(HttpToolsProtocol):
    """uvicorn's httptools protocol with the limits of its config's `http_limits` (see server_config)."""

    def __init__(self, config, *args, **kwargs):
        super().__init__(config, *args, **kwargs)
        self.limits = getattr(config, "http_limits", None) or HttpLimits()
        self._phase = HEAD          # a new connection, like a kept-alive one, waits for a head
        self._moves = 0             # phase changes so far: a read that saw none lay wholly in one phase
        self._wire = {HEAD: 0, BODY: 0}
        self._head_exact = 0        # bytes of the request line and of the completed header fields
        self._fields = 0
        self._started = False       # some byte of the current request has arrived
        self._timer = None

    # -- timers -----------------------------------------------------------------------------------

    def _arm(self, seconds: float, phase: str) -> None:
        self._disarm()
        self._timer = self.loop.call_later(seconds, self._timed_out, phase)

    def _disarm(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None

    def _timed_out(self, phase: str) -> None:
        self._timer = None
        if self.transport.is_closing():
            return
        if phase == HEAD and not self._started:  # an idle connection: nothing to answer
            self.transport.close()
            return
        seconds = self.limits.header_timeout if phase == HEAD else self.limits.body_timeout
        what = "request line and headers" if phase == HEAD else "request body"
        self._refuse(REQUEST_TIMEOUT, "headers" if phase == HEAD else "body",
                     f"the {what} did not arrive within {seconds:g} s")

    def _refuse(self, code: ErrorCode, field: str, message: str) -> None:
        """Answer the error (unless a response is already under way) and close the connection."""
        self._disarm()
        cycle = self.cycle
        answering = self._phase == HEAD and (cycle is None or cycle.response_complete)
        answering = answering or (self._phase == BODY and cycle is not None and not cycle.response_started)
        if cycle is not None and not cycle.response_complete:
            cycle.disconnected = True  # the app, if it waits for the body, sees the client gone
            cycle.message_event.set()
        self.logger.info("%s:%s - %d: %s", *(self.client or ("?", 0)), code.status, message)
        if answering:
            self.transport.write(refusal_bytes(code, field, message))
        self.transport.close()

    # -- protocol ---------------------------------------------------------------------------------

    def connection_made(self, transport) -> None:
        super().connection_made(transport)
        self._arm(self.limits.header_timeout, HEAD)

    def connection_lost(self, exc) -> None:
        self._disarm()
        super().connection_lost(exc)

    def data_received(self, data: bytes) -> None:
        if self.transport.is_closing():  # refused: what still arrives is not read
            return
        self._unset_keepalive_if_required()
        if self._phase == HEAD:
            self._started = True
            if self._timer is None:  # the first bytes of a kept-alive connection's next request
                self._arm(self.limits.header_timeout, HEAD)
        phase, moves = self._phase, self._moves
        try:
            self.parser.feed_data(data)
        except httptools.HttpParserCallbackError as exc:
            if isinstance(exc.__context__, Refusal):
                refusal = exc.__context__
                self._refuse(refusal.code, refusal.field, refusal.message)
            else:
                self._invalid()
            return
        except httptools.HttpParserError:
            self._invalid()
            return
        except httptools.HttpParserUpgrade:
            self._unsupported_upgrade_warning()  # no WebSocket here
        if moves == self._moves:
            self._count_wire(phase, len(data))

    def _invalid(self) -> None:
        """A request httptools cannot parse: the API's JSON 400 (uvicorn's own is plain text), then close."""
        self.logger.warning("Invalid HTTP request received.")
        self._refuse(INVALID_HTTP, "request", "not a valid HTTP/1.1 request (its request line, a header field, "
                                     "Content-Length, Transfer-Encoding or the chunk framing)")

    def _count_wire(self, phase: str, size: int) -> None:
        self._wire[phase] += size
        if phase == HEAD and self._wire[HEAD] > self.limits.max_head_bytes:
            self._refuse(HEAD_TOO_LARGE, "headers", self._head_message())
        elif phase == BODY and self._wire[BODY] > self.limits.max_body_bytes:
            self._refuse(BODY_TOO_LARGE, "body",
                         f"the request body is over {self.limits.max_body_bytes} bytes on the wire")

    def _head_message(self) -> str:
        return f"the request line and header fields are over {self.limits.max_head_bytes} bytes"

    def _count_head(self, size: int) -> None:
        self._head_exact += size
        if self._head_exact > self.limits.max_head_bytes:
            raise Refusal(HEAD_TOO_LARGE, "headers", self._head_message())

    # -- parser callbacks -------------------------------------------------------------------------

    def on_message_begin(self) -> None:
        self._phase, self._moves = HEAD, self._moves + 1
        self._wire = {HEAD: 0, BODY: 0}
        self._head_exact = self._fields = 0
        self._started = True
        if self._timer is None:  # a request that began in the same read as the previous one ended
            self._arm(self.limits.header_timeout, HEAD)
        super().on_message_begin()

    def on_url(self, url: bytes) -> None:
        self._count_head(len(url))
        super().on_url(url)

    def on_header(self, name: bytes, value: bytes) -> None:
        if self._phase != HEAD:  # a trailer: bounded by max_body_bytes, not kept
            return
        self._fields += 1
        if self._fields > self.limits.max_header_fields:
            raise Refusal(HEAD_TOO_LARGE, "headers", f"more than {self.limits.max_header_fields} header fields")
        self._count_head(len(name) + len(value) + 4)
        super().on_header(name, value)

    def on_headers_complete(self) -> None:
        self._phase, self._moves = BODY, self._moves + 1
        self._arm(self.limits.body_timeout, BODY)
        super().on_headers_complete()

    def on_message_complete(self) -> None:
        self._phase, self._moves = HEAD, self._moves + 1
        self._started = False
        self._disarm()  # the next request's timer starts with its first byte
        super().on_message_complete()


def server_config(app, limits: HttpLimits, **options):
    """A uvicorn.Config serving `app` through LimitedHttpToolsProtocol with `limits` (no WebSocket).

    The limits ride on the config, which uvicorn hands to every protocol instance (and pickles into
    the worker processes it spawns itself), so the protocol class stays importable by name.
    """
    config = uvicorn.Config(app, http=LimitedHttpToolsProtocol, ws="none", **options)
    config.http_limits = limits
    return config
