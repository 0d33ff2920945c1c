"""Test support: real servers on 127.0.0.1 and real a2a-sdk agents."""
