"""The raters' web page (`lineup rate`): a Starlette app over the core's
vote queue. Each rater's link (`/r/TOKEN`) opens a static page whose script
asks for the case on screen and sends the rater's gestures; each gesture is
a `core.answering.vote_queue.VoteQueue` call on that rater's own queue (limited to
their assignment, `core.answering.raters`), under a per-rater lock, and the answer is
`core.answering.rater_view.rater_view` of the queue's new state: nothing about a case
is built here. The owner's link (`/o/TOKEN`) shows progress.

Safety: a link is its token (looked up by hash); no link, no page (404,
the same for every unknown path). A vote is answered only once
`AsyncStore.add_vote` has committed it (synchronous=FULL). A gesture names
the case it was made on (an opaque handle made afresh for each case shown):
one made on a case no longer on screen (a second tab, a double click) is
refused, so a rater has one current vote per unit. Writes need a JSON body
(a form on another site cannot send one) and every response carries a
strict Content-Security-Policy and no-referrer."""

from __future__ import annotations

import asyncio
import secrets
from dataclasses import dataclass, field
from importlib import resources
from typing import TYPE_CHECKING, Any, Literal

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import HTMLResponse, JSONResponse, Response
from starlette.routing import Route

from core.answering.rater_view import rater_view
from core.answering.raters import Team, assigned_units, link_holder
from core.report.team import team_progress
from core.ground.text import html_text
from core.answering.vote_queue import VoteQueue
from core.stats.votes import VoteError, VoteNeedsConfirmation

if TYPE_CHECKING:
    from core.report.team import TeamProgress
    from core.answering.sessions import AsyncStore   # the store as the core hands it over

RevealChoice = Literal["after-vote", "never"]

CSP = ("default-src 'none'; script-src 'self'; style-src 'self'; connect-src 'self'; img-src 'self'; "
       "base-uri 'none'; form-action 'none'; frame-ancestors 'none'")
HEADERS = {"Content-Security-Policy": CSP, "X-Content-Type-Options": "nosniff", "Referrer-Policy": "no-referrer",
           "Cache-Control": "no-store", "X-Frame-Options": "DENY"}
MAX_BODY = 64 * 1024
MAX_NOTE = 2000


def _static(name: str) -> bytes:
    return resources.files("web").joinpath("static", name).read_bytes()


@dataclass
class Options:
    reveal: RevealChoice = "never"
    adaptive: bool = False
    confidence: float = 0.95
    gold_rate: float = 0.0
    case_seed: str | None = None        # a vote package's per-case shuffle seed
    tags: tuple[str, ...] = ()


@dataclass
class Desk:
    """One rater's queue in this server, and the handle of the case on screen."""

    rater: str
    lock: asyncio.Lock = field(default_factory=asyncio.Lock)
    queue: VoteQueue | None = None
    handle: str = ""


class Refused(Exception):
    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status


class RateApp:
    """The app's state: the store, the team, each rater's desk."""

    def __init__(self, store: AsyncStore, team: Team, options: Options) -> None:
        self.store = store
        self.team = team
        self.options = options
        self.desks = {r: Desk(r) for r in team.raters}
        self.page = _static("rate.html")
        self.files = {"rate.js": (_static("rate.js"), "text/javascript; charset=utf-8"),
                      "rate.css": (_static("rate.css"), "text/css; charset=utf-8")}
        self.app = Starlette(routes=[
            Route("/r/{token}", self.rater_page),
            Route("/r/{token}/state", self.state),
            Route("/r/{token}/{action}", self.act, methods=["POST"]),
            Route("/o/{token}", self.owner_page),
            Route("/o/{token}/progress.json", self.owner_json),
            Route("/static/{name}", self.static),
        ])
        self.app.add_exception_handler(404, self.not_found)
        self.app.add_exception_handler(405, self.not_found)

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        async def with_headers(message: Any) -> None:
            if message["type"] == "http.response.start":
                headers = [(k, v) for k, v in message.get("headers", [])
                           if k.lower().decode("latin-1") not in {h.lower() for h in HEADERS}]
                headers += [(k.lower().encode("latin-1"), v.encode("latin-1")) for k, v in HEADERS.items()]
                message = {**message, "headers": headers}
            await send(message)

        await self.app(scope, receive, with_headers)

    # ----- links ------------------------------------------------------------
    async def _holder(self, request: Request, role: str) -> str:
        token = request.path_params["token"]
        found = await self.store.call(lambda s: link_holder(s, token))
        if found is None or found[0] != self.team.id or found[2] != role or (
                role == "rater" and found[1] not in self.desks):
            raise Refused(404, "No such link.")
        return found[1]

    async def not_found(self, request: Request, exc: Exception) -> Response:
        return HTMLResponse("<!doctype html><title>lineup</title><p>No such link.</p>", status_code=404)

    async def static(self, request: Request) -> Response:
        found = self.files.get(request.path_params["name"])
        if found is None:
            return await self.not_found(request, Exception())
        return Response(found[0], media_type=found[1])

    # ----- the rater's page ---------------------------------------------------
    async def rater_page(self, request: Request) -> Response:
        try:
            await self._holder(request, "rater")
        except Refused:
            return await self.not_found(request, Exception())
        return HTMLResponse(self.page)

    async def _desk(self, rater: str) -> Desk:
        """The rater's desk, its queue loaded (and the case on screen chosen)."""
        desk = self.desks[rater]
        if desk.queue is None:
            loaded = [await self.store.load_session(sid) for sid in self.team.sessions]
            from core.answering.raters import team_units

            units = team_units(loaded)
            mine = await self.store.call(lambda s: assigned_units(s, self.team, units, rater))
            o = self.options
            queue = VoteQueue(self.store, rater=rater, session_id=self.team.sessions,
                              reveal="each" if o.reveal == "after-vote" else "end", adaptive=o.adaptive,
                              confidence=o.confidence, gold_rate=o.gold_rate, case_seed=o.case_seed, units=mine)
            await queue.load()
            desk.queue = queue
            self._advance(desk)
        return desk

    @staticmethod
    def _advance(desk: Desk) -> None:
        assert desk.queue is not None
        desk.queue.advance()
        desk.handle = secrets.token_urlsafe(12)

    def _view(self, desk: Desk, message: str | None = None, **extra: Any) -> dict[str, Any]:
        q = desk.queue
        assert q is not None
        progress = {"done": q.done + len(q.seen), "total": q.total}
        view = rater_view(q, handle=desk.handle, names=self.options.reveal == "after-vote", tags=self.options.tags,
                          note=None, progress=progress, message=message)
        view.update(extra)
        return view

    async def state(self, request: Request) -> Response:
        try:
            rater = await self._holder(request, "rater")
        except Refused:
            return await self.not_found(request, Exception())
        desk = self.desks[rater]
        async with desk.lock:
            await self._desk(rater)
            return JSONResponse(self._view(desk))

    async def act(self, request: Request) -> Response:
        try:
            rater = await self._holder(request, "rater")
            body = await _json_body(request)
        except Refused as exc:
            if exc.status == 404:
                return await self.not_found(request, exc)
            return JSONResponse({"error": str(exc)}, status_code=exc.status)
        action = request.path_params["action"]
        handler = {"vote": self._vote, "next": self._next, "skip": self._skip, "undo": self._undo,
                   "tag": self._tag, "score": self._score}.get(action)
        if handler is None:
            return await self.not_found(request, Exception())
        desk = self.desks[rater]
        async with desk.lock:
            await self._desk(rater)
            if action != "undo" and body.get("handle") != desk.handle:
                return JSONResponse({"error": "This case is no longer on screen here (another tab?): reloaded.",
                                     "view": self._view(desk)}, status_code=409)
            try:
                return JSONResponse(await handler(desk, body))
            except Refused as exc:
                return JSONResponse({"error": str(exc), "view": self._view(desk)}, status_code=exc.status)

    async def _vote(self, desk: Desk, body: dict[str, Any]) -> dict[str, Any]:
        q = desk.queue
        assert q is not None
        if not q.waiting:
            raise Refused(409, "This case has its vote already.")
        choice, ranking, note = body.get("choice"), body.get("ranking"), body.get("note")
        if not isinstance(choice, str) or not (ranking is None or (isinstance(ranking, list) and
                                                                     all(isinstance(x, str) for x in ranking))):
            raise Refused(400, "A vote is a choice (a label, tie, both_bad or all_bad) and an optional ranking.")
        if note is not None and (not isinstance(note, str) or len(note) > MAX_NOTE):
            raise Refused(400, f"A note is text of at most {MAX_NOTE} characters.")
        try:
            await q.vote(choice, ranking, note=(note or "").strip() or None, confirm=body.get("confirm") is True)
        except VoteNeedsConfirmation as exc:
            return self._view(desk, f"Not saved yet: {exc}", confirm=True)
        except VoteError as exc:
            raise Refused(400, f"Vote not saved: {exc}") from None
        return self._view(desk, saved=True)

    async def _next(self, desk: Desk, body: dict[str, Any]) -> dict[str, Any]:
        assert desk.queue is not None
        if desk.queue.waiting:
            raise Refused(409, "This case waits for a vote (or skip it).")
        self._advance(desk)
        return self._view(desk)

    async def _skip(self, desk: Desk, body: dict[str, Any]) -> dict[str, Any]:
        assert desk.queue is not None
        if not desk.queue.waiting:
            raise Refused(409, "Only a case waiting for its vote can be skipped.")
        desk.queue.skip()
        self._advance(desk)
        return self._view(desk, "Skipped: it comes back at the end.")

    async def _undo(self, desk: Desk, body: dict[str, Any]) -> dict[str, Any]:
        q = desk.queue
        assert q is not None
        if not q.history:
            raise Refused(409, "No vote to undo.")
        await q.undo()
        self._advance(desk)
        return self._view(desk, "Undone: the vote is withdrawn; judge this case again or skip it.")

    async def _tag(self, desk: Desk, body: dict[str, Any]) -> dict[str, Any]:
        q = desk.queue
        assert q is not None
        item, label = q.current, body.get("label")
        tags, removed = body.get("tags") or [], body.get("removed") or []
        if item is None or label not in q.mapping:
            raise Refused(400, "Tag an answer on screen (a label).")
        if not (isinstance(tags, list) and isinstance(removed, list)
                and all(t in self.options.tags for t in [*tags, *removed])):
            raise Refused(400, "Tags are chosen from the list offered.")
        alias = q.mapping[label]
        outs = [o for t in item.targets if (o := item.outputs.get((t.id, alias))) is not None]
        mine = {t.tag for o in outs for t in item.tags.get(o.id, ()) if not t.auto and t.rater == q.rater}
        await q.tag(item, outs, tuple(t for t in dict.fromkeys(tags) if t not in mine),
                    removed=tuple(t for t in removed if t in mine))
        return self._view(desk, f"Tags of {label} saved.")

    async def _score(self, desk: Desk, body: dict[str, Any]) -> dict[str, Any]:
        """A 1-5 score of one answer on one of the session's dimensions, as
        in `lineup vote`: before or after the vote; a later one replaces it."""
        q = desk.queue
        assert q is not None
        label, dimension, value = body.get("label"), body.get("dimension"), body.get("value")
        if not isinstance(label, str) or not isinstance(dimension, str) or type(value) is not int:
            raise Refused(400, "A score is a label, a dimension and a whole number from 1 to 5.")
        try:
            await q.score(label, dimension, value)
        except ValueError as exc:
            raise Refused(400, f"Score not saved: {exc}") from None
        return self._view(desk, f"{label}: {dimension} {value} saved.")

    # ----- the owner's page ---------------------------------------------------
    async def progress(self) -> TeamProgress:
        team = self.team

        def read(s: Any) -> TeamProgress:
            return team_progress(s, team, [s.load_session(sid) for sid in team.sessions])

        return await self.store.read(read)

    async def owner_json(self, request: Request) -> Response:
        try:
            await self._holder(request, "owner")
        except Refused:
            return await self.not_found(request, Exception())
        p = await self.progress()
        return JSONResponse({"raters": [vars(r) for r in p.raters], "scored": p.scored,
                             "agreement": p.agreement.model_dump()})

    async def owner_page(self, request: Request) -> Response:
        try:
            await self._holder(request, "owner")
        except Refused:
            return await self.not_found(request, Exception())
        p = await self.progress()
        rows = "".join(f"<tr><td>{html_text(r.rater)}</td><td>{r.done}</td><td>{r.left}</td><td>{r.assigned}</td>"
                       + (f"<td>{r.scores}</td>" if p.scored else "") + "</tr>" for r in p.raters)
        lines = "".join(f"<p>{html_text(line)}</p>" for line in p.lines()[len(p.raters):])
        html = (f"<!doctype html><html lang=en><head><meta charset=utf-8><meta name=viewport "
                f"content='width=device-width,initial-scale=1'><meta http-equiv=refresh content=10>"
                f"<title>lineup: raters' progress</title><link rel=stylesheet href='/static/rate.css'></head>"
                f"<body class=owner><h1>Raters' progress</h1><table><thead><tr><th>rater</th><th>done</th>"
                f"<th>left</th><th>assigned</th>{'<th>scores</th>' if p.scored else ''}</tr></thead><tbody>{rows}</tbody>"
                f"</table>"
                f"<h2>Agreement</h2>{lines}<p class=hint>Refreshes every 10 s. `lineup report` gives the ratings."
                f"</p></body></html>")
        return HTMLResponse(html)


async def _json_body(request: Request) -> dict[str, Any]:
    import json

    if request.headers.get("content-type", "").split(";")[0].strip() != "application/json":
        raise Refused(415, "Send JSON.")
    declared = request.headers.get("content-length", "")
    if declared.isdigit() and int(declared) > MAX_BODY:
        raise Refused(413, "Too large.")
    raw = b""
    async for chunk in request.stream():       # bounded whatever the header said
        raw += chunk
        if len(raw) > MAX_BODY:
            raise Refused(413, "Too large.")
    if len(raw) > MAX_BODY:
        raise Refused(413, "Too large.")
    try:
        body = json.loads(raw)
    except ValueError:
        raise Refused(400, "Not JSON.") from None
    if not isinstance(body, dict):
        raise Refused(400, "Not a JSON object.")
    return body
