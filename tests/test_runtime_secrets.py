"""`RuntimeSecretsGuard`: a secret learnt at request time (a token, a
signature) taken out of a provider's events, however the server cut it,
without moving the time the answer's first character arrived."""

from __future__ import annotations

from providers.events import Finish, ServedBy, TextDelta, ToolCall
from providers.runtime_secrets import RuntimeSecretsGuard

SECRET = "ya29.a0AfH6SMBxRuntimeSecret"


def _run(guard: RuntimeSecretsGuard, events: list) -> list:
    return [out for ev in events for out in guard.events(ev)]


def test_a_secret_cut_across_deltas_is_redacted_and_the_text_kept():
    guard = RuntimeSecretsGuard((SECRET,))
    pieces = ["the token is ", SECRET[:6], SECRET[6:15], SECRET[15:] + " ok"]
    out = _run(guard, [TextDelta(text=p, t=float(i)) for i, p in enumerate(pieces)] + [Finish(reason="stop", t=9.0)])
    text = "".join(e.text for e in out if isinstance(e, TextDelta))
    assert SECRET[:8] not in text and "the token is " in text and text.endswith(" ok")
    assert isinstance(out[-1], Finish)


def test_held_back_text_keeps_the_time_its_first_character_came():
    guard = RuntimeSecretsGuard((SECRET,))
    out = _run(guard, [TextDelta(text="y", t=1.0), TextDelta(text="es, done", t=2.0),   # "y" may start the secret
                       Finish(reason="stop", t=3.0)])
    assert (out[0].text, out[0].t) == ("yes, don", 1.0)
    assert "".join(e.text for e in out if isinstance(e, TextDelta)) == "yes, done"


def test_server_fields_lose_the_secret():
    guard = RuntimeSecretsGuard((SECRET,))
    out = _run(guard, [ServedBy(model=f"m-{SECRET}"), ToolCall(id=SECRET, name="f", arguments={"k": SECRET}),
                       Finish(reason=f"STOP {SECRET}", t=1.0)])
    assert all(SECRET[:8] not in repr(e.model_dump()) for e in out)


def test_no_secret_long_enough_passes_events_through():
    guard = RuntimeSecretsGuard(("short", ""))
    ev = TextDelta(text="short", t=1.0)
    assert guard.events(ev) == [ev]
