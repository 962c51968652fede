"""The terminal app (Textual): screens and widgets only.

Textual's screen paints at most TEXTUAL_FPS times a second (60 unless set).
After a paint that came late its update timer waits for the second frame
boundary, up to two frames (33 ms at 60): longer than the stream views'
25 ms flush interval, so one flush in four waited 5-11 ms more for its
paint. At 120 two frames are 16.7 ms. Set here, before Textual is imported
(a value set by the user wins); it caps paints, it does not add any.
"""

import os

os.environ.setdefault("TEXTUAL_FPS", "120")
