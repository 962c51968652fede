"""`lineup vote FILE --rater NAME` in the TUI: the blind queue over a vote
package (`lineup share`), its order from the package's seed, nothing of the
real models on screen before or after the vote (the package has none), the
vote saved in the package and mapped back to the real model by `lineup import`."""

from __future__ import annotations

from tests.tui_sessions import ALIASES, CASES, IDENTITY, make_run
from tests.tui_support import leaks, open_store, run, wait_for

from lineup.cli import main
from store import Store
from store.share import package_info_at
from tui.app import LineupApp, VoteOptions
from tui.vote_queue import VoteQueueScreen


def test_voting_in_a_package_in_the_tui_and_importing_it(tmp_path, capsys):
    owner = tmp_path / "owner.db"
    sid = make_run(owner, CASES, blind=True)
    pkg = tmp_path / "pkg.db"
    assert main(["share", sid, "-o", str(pkg), "--db", str(owner)]) == 0
    seed = package_info_at(pkg).seed
    picked: list[str] = []

    async def scenario():
        store = await open_store(pkg)
        app = LineupApp(store, vote=VoteOptions(None, case_seed=seed), rater="alice")
        async with app.run_test(size=(150, 40)) as pilot:
            await wait_for(pilot, lambda: isinstance(app.screen, VoteQueueScreen) and app.screen.current is not None,
                           "the queue")
            screen = app.screen
            order = list(screen.order)
            await pilot.press("a")
            await wait_for(pilot, lambda: screen.judged, "the vote")
            await pilot.pause()
            chrome = "\n".join([str(screen.info.render()), *[str(p.header.render()) for p in screen.panes],
                                str(app.sub_title), *[m for _, m in app.notices]])
            assert leaks(chrome, IDENTITY) == []          # even after the vote: the package holds no names
            picked.append(screen.panes[0].body.answer_text())
            assert order == screen.order
        await store.aclose()

    run(scenario())
    capsys.readouterr()
    assert main(["import", str(pkg), "--db", str(owner)]) == 0
    with Store.open(owner) as s:
        (vote,) = [v for v in s.load_session(sid).current_votes() if v.rater == "alice"]
    # the answer in the leftmost pane (label A) was written by the model the owner's record now names
    assert vote.choice == "A" and f"from {vote.winner} " in picked[0] and vote.winner in ALIASES
