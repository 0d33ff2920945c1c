"""replay: recordings answering as the agent did. The replay server (``serve/``: HTTP, gRPC, the
in-process transport, the recording modes) and the pytest plugin (``pytest_plugin``).

The fold and the projections it reads are :mod:`fold`; inspection is :mod:`inspection`.
"""
