"""recorder: the live side of a2a-tape (A2A client, recording proxy, recovery, probes) and the CLI."""
