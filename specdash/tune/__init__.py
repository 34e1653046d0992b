"""The speculation tune: a floor between the UI (and the CLI) and the server.

`plan` (what a tune measures), `journal` (what it measured, append-only), `runner` (the restarts and the search,
on a `RemoteSession`, learning its numbers from what `session.sweep()` returns), `job` (the one path from a
plan to a verified, exported policy: the CLI's `specdash tune` and the dashboard's T view both run it) and
`report` (the result as plain data, its table and chart). The pure rules are `specdash.core.tune`.
"""
