"""pytest plugin for replaying a2a-tape recordings (registered through the pytest11 entry point)."""
