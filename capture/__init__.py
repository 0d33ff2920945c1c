"""capture: one call on its way to the log. The capture core (exchange), the recorded-upstream client
(upstream_call), a gRPC call (grpc_calls), what the recording paths import to talk upstream (sending),
the log and redaction the in-process recorders take (recording_log) and a decision of ours as a local
event, always scrubbed (notes)."""
