"""Pure detectors: events with explicit times in, alerts out (no clock, no I/O)."""
