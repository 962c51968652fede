"""The browser front end (`lineup rate`): a small page on Starlette and
uvicorn (the optional extra `web`), beside the TUI: lineup -> web -> core.
Like the TUI it never imports the store's SQL or the providers; it reaches
the record through the core (the vote queue, `core.answering.raters`,
`core.answering.rater_view`)."""
