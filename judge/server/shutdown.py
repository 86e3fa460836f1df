"""Serving the app with uvicorn, and stopping it so that every request in flight gets an answer.

`serve` runs the app (`judge.server.app.create_app`) as ``judge serve`` does. On SIGTERM or
SIGINT (or ``should_exit``), `DrainingServer`:

1. stops accepting connections, then lets the event loop read the requests that already
   arrived on open connections (uvicorn closes a connection whose request it has not yet
   parsed, which its client would see as a connection closed without a response);
2. starts the batcher's drain (`judge.server.batching.MicroBatcher.drain`): jobs that start
   within ``drain_s`` seconds are answered (200), the ones still waiting then, and any
   request admitted later, are refused with a 503 saying that the server is shutting down;
3. hands over to uvicorn's own shutdown, which waits for the responses to be sent (at most
   ``drain_s`` plus ``grace_s``, enough for the batch running at the deadline to finish),
   then runs the app's shutdown (the batcher stops, its worker thread ends).

Connections idle between requests are closed, as uvicorn does; a client that sends a new
request on one at that moment may see it closed (HTTP keep-alive's race, not this server's).

What it deliberately does not do: define routes (`judge.server.app`), parse the command
line (`judge.cli.serve`), or interrupt a batch being scored (one forward pass cannot be).
"""

from __future__ import annotations

import asyncio
import contextlib

import uvicorn

__all__ = ["DrainingServer", "serve"]

#: seconds, past the drain, for the batch running at its deadline to finish and its answers to be sent
GRACE_S = 60.0
#: seconds the event loop gets to read requests already sent on open connections, once no new ones are accepted
READ_PENDING_S = 0.2


class DrainingServer(uvicorn.Server):
    """A `uvicorn.Server` whose shutdown drains the app's batcher for ``drain_s`` seconds, then refuses (503).

    Parameters
    ----------
    config : uvicorn.Config
        Its ``timeout_graceful_shutdown`` is set to ``drain_s + grace_s``.
    batcher : judge.server.batching.MicroBatcher
        The app's (``app.state.batcher``).
    drain_s : float
        How long, after the signal, waiting work may still start.
    grace_s : float
        How much longer uvicorn waits for responses before it cancels what is left.

    Examples
    --------
    >>> from judge.server.batching import MicroBatcher
    >>> s = DrainingServer(uvicorn.Config(lambda *a: None), MicroBatcher(lambda ps: ps), drain_s=3)
    >>> s.config.timeout_graceful_shutdown
    63.0
    """

    def __init__(self, config: uvicorn.Config, batcher, *, drain_s: float, grace_s: float = GRACE_S):
        if drain_s < 0 or grace_s < 0:
            raise ValueError(f"DrainingServer needs drain_s >= 0 and grace_s >= 0 (seconds), got {drain_s} and "
                             f"{grace_s}; pass --drain-seconds 0 or more.")
        config.timeout_graceful_shutdown = float(drain_s) + float(grace_s)
        super().__init__(config)
        self.batcher, self.drain_s = batcher, float(drain_s)

    async def shutdown(self, sockets=None) -> None:
        for server in getattr(self, "servers", ()):  # no new connections: the port is closed
            server.close()
        for sock in sockets or []:
            sock.close()
        await asyncio.sleep(READ_PENDING_S)  # requests already sent are parsed (then answered or refused)
        self.batcher.drain(self.drain_s)
        await super().shutdown(sockets=sockets)


def serve(app, *, host: str = "127.0.0.1", port: int = 8009, drain_s: float = 300.0, log_level: str = "info",
          grace_s: float = GRACE_S) -> bool:
    """Serve ``app`` (from `judge.server.app.create_app`) until SIGTERM/SIGINT, then drain it (module docstring).

    Blocks. ``drain_s``: how long the requests in flight may take to start after the signal
    (``judge serve --drain-seconds``); past it they are refused with a 503. Returns whether the
    server started (False: it could not, e.g. the port is taken; uvicorn logged why).

    Examples
    --------
    Not run as a doctest (+SKIP): it serves until stopped (tests/server/test_faults.py starts one
    with ``judge serve`` and stops it with SIGTERM).

    >>> from judge.server.app import create_app
    >>> serve(create_app(), port=8009, drain_s=10)  # doctest: +SKIP
    """
    config = uvicorn.Config(app, host=host, port=port, log_level=log_level)
    server = DrainingServer(config, app.state.batcher, drain_s=drain_s, grace_s=grace_s)
    with contextlib.suppress(KeyboardInterrupt):  # as uvicorn.run: a second Ctrl-C during the drain
        server.run()
    return bool(server.started)
