"""The recording reverse proxy: clients talk to it as to the agent; every item is recorded, then
forwarded (:mod:`server`), with its HTTP plumbing (:mod:`http`), the SSE tee (:mod:`tee`), the
relayed answer shared by duplicates (:mod:`relay`), the idempotency gateway (:mod:`idempotency`)
and what a failed relay means (:mod:`outcomes`).
"""
