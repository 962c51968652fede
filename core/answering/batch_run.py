"""`lineup run --batch`: a run through the providers' batch APIs
(`providers.batch`) instead of one stream per request.

The run is the same session a streamed run makes (`core.answering.runner.Runner`
opens or resumes it, claims its units, runs the checks); only the way the
answers come differs. Requests go in rounds: the opening turn of every case,
repeat and model, then each follow-up once the answer before it is in (a
conversation's next message needs its previous answer). A round is one batch
per model. Each batch is recorded (`store.batches`) before it is submitted
and marked with the provider's id as soon as the provider returns it; the
runner then polls it (progress through `on_batch`), downloads its results and
records every answer as a streamed run would, marked `origin = "batch"`,
without a time to first token or a duration (a batch's turnaround says
nothing about the model's speed), its cost at the batch price.

Killed at any point, the same command resumes: batches already submitted
are polled and collected, never submitted again; a batch recorded but never
acknowledged is looked up by its tag where the API allows (OpenAI's
`metadata`); Anthropic's cannot be, so one killed in the instant between the
provider creating it and lineup recording its id is submitted again. A
request that failed in its batch (an error, an expired batch) is recorded as
failed and retried by the next run of the command, like a streamed one.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Any

import anyio

from core.answering.cache import cached_answer, request_key
from core.answering.identity import prompt_texts, tag_self_identification
from core.answering.judge_directed import tag_judge_directed
from core.answering.runner import Runner, _check_keys, _latest_outputs, _new_output, case_turn_texts, sent_system
from core.answering.recording import output_from_result, server_fields
from core.answering.sessions import Contestant
from core.ground.text import SERVER_MESSAGE_LIMIT, server_text
from core.answering.tools import build_trace, scrubbed_trace
from providers.batch import BATCH_PRICE_FACTOR, BatchAPIError, BatchClient, BatchStatus, batch_client
from providers.events import ChatRequest, Message, StreamResult
from providers.secrets import scrubber_for
from store.batches import BatchItem, BatchJob, collect, create_job, jobs, update_job
from store.ids import new_ulid
from store.records import OutputRecord, SessionRecord, TurnRecord
from store.runs import find_cached

#: Seconds between polls of a batch still running (`--poll`).
DEFAULT_POLL_S = 30.0
#: Poll failures worth another poll (the batch goes on at the provider), and how many in a row stop the run.
_TRANSIENT = frozenset({"server", "overloaded", "rate_limited", "connection", "timeout"})
MAX_POLL_FAILURES = 10
#: Answers that end a batch for good: its requests are recorded as failed.
_REFUSED = frozenset({"auth", "not_found", "bad_request", "config"})


@dataclass
class _Unit:
    case: Any
    repeat: int
    contestant: Contestant
    failed: bool = False        # a request of it failed in this run: not sent again until the next run


class BatchRunner(Runner):
    """A `Runner` whose answers come through batch APIs (see the module doc)."""

    def __init__(self, *args: Any, poll_s: float = DEFAULT_POLL_S,
                 on_batch: Callable[[str], None] | None = None,
                 client_options: dict[str, Any] | None = None, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        if poll_s <= 0:
            raise ValueError("--poll must be more than 0 seconds")
        self.poll_s = poll_s
        self.on_batch = on_batch
        self.client_options = client_options or {}
        self._clients: dict[str, BatchClient] = {}
        self._created: set[str] = set()                     # jobs this process recorded
        self._failed_here: set[str] = set()                 # outputs that failed in this run
        self._requests: dict[tuple[str, str], tuple[ChatRequest, _Unit]] = {}   # (turn, alias) -> request

    async def run(self):
        session, work = await self._plan()
        try:
            await self._batches(session, work)
        except _Stop as stop:
            assert self.progress is not None
            self.progress.stopped = str(stop)
        finally:
            with anyio.CancelScope(shield=True):
                for client in self._clients.values():
                    await client.aclose()
                await self._release(session.id)
        assert self.progress is not None
        return self.progress

    def _say(self, line: str) -> None:
        if self.on_batch is not None:
            self.on_batch(line)

    def _scrub(self) -> Callable[[str], str] | None:
        """Scrubs every secret of the session (each model's key and secret header
        values) from a server's text, as a streamed run's answers are."""
        keys = tuple(sorted({k for c in self._contestants for k in c.config.secrets()}))
        return scrubber_for(keys).scrub if keys else None

    def _server_message(self, text: str) -> str:
        """A message holding a server's text, as it may be stored and printed (`core.ground.text.server_text`)."""
        return server_text(text, self._scrub(), SERVER_MESSAGE_LIMIT)

    def _status(self, status: BatchStatus) -> BatchStatus:
        """A polled status with every field the server chose made what
        `core.ground.text.server_text` allows: its status word, its error, and its
        request counts (a name to a whole number; anything else left out)."""
        scrub = self._scrub()
        counts = {server_text(k, scrub): v for k, v in list(status.counts.items())[:32]
                  if isinstance(v, int) and not isinstance(v, bool) and -2**63 <= v < 2**63}
        return replace(status, remote_status=server_text(status.remote_status, scrub), counts=counts,
                       error=None if status.error is None else server_text(status.error, scrub, SERVER_MESSAGE_LIMIT))

    def _client(self, c: Contestant) -> BatchClient:
        if c.alias not in self._clients:
            self._clients[c.alias] = batch_client(c.config, **self.client_options)
        return self._clients[c.alias]

    # ----- the rounds -----------------------------------------------------
    async def _batches(self, session: SessionRecord, work: list[tuple]) -> None:
        assert self.progress is not None
        units: list[_Unit] = []
        for case, r, c in work:
            key = _unit_key(case.id, r, c.alias)
            holder = await self.store.call(lambda st: st.claim_unit(session.id, key, self.owner))  # noqa: B023  (awaited here)
            tally = self.progress.tallies[c.alias]
            if holder == "done":
                tally.done += 1
                tally.skipped += 1
            elif holder != "mine":
                tally.elsewhere += 1
                self.progress.others.add(holder)
            else:
                units.append(_Unit(case, r, c))
        self._emit()
        by_alias = {c.alias: c for c in self._contestants}
        ours = {(u.case.id, u.repeat, u.contestant.alias) for u in units}
        while True:
            open_jobs = await self.store.call(lambda s: jobs(s, session.id))
            # a batch whose conversations another live process holds is that process's to finish
            mine = [j for j in open_jobs if j.contestant in by_alias and all(
                (t.case_id, t.repeat_index, i.contestant) in ours
                for i in j.items if (t := self._turn_by_id(i.turn_id)) is not None)]
            if mine:
                stops: list[str] = []
                async with anyio.create_task_group() as tg:
                    for job in mine:
                        tg.start_soon(self._finish_or_stop, job, by_alias[job.contestant], stops)
                if stops:   # the others were finished first: what could be collected is
                    raise _Stop(stops[0])
                continue
            pending = await self._pending(units)
            if not pending:
                break
            for alias, items in pending.items():
                if not items:
                    continue   # every request of this round came from the cache
                c = by_alias[alias]
                job = BatchJob(session_id=session.id, contestant=alias, provider=c.config.provider,
                               base_url=self._client(c).base_url, round=min(k for k, _ in items),
                               items=[item for _, item in items])
                await self.store.call(lambda s: create_job(s, job))  # noqa: B023  (awaited here)
                self._created.add(job.id)
                self._say(f"batch {job.id} for {alias}: {len(job.items)} requests recorded, submitting")
        for u in units:
            await self._close_unit(u)

    async def _conversation_state(self, u: _Unit) -> tuple[list[Message], list[OutputRecord], int | None,
                                                           OutputRecord | None, TurnRecord | None]:
        """(history so far, complete answers, the next turn to ask or None, its
        previous attempt, its turn) for one unit, read fresh from the store."""
        assert self.progress is not None
        sid = self.progress.session_id
        rows = await self.store.call(lambda st: st.run_unit(sid, u.case.id, u.repeat, u.contestant.alias))
        for t in rows[0]:
            self._turns.setdefault((u.case.id, u.repeat, t.follow_up_index), t)
        recorded = _latest_outputs(rows[1])
        history: list[Message] = []
        answers: list[OutputRecord] = []
        for k, text in enumerate(case_turn_texts(u.case)):
            if k == 0:
                history.extend(u.case.opening_messages(self.sample_set.images_for(u.case),
                                                       template=u.contestant.config.template))
            else:
                history.append(Message(role="user", content=text))
            turn = await self._turn(u.case, u.repeat, k, text, self.sample_set.images_for(u.case) if k == 0 else ())
            prev = recorded.get((turn.id, u.contestant.alias))
            if prev is not None and prev.status == "complete":
                history.append(Message(role="assistant", content=prev.text))
                answers.append(prev)
                continue
            return history, answers, k, prev, turn
        return history, answers, None, None, None

    def _request(self, u: _Unit, history: list[Message]) -> ChatRequest:
        return ChatRequest(model=u.contestant.config.model, messages=tuple(history),
                           system=sent_system(u.contestant.config, u.case, self.system),
                           params=u.contestant.params.merged(u.case.params))

    async def _pending(self, units: list[_Unit]) -> dict[str, list[tuple[int, BatchItem]]]:
        """The next request of every unfinished unit, by model."""
        out: dict[str, list[tuple[int, BatchItem]]] = {}
        for u in units:
            if u.failed:
                continue
            history, _answers, k, prev, turn = await self._conversation_state(u)
            if k is None or turn is None:
                continue
            if prev is not None and prev.origin == "batch" and prev.id in self._failed_here:
                u.failed = True
                continue
            request = self._request(u, history)
            key = request_key(u.contestant.config, request, u.repeat)
            base = _new_output(turn, u.contestant, attempt=(prev.attempt + 1) if prev else 1, case=u.case).model_copy(
                update={"request_key": key})
            hit = await self.store.call(lambda st: find_cached(st, key)) if self.cache else None  # noqa: B023  (awaited here)
            if hit is not None:   # answered from the record: no request (the next round asks what follows)
                cached = cached_answer(hit, base)
                await self.store.call(lambda st: st.finish_output(cached))  # noqa: B023  (awaited here)
                assert self.progress is not None
                self.progress.tallies[u.contestant.alias].cached += 1
                out.setdefault(u.contestant.alias, [])
                continue
            out.setdefault(u.contestant.alias, []).append((k, BatchItem(
                custom_id=new_ulid(), turn_id=turn.id, contestant=u.contestant.alias,
                attempt=base.attempt, request_key=key)))
            self._requests[(turn.id, u.contestant.alias)] = (request, u)
        return out

    # ----- one batch ------------------------------------------------------
    async def _finish_or_stop(self, job: BatchJob, c: Contestant, stops: list[str]) -> None:
        """`_finish_job`, a failure that stops the run kept in `stops` (not
        raised into the task group, where it would cancel the other batches)."""
        try:
            await self._finish_job(job, c)
        except _Stop as stop:
            stops.append(str(stop))
        except BatchAPIError as exc:
            stops.append(f"batch {job.id} for {c.alias}: {self._server_message(exc.message)} (run the same command "
                         "again to resume it)")

    async def _finish_job(self, job: BatchJob, c: Contestant) -> None:
        """Submit (if not yet), poll to its end, collect: whatever state it was left in."""
        client = self._client(c)
        try:
            if job.state == "prepared":
                job = await self._submit(job, c, client)
            status = await self._poll(job, client)
            if status.state == "failed":
                await self._fail_items(job, c, status.error or "the batch failed")
                await self.store.call(lambda s: update_job(s, job.id, state="failed", error=status.error,
                                                           ended=time.time()))
                return
            results = await client.results(job.remote_id or "", status)
        except BatchAPIError as exc:
            message = self._server_message(exc.message)
            self._say(f"batch {job.id} for {c.alias}: {message}")
            never_sent = job.state == "prepared" and not exc.maybe_sent
            if never_sent or exc.kind.value in _REFUSED:
                # nothing is waiting at the provider (or it refused): the requests failed, the next run retries
                await self._fail_items(job, c, message)
                await self.store.call(lambda s: update_job(s, job.id, state="failed", error=message,
                                                           ended=time.time()))
                return
            raise _Stop(f"batch {job.id} for {c.alias}: {message} (run the same command again to "
                        "resume it)") from None
        by_id = {r.custom_id: r for r in results.results}
        unreadable = "; ".join(results.unreadable[:5]) + ("; ..." if len(results.unreadable) > 5 else "")
        if unreadable:
            self._say(f"batch {job.id} for {c.alias}: lines that could not be read: {unreadable}")
        for item in job.items:
            if item.output_id is not None:
                continue
            result = by_id.get(item.custom_id)
            events = result.events if result is not None else None
            await self._record(job, item, c, events, status, unreadable)
        await self.store.call(lambda s: update_job(s, job.id, state="collected", ended=time.time()))
        self._say(f"batch {job.id} for {c.alias}: {len(by_id)} results collected")

    async def _submit(self, job: BatchJob, c: Contestant, client: BatchClient) -> BatchJob:
        requests = await self._job_requests(job, c)
        # recorded by a run that stopped before it was acknowledged: it may exist already
        remote = None if job.id in self._created else await client.find(job.id)
        file_id = job.input_file_id
        if remote is None:
            if file_id is None:
                file_id = await client.upload(requests)
                if file_id is not None:
                    await self.store.call(lambda s: update_job(s, job.id, input_file_id=file_id))
            remote, file_id = await client.submit(requests, job.id, input_file_id=file_id)
        now = time.time()
        await self.store.call(lambda s: update_job(s, job.id, state="submitted", remote_id=remote,
                                                   input_file_id=file_id, submitted=now))
        self._say(f"batch {job.id} for {c.alias}: submitted as {remote} ({len(requests)} requests)")
        return job.model_copy(update={"state": "submitted", "remote_id": remote, "input_file_id": file_id,
                                      "submitted": now})

    async def _job_requests(self, job: BatchJob, c: Contestant) -> list[tuple[str, ChatRequest]]:
        """The requests of a recorded job, rebuilt from the record (a resumed run has only that)."""
        out = []
        for item in job.items:
            known = self._requests.get((item.turn_id, item.contestant))
            if known is None:
                u = self._unit_of(item.turn_id, c)
                history, _answers, _k, _prev, _turn = await self._conversation_state(u)
                known = (self._request(u, history), u)
            out.append((item.custom_id, known[0]))
        return out

    def _turn_by_id(self, turn_id: str) -> TurnRecord | None:
        return next((t for t in self._turns.values() if t.id == turn_id), None)

    def _unit_of(self, turn_id: str, c: Contestant) -> _Unit:
        t = self._turn_by_id(turn_id)
        case = next((x for x in self.sample_set.cases if t is not None and x.id == t.case_id), None)
        if t is None or case is None:
            raise _Stop(f"a recorded batch names turn {turn_id}, which this run's set does not have")
        return _Unit(case, t.repeat_index, c)

    async def _poll(self, job: BatchJob, client: BatchClient) -> BatchStatus:
        last = None
        failures = 0
        while True:
            try:
                status = self._status(await client.poll(job.remote_id or ""))
            except BatchAPIError as exc:
                failures += 1
                if exc.kind.value not in _TRANSIENT or failures >= MAX_POLL_FAILURES:
                    raise
                self._say(f"batch {job.remote_id} for {job.contestant}: polling failed "
                          f"({self._server_message(exc.message)}); "
                          f"trying again in {self.poll_s:g} s")
                await anyio.sleep(self.poll_s)
                continue
            failures = 0
            line = (f"batch {job.remote_id} for {job.contestant}: {status.remote_status}, "
                    f"{status.done}/{status.total or len(job.items)} done")
            if line != last:
                self._say(line)
                last = line
                remote, counts = status.remote_status, status.counts
                await self.store.call(lambda s: update_job(s, job.id, remote_status=remote, counts=counts))  # noqa: B023  (awaited here)
            if status.state != "running":
                return status
            await anyio.sleep(self.poll_s)

    async def _fail_items(self, job: BatchJob, c: Contestant, message: str) -> None:
        from providers.events import ErrorKind, StreamError

        for item in job.items:
            if item.output_id is None:
                await self._record(job, item, c, [StreamError(kind=ErrorKind.bad_request, message=message,
                                                              t=time.perf_counter())], None)

    async def _record(self, job: BatchJob, item: BatchItem, c: Contestant, events: list | None,
                      status: BatchStatus | None, unreadable: str = "") -> None:
        """One result as an answer of the run (an item with no result: failed,
        saying so, and naming the results lines that could not be read)."""
        from providers.events import ErrorKind, StreamError

        assert self.progress is not None
        turn = self._turn_by_id(item.turn_id)
        if turn is None:
            return
        if events is None:
            state = status.remote_status if status is not None else "ended"
            events = [StreamError(kind=ErrorKind.timeout if state == "expired" else ErrorKind.bad_response,
                                  message=f"the batch ({state}) returned no result for this request"
                                  + (f" (lines that could not be read: {unreadable})" if unreadable else ""),
                                  t=time.perf_counter())]
        scrub = self._scrub()   # every secret of the session, as a streamed answer
        result = StreamResult()
        for ev in events:
            result.add(server_fields(ev, scrub))
        case = next((x for x in self.sample_set.cases if x.id == turn.case_id), None)
        base = _new_output(turn, c, item.attempt, case=case).model_copy(update={"request_key": item.request_key,
                                                                     "origin": "batch"})
        final = output_from_result(base, result, c.config)
        if result.multi_step:
            final = final.model_copy(update={"trace": build_trace(result) if scrub is None
                                             else scrubbed_trace(build_trace(result), scrub)})
        if scrub is not None:
            final = final.model_copy(update=dict(
                text=scrub(final.text), reasoning=scrub(final.reasoning) if final.reasoning else None))
        final = final.model_copy(update=dict(
            sent_at=job.submitted, ttft_ms=None, duration_ms=None, chunk_ms=[], chunk_chars=[],
            cost=final.cost * BATCH_PRICE_FACTOR if final.cost is not None else None))
        await self.store.call(lambda s: collect(s, job.id, item.custom_id, final))
        tally = self.progress.tallies[c.alias]
        if final.status != "complete":
            self._failed_here.add(final.id)
            tally.errors[final.error_kind or final.status] += 1
        else:
            if final.cost is not None:
                tally.cost += final.cost
                tally.cost_known = True
            if case is not None:
                users = [Message(role="user", content=t) for t in case_turn_texts(case)[:turn.follow_up_index + 1]]
                if turn.follow_up_index == 0 and c.config.template is not None:
                    users[0] = Message(role="user", content=case.prompt_for(c.config.template))
                prompts = prompt_texts(users, sent_system(c.config, case, self.system))
                await tag_self_identification(self.store, final, c.config, prompts)
                await tag_judge_directed(self.store, final, prompts)

    async def _close_unit(self, u: _Unit) -> None:
        """Checks on a unit whose answers are all in; its claim released as done or not."""
        assert self.progress is not None
        tally = self.progress.tallies[u.contestant.alias]
        _history, answers, k, _prev, _turn = await self._conversation_state(u)
        ok = k is None
        sid, key = self.progress.session_id, _unit_key(u.case.id, u.repeat, u.contestant.alias)
        if ok:
            rows = await self.store.call(lambda st: st.run_unit(sid, u.case.id, u.repeat, u.contestant.alias))
            ok = await self._checks(u.case, answers, _check_keys(rows[2]), tally)
        with anyio.CancelScope(shield=True):
            done = ok and not self._defers(u.case)
            await self.store.call(lambda st: st.finish_claim(sid, key, self.owner, done))
        if ok:
            tally.done += 1
        else:
            tally.failed += 1
        self._emit()


class _Stop(Exception):
    """A batch call failed in a way a later run can resume from: the run stops, the record stays whole."""


def _unit_key(case_id: str, repeat: int, alias: str) -> str:
    import json

    return json.dumps([case_id, repeat, alias])   # the same key as the streamed runner's claims


