"""Request handlers, one module per API family. Each handler takes (broker, header, request) and
returns a response dict for :func:`floodmark.wire.codec.build`, pre-encoded parts, None (no
response) or an awaitable of one of those."""
