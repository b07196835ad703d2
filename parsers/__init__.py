"""The pure core that turns log text into typed events (no I/O, no clock)."""
