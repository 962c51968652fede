"""SVG snapshots of what a blind rater sees with a reasoning model among the
contestants (demo/thinker streams reasoning first): before the vote its pane
looks like any other, no reasoning block; after the vote the reasoning is
there. 80x24, the smallest terminal lineup is designed for. Deterministic like
tests/test_tui_snapshots.py (instant demo models, fixed seeds, figures masked).
Update with `pytest tests/test_tui_blind_snapshots.py --snapshot-update`."""

from __future__ import annotations

from tests.snapshot_support import _deterministic, chat_answered, mask, store  # noqa: F401  (fixtures)
from tests.tui_support import wait_for

from providers.demo import DEMO_MODELS
from tui.app import ChatOptions, LineupApp

SMALL = (80, 24)
HINT = "Demo models (offline, synthetic answers)."


def blind_thinker_app(store):
    models = [m for m in DEMO_MODELS if m.alias in ("demo/concise", "demo/thinker")]
    opts = ChatOptions(models=models, seed=1, hint=HINT, label_seed=11, blind=True)
    return LineupApp(store, chat=opts, rater="tester")


def test_blind_chat_with_a_reasoning_model_before_the_vote(snap_compare, store):  # noqa: F811
    async def before(pilot):
        await chat_answered(pilot, "Explain recursion")
        thinker = next(i for i, c in enumerate(pilot.app.session.contestants) if c.alias == "demo/thinker")
        assert "The user is asking" not in pilot.app.chat_screen.panes[thinker].body.plain_text()

    assert snap_compare(blind_thinker_app(store), run_before=before, terminal_size=SMALL)


def test_blind_chat_with_a_reasoning_model_after_the_vote(snap_compare, store):  # noqa: F811
    async def before(pilot):
        await chat_answered(pilot, "Explain recursion")
        await pilot.press("f2", "a")
        await wait_for(pilot, lambda: pilot.app.session.revealed, "the reveal")
        screen = pilot.app.chat_screen
        await wait_for(pilot, lambda: not any(p.masked_reasoning for p in screen.panes), "the reasoning")
        await pilot.pause(0.2)
        mask(pilot.app)

    assert snap_compare(blind_thinker_app(store), run_before=before, terminal_size=SMALL)
