"""A hardened HTTP/1.1 server for an ASGI app on Trio, parsing with llhttp (``httptools``).

:func:`~trio_mcp.serve_http` runs :class:`StreamableHttpApp` on it when
``httptools`` is installed (the ``fast`` extra); hypercorn's Trio worker is the
other choice (``server="hypercorn"``). The parser is llhttp in its strict
mode (what node's ``http`` runs); this module adds what a public server needs
around it:

- one Trio task per connection, which reads, parses and runs the app for
  each request in turn; the app's ``receive()`` reads the socket itself for
  the rest of a body and, once the body is in, to see the client go
  (``http.disconnect``) while a long answer (SSE) is written;
- limits: request target (414), request line and header bytes and header
  count (431), body (413, counted as it streams in, refused at once by its
  ``Content-Length``), connections at once (503);
- timeouts: the request head must arrive within ``headers_timeout`` (408:
  slowloris), an idle keep-alive connection closes after
  ``keep_alive_timeout``, a body must arrive within ``body_timeout`` (408);
- HTTP/1.0 and 1.1 keep-alive and ``Connection: close``, ``Expect:
  100-continue`` (417 for another expectation), chunked bodies, pipelined
  requests answered in order (reading paused while a few wait), ``HEAD``
  (no body written), ``Date`` and ``Server`` headers as configured;
- framing it refuses with 400 and a closed connection (RFC 9112 §6.1, §6.3,
  §5.2, §3.2): ``Content-Length`` with ``Transfer-Encoding``, duplicate or
  malformed ``Content-Length``, a ``Transfer-Encoding`` other than
  ``chunked`` last, ``Transfer-Encoding`` on HTTP/1.0, bad chunk sizes or
  extensions, obsolete line folding, bare CR or LF, invalid header names or
  values, a missing (HTTP/1.1) or repeated or malformed ``Host``; a version
  other than 1.0 and 1.1 gets 505; ``CONNECT`` gets 501 and the connection
  closed; an ``Upgrade`` is ignored (RFC 9110 §7.8): the request is served
  as plain HTTP and the connection closed after it;
- TLS through :class:`trio.SSLStream`; a graceful shutdown: cancelling the
  server stops accepting, closes idle connections at once and lets requests
  in progress finish within ``shutdown_timeout``.

Every error answer, every timeout and every refusal closes the connection
after it (a lingering close: the write side is shut and what the client
still sends is read and dropped for a moment, so that it sees the answer).

The parts, split as h11 splits its own: :mod:`._settings` (the limits),
:mod:`._request` (the sans-IO reading side: llhttp's callbacks, limits and
framing checks, the queue of parsed requests), :mod:`._answer` (the sans-IO
writing side: an answer's head and framing), :mod:`._connection` (one
connection's I/O loop and the ASGI ``receive``/``send``), :mod:`._server`
(accepting, the connection limit, TLS, graceful shutdown).
"""

from ._settings import LLHTTP_AVAILABLE as LLHTTP_AVAILABLE
from ._settings import AsgiApp as AsgiApp
from ._settings import HttpServerSettings as HttpServerSettings
