"""The copilot over streamable HTTP, in layers from the socket up.

- :mod:`~server.http.protocol` -- connections below the ASGI app: a request's line and headers
  capped and timed (431, 408), what a refused client still sends drained;
- :mod:`~server.http.guard` -- who may talk: bearer token, Origin and Host checks (loopback by
  default; any other interface needs a token), and the gate a stop closes (503);
- :mod:`~server.http.body` -- request bodies capped and never waited for forever (413, 408), and
  one JSON-RPC message each (415, -32600) where the SDK's answer would not say why;
- :mod:`~server.http.serve` -- the ASGI stack, the listening socket, uvicorn and a stop that
  answers every request in flight;
- :mod:`~server.http.common` -- the path, JSON replies and JSON-RPC errors they share.
"""
