"""wire: how A2A looks on the wire. One module per binding (jsonrpc, http_json, grpc; bindings picks
one), the SSE reader (sse_reader) and renderer (sse_frames), our clients' HTTP plumbing (http_client),
content codings, the dialects, and the loopback guard every local server takes."""
