"""Write sample_sets/long_context.jsonl: long documents with planted facts,
asked about at the end (the documents are inline in each case's prompt).

The filler is generated from sentence templates with a fixed seed, so the
file is reproducible:  python sample_sets/make_long_context.py [OUT.jsonl]

Planted facts (and their distractors) are listed in PLANTED below; the
checks look for exactly these values, and the filler never produces them.
"""

from __future__ import annotations

import json
import random
import sys
from pathlib import Path

CATEGORY = "long_context"

WEATHER = [
    "Dry and overcast all day.", "Light rain until mid-morning, then dry.", "Cold start; frost on the scaffold boards until nine.",
    "Sunny and still.", "Strong wind in the afternoon; the crane stood down for two hours.", "Heavy showers after lunch.",
    "Mild and grey.", "Fog in the morning, clear by eleven.", "Warm and humid.", "Drizzle on and off.",
]
CREWS = [
    "the electricians", "the plasterers", "the joiners", "the roofing crew", "the plumbers", "the decorators",
    "the flooring team", "the glaziers", "the ground workers", "the ventilation fitters",
]
AREAS = [
    "the children's reading room", "the main stair", "the first-floor study area", "the archive basement",
    "the east wing corridor", "the staff kitchen", "the reception desk area", "the lecture room",
    "the accessible toilets", "the roof terrace", "the local history room", "the west entrance lobby",
]
TASKS = [
    "continued first-fix wiring in {area}", "finished boarding the ceiling in {area}", "set out the new partitions in {area}",
    "stripped the old skirting in {area}", "patched the damaged plaster in {area}", "installed temporary lighting in {area}",
    "sealed the floor slab in {area}", "hung the fire doors in {area}", "started the second coat of paint in {area}",
    "pressure-tested the heating loop in {area}", "fitted window boards in {area}", "laid underlay in {area}",
]
DELIVERIES = [
    "A delivery of plasterboard arrived in the morning and was stacked in the yard under covers.",
    "The timber order arrived short by a few lengths; the supplier promised the rest for next week.",
    "Paint and sundries were delivered and checked against the order.",
    "The skip was swapped for an empty one.",
    "Two pallets of floor tiles were delivered and moved inside to acclimatise.",
    "Cable drums were delivered and signed for by the electricians' foreman.",
    "No deliveries today.", "No deliveries today.",
]
NOTES = [
    "The architect visited briefly and had no comments.", "A toolbox talk was held on working at height.",
    "Housekeeping was poor in the afternoon; the site was tidied before close.",
    "The building control officer inspected the fire-stopping and signed it off.",
    "The client's representative asked for photographs of the roof repairs, which were sent the same day.",
    "A neighbour complained about the early start; the gate now opens at 08:00.",
    "The dust extraction unit was serviced.", "The welfare cabin heater was repaired.",
    "Progress photographs were taken for the monthly report.", "Nothing else to report.",
]

# day -> sentence: facts a question asks about, and distractors that look like them.
PLANTED = {
    9: "The keypad on the east storage room failed this morning; the locksmith replaced it and the new door code for the east storage room is 4719.",
    23: "The lighting budget was confirmed at 12,000 euros, separate from the furniture budget.",
    31: "The client approved a furniture budget of 42,000 euros for the whole building.",
    81: "Ruth Okafor, the site manager since the start, handed over to Pieter Jansen today; Pieter runs the site from now on and Ruth moves to the hospital project.",
    96: "The west storage room was fitted with a new padlock; its combination is 2286.",
    118: "After the value-engineering review the furniture budget was revised down to 38,500 euros; the client confirmed this figure in writing.",
}


def site_diary(days: int = 130, seed: int = 7) -> str:
    rng = random.Random(seed)
    lines = ["HARBOUR STREET LIBRARY RENOVATION: SITE DIARY"]
    for day in range(1, days + 1):
        parts = [rng.choice(WEATHER)]
        for _ in range(2):
            crew = rng.choice(CREWS)
            parts.append(f"{crew[0].upper()}{crew[1:]} {rng.choice(TASKS).format(area=rng.choice(AREAS))}.")
        parts.append(f"{rng.randint(6, 19)} people on site.")
        parts.append(rng.choice(DELIVERIES))
        if day in PLANTED:
            parts.insert(rng.randint(1, len(parts)), PLANTED[day])
        parts.append(rng.choice(NOTES))
        lines.append(f"Day {day}. " + " ".join(parts))
    return "\n\n".join(lines)


PORTS = ["Hamburg", "Antwerp", "Felixstowe", "Le Havre", "Gdansk", "Bilbao", "Gothenburg", "Genoa"]
CARGO = ["machine parts", "flat-pack furniture", "bottled water", "paper rolls", "bicycle frames", "ceramic tiles",
         "garden tools", "textiles", "canned tomatoes", "car tyres"]
VESSELS = ["MV Solent Trader", "MV Nordic Wren", "MV Aurora Quay", "MV Castle Point", "MV Baltic Heron", "MV Iberia Star"]
OPS_NOTES = [
    "Customs clearance was completed without queries.", "Two containers were re-weighed at the terminal.",
    "The haulier changed the collection slot to the afternoon.", "Paperwork for the consignee was sent in advance.",
    "The booking was split across two sailings.", "A seal number mismatch was corrected before loading.",
    "Terminal congestion added a few hours, within the normal window.", "Everything ran to schedule.",
]
OPS_PLANTED = {
    5: "The Rotterdam shipment of solar inverters was delayed by four days because of a strike at the container terminal.",
    12: "The Hamburg shipment was delayed by one day after a crane fault.",
    19: "The Rotterdam shipment was delayed again, this time by two days, waiting for a customs inspection.",
    27: "The refrigerated containers of cut flowers sailed on the MV Kestrel Bay, the first time we used that vessel.",
    33: "For the third time this year the Rotterdam shipment was delayed, by six days, when the feeder vessel was rerouted.",
    41: "The Hamburg shipment was delayed by three days in fog.",
}


def operations_log(weeks: int = 48, seed: int = 11) -> str:
    rng = random.Random(seed)
    lines = ["MERIDIAN FREIGHT: WEEKLY OPERATIONS LOG, NORTH SEA DESK"]
    for week in range(1, weeks + 1):
        entries = []
        for port in rng.sample(PORTS, 3):
            entries.append(f"The {port} shipment of {rng.choice(CARGO)} left on time on the {rng.choice(VESSELS)}.")
        entries.append("The Rotterdam shipment " + ("left as planned." if week not in (5, 19, 33) else "is noted below."))
        entries.append(rng.choice(OPS_NOTES))
        if week in OPS_PLANTED:
            entries.insert(rng.randint(1, len(entries)), OPS_PLANTED[week])
        entries.append(f"Containers handled this week: {rng.randint(40, 95)}.")
        lines.append(f"Week {week}. " + " ".join(entries))
    return "\n\n".join(lines)


NOT_STATED = (r"not (mentioned|stated|specified|included|provided|recorded|say|said)|n't (mention|say|specify|state|record)"
              r"|does not (mention|say|specify|state|record)|no (mention|information|record|catering|caterer)|nothing (about|on)")


def cases() -> list[dict]:
    diary = site_diary()
    ops = operations_log()
    intro = "Read the document below, then answer the question after it.\n\n"
    def ask(doc: str, question: str) -> str:
        return f"{intro}<document>\n{doc}\n</document>\n\nQuestion: {question}"
    rx = lambda p, flags="i", **kw: {"type": "regex", "pattern": p, "flags": flags, **kw}  # noqa: E731
    return [
        {"id": "lc-001", "category": CATEGORY, "prompt": ask(diary, "What is the current door code for the east storage room?"),
         "checks": [rx(r"\b4\W?7\W?1\W?9\b", name="east code"), {"type": "not_contains", "values": ["2286"], "name": "not the west code"}],
         "reference": "4719 (day 9). 2286 is the west storage room's padlock (day 96).", "tags": ["planted_fact", "distractor"]},
        {"id": "lc-002", "category": CATEGORY, "prompt": ask(diary, "What is the furniture budget for the building now? Give the figure in euros."),
         "checks": [rx(r"38[,. ]?500", name="revised figure")],
         "reference": "38,500 euros (revised on day 118 from 42,000 on day 31; the 12,000 is lighting).", "tags": ["planted_fact", "update"]},
        {"id": "lc-003", "category": CATEGORY, "prompt": ask(diary, "Who is running the site at the end of the diary?"),
         "follow_ups": ["On which day did that person take over, and who ran the site before?"],
         "checks": [rx(r"Pieter Jansen", "", turn=0), rx(r"\b81\b", "", name="day 81"), rx(r"Ruth Okafor", "", name="predecessor")],
         "reference": "Pieter Jansen, since day 81, taking over from Ruth Okafor.", "tags": ["planted_fact", "multi_turn"]},
        {"id": "lc-004", "category": CATEGORY, "prompt": ask(diary, "Which catering company provided lunch at the library's opening ceremony?"),
         "checks": [rx(NOT_STATED, name="says the diary does not say"), {"type": "max_words", "limit": 120}],
         "reference": "Not in the document (there is no caterer and no opening ceremony): the answer should say so, not invent one.",
         "tags": ["absent_fact", "hallucination"]},
        {"id": "lc-005", "category": CATEGORY, "prompt": ask(ops, "How many times was the Rotterdam shipment delayed during the year, and in which weeks? " "Finish with a line 'Answer: <count>; weeks <list>'."),
         "checks": [rx(r"Answer:\s*\**\s*(3|three)\b", name="count"), rx(r"Answer:[^\n]*\b5\b[^\n]*\b19\b[^\n]*\b33\b", "", name="weeks")],
         "reference": "3 times: weeks 5, 19 and 33 (the Hamburg delays in weeks 12 and 41 are distractors).", "tags": ["aggregation", "distractor"]},
        {"id": "lc-006", "category": CATEGORY, "prompt": ask(ops, "Which vessel carried the refrigerated containers of cut flowers?"),
         "checks": [rx(r"Kestrel Bay", "", name="vessel")],
         "reference": "MV Kestrel Bay, week 27.", "tags": ["planted_fact", "needle"]},
    ]


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    out = Path(argv[0]) if argv else Path(__file__).resolve().parent / "long_context.jsonl"
    with out.open("w", encoding="utf-8") as f:
        for case in cases():
            f.write(json.dumps(case, ensure_ascii=False) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
