"""The core of lineup: everything between a keystroke (or a command) and the
providers and the store, without Textual. Sessions fan a turn out to the
contestants, runs play sample sets, votes say what a judgement means, and the
report turns the record into ratings. ARCHITECTURE.md draws the layers."""
