"""verify: a recording checked against a live agent. The recorded client's requests are sent again
(the live side's recording client, :mod:`verify.live`), each answer is a new run of its task, and the
two runs are compared at contract level (:mod:`inspection.verify_rules`). It stands above the live
side and inspection, since it uses both; only the CLI is above it."""
