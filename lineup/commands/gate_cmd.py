"""`lineup gate --baseline RUN_A --candidate RUN_B [--alpha 0.05]
[--max-p95-regression PCT]`: `lineup diff` as a CI check. Exit 0 when
nothing regressed significantly, 3 when something did (each printed), 2 on
bad usage; `--json` prints the same stable shape as `lineup diff --json`."""

from __future__ import annotations

import argparse


def configure(p: argparse.ArgumentParser) -> None:
    from lineup.commands.comparing import add_common

    p.add_argument("--baseline", required=True, metavar="RUN_A", help="the baseline run's session id")
    p.add_argument("--candidate", required=True, metavar="RUN_B", help="the candidate run's session id")
    add_common(p)


def run(args: argparse.Namespace) -> int:
    import sys

    from core.ground.errors import EXIT_REGRESSED
    from core.ground.text import one_line
    from lineup.commands.comparing import compare, show

    report = compare(args, args.baseline, args.candidate)
    show(report, args.json)
    if report.regressions:
        print(f"lineup gate: {len(report.regressions)} regression{'s' if len(report.regressions) != 1 else ''}:",
              file=sys.stderr)
        for line in report.regressions:
            print("  " + one_line(line), file=sys.stderr)
        return EXIT_REGRESSED
    print(f"lineup gate: no significant regression ({report.tests} paired tests, Holm-adjusted, "
          f"alpha {report.alpha:g})", file=sys.stderr)
    return 0
