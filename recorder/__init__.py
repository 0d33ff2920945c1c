"""recorder: the live side of a2a-tape (record, recovery, probes, the recording transport and
interceptor, the recording proxy). The command line is :mod:`cli`; one call on its way to the log is
:mod:`capture`."""
