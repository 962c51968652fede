"""Answering: getting answers and verdicts and recording them.

Owns config (which models, with which settings, and their variants: a model
with its own prompt), prompt templates (`templates`), chat sessions, runs
(local, batch, load), the tool loop, checks and tags on answers (code run
against tests and a team's own checks, in child processes), the request cache,
sample-set cases and the blind vote queue and judge that turn answers into
votes. May import: `core.ground`, `core.stats`, `providers`, `store`."""
