"""Inter-rater agreement (`core.report.agreement`): Krippendorff's alpha
against an example computed by hand, its bootstrap interval, pairwise alphas,
the warning for a rater who agrees with no one, and the report's renderers."""

from __future__ import annotations

import pytest

from core.report.agreement import MIN_SHARED_UNITS, agreement, krippendorff_alpha, summary_line
from core.report.html import render_html
from core.report.markdown import render_markdown
from core.report.model import Report, ReportFilters


def test_alpha_matches_a_hand_computed_example():
    # Coincidences, each unit's ordered pairs / (m - 1):
    #   u1 A,A,A -> AA 3;  u2 A,B -> AB 1, BA 1;  u3 B,B,B -> BB 3;  u4 A,B,B -> AB 1, BA 1, BB 1
    # o_AA 3, o_AB = o_BA = 2, o_BB 4; n_A 5, n_B 6, n 11
    # alpha = 1 - (n - 1) * sum_{c!=k} o_ck / sum_{c!=k} n_c n_k = 1 - 10 * 4 / 60 = 1/3
    units = [["A", "A", "A"], ["A", "B"], ["B", "B", "B"], ["A", "B", "B"], ["C"]]   # u5: one value, not pairable
    assert krippendorff_alpha(units) == pytest.approx(1 / 3)
    assert krippendorff_alpha([["A", "A"], ["B", "B"]]) == pytest.approx(1.0)
    # perfect disagreement on two values: o_AB = o_BA = 2, n_A = n_B = 2: 1 - 3 * 4 / 8 = -0.5
    assert krippendorff_alpha([["A", "B"], ["B", "A"]]) == pytest.approx(-0.5)
    assert krippendorff_alpha([["A", "A"], ["A", "A"]]) is None       # no variation: undefined
    assert krippendorff_alpha([["A"]]) is None


def test_agreement_from_votes_takes_each_raters_last_verdict_and_bootstraps():
    votes = [("u1", r, "A") for r in ("ann", "bo", "cy")] + [("u2", "ann", "A"), ("u2", "bo", "B")]
    votes += [("u3", r, "B") for r in ("ann", "bo", "cy")]
    votes += [("u4", "ann", "B"), ("u4", "ann", "A"), ("u4", "bo", "B"), ("u4", "cy", "B"), ("u5", "ann", "C")]
    a = agreement(votes, rounds=300, seed=1)
    assert a.alpha == pytest.approx(1 / 3)         # the same example: ann's last verdict on u4 is A
    assert a.units == 4 and a.values == 11 and a.raters == ["ann", "bo", "cy"]
    assert a.ci_low is not None and a.ci_high is not None and a.ci_low <= a.alpha <= a.ci_high and a.rounds == 300
    assert a.ci_low < a.ci_high
    assert agreement(votes, rounds=300, seed=1) == a            # seeded
    assert {tuple(p.raters): (p.units, p.alpha) for p in a.pairs} == {
        ("ann", "bo"): (4, None), ("ann", "cy"): (3, None), ("bo", "cy"): (3, None)}   # under MIN_SHARED_UNITS
    assert not a.warnings


def test_a_rater_who_agrees_with_no_one_is_warned_about():
    verdicts = ["A", "B", "A", "B", "tie", "A", "B", "A"]
    flip = {"A": "B", "B": "A", "tie": "A"}
    votes = []
    for i, v in enumerate(verdicts):
        votes += [(i, "ann", v), (i, "bo", v), (i, "cy", v), (i, "dee", flip[v])]
    a = agreement(votes, rounds=50)
    assert len(verdicts) >= MIN_SHARED_UNITS
    pairs = {tuple(p.raters): p.alpha for p in a.pairs}
    assert pairs[("ann", "bo")] == pytest.approx(1.0) and pairs[("ann", "dee")] < 0
    assert len(a.warnings) == 1 and "rater dee agrees with no other rater" in a.warnings[0]
    # two raters who disagree: nobody can say which one is off, so no warning
    assert not agreement([v for v in votes if v[1] in ("ann", "dee")], rounds=0).warnings


def test_every_renderer_shows_agreement():
    votes = [(i, r, "AB"[i % 2]) for i in range(6) for r in ("ann", "<b>bo</b>")]
    report = Report(generated_at=0, filters=ReportFilters(), rounds=10, seed=0,
                    agreement=agreement(votes, rounds=10))
    line = summary_line(report.agreement)
    assert "alpha (nominal) 1.00" in line and "6 prompts" in line
    md, html = render_markdown(report), render_html(report)
    assert "## Agreement between raters" in md and "ann & <b>bo</b>" not in md
    assert "Agreement between raters" in html and "&lt;b&gt;bo&lt;/b&gt;" in html and "<b>bo</b>" not in html
    from io import StringIO

    from rich.console import Console

    from core.report.terminal import print_report

    buf = StringIO()
    print_report(report, Console(file=buf, width=140))
    assert "Agreement between raters" in buf.getvalue() and "[b]" not in buf.getvalue()
    from tui.report_screen import report_widgets

    assert any("Krippendorff" in str(getattr(w, "content", getattr(w, "renderable", ""))) for w in report_widgets(report))
