"""Ground: the rules every module of lineup follows, importing nothing above.

Owns errors and exit codes (`errors`), untrusted text made inert (`text`),
bounded reading of input files (`inputs`, `jsonl`), patterns run under a
time limit (`patterns`), what looks like a credential (`credentials`) and
safe file writes (`files`). May import: the standard library and `providers.secrets`; nothing
else of lineup."""
