"""`lineup diff RUN_A RUN_B [--json]`: two recorded runs compared case by
case (`core.decide.compare`): pass rates with paired tests, answers that changed,
latency and cost with intervals, the cases that flipped. Reads the record
only; never calls a provider."""

from __future__ import annotations

import argparse

from lineup.commands.comparing import add_common, compare, show


def configure(p: argparse.ArgumentParser) -> None:
    p.add_argument("baseline", metavar="RUN_A", help="the baseline run's session id (or a unique prefix)")
    p.add_argument("candidate", metavar="RUN_B", help="the candidate run's session id (or a unique prefix)")
    add_common(p)


def run(args: argparse.Namespace) -> int:
    report = compare(args, args.baseline, args.candidate)
    show(report, args.json)
    return 0
