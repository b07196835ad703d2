"""The Textual dashboard: a view on the headless Monitor.

Nothing here decides anything about the run: every number, badge and alert
comes from the Monitor (which a test can drive without a terminal). The
views only choose what to redraw and when, and hand job actions to a
controller on worker threads so the event loop never waits on tmux.
"""
