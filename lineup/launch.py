"""Run `LineupApp` from a command: open the store on its writer thread,
run the app, close the store whatever happened."""

from __future__ import annotations

import asyncio


def run_app(db, config, **options) -> int:
    """Exit code: 0, or the one the app exited with (2 for a bad session id)."""
    from store import AsyncStore, StoreError
    from tui.app import LineupApp

    async def main() -> int:
        try:
            store = await AsyncStore.open(db)
        except StoreError as exc:
            from core.ground.errors import UsageError

            raise UsageError(str(exc)) from None
        opened = store.store   # set by `open`
        if opened is not None and opened.readonly and "replay" not in options:
            # chat and vote record as they go: refuse now, not at the first vote
            await store.aclose()
            from core.ground.errors import UsageError

            raise UsageError(f"{opened.path} is read-only: nothing could be recorded there "
                             "(lineup replay, report, sessions and export still work)")
        try:
            app = LineupApp(store, config, **options)
            await app.run_async()
            return app.return_code or 0
        finally:
            await store.aclose()

    return asyncio.run(main())
