"""Containers that their children cover: painted as blank rows, not through Textual's line cache.

Textual repaints every widget that overlaps the bounding box of a frame's
dirty regions, and a container that holds that box whole is asked for all
of its rows: a 12-row log update asked the screen for its 40 rows and the
body for its 38, each looked up in the styles cache and passed through the
app's line filters. That was the largest share of painting a frame in which
only the log moved (issue 20). The dashboard's screen and body are covered
edge to edge by their children, so those rows are never seen; ``BLANK``
makes Textual hand back one blank strip of the container's own style per
request instead. Where a child ever left a gap, the gap shows that style,
which is what the container's own blank rows would have shown.

Only for containers without a border, padding or content of their own.
"""

from __future__ import annotations

from typing import ClassVar

from textual.containers import Vertical
from textual.screen import Screen


class BackdropScreen(Screen[None]):
    """The dashboard's main screen: header, banner, body and footer cover it."""

    BLANK: ClassVar[bool] = True


class Backdrop(Vertical):
    """A vertical container whose children fill it (the dashboard's body)."""

    BLANK: ClassVar[bool] = True
