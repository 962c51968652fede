"""The report's section on scores from outside lineup (`core.stats.public_scores`:
public leaderboards, online canary metrics), said the same way in the
terminal, Markdown and HTML: `public_tables` gives the titles, notes and
table rows as plain strings, each renderer escapes them its own way (the
model and metric names are imported text, untrusted)."""

from __future__ import annotations

from rich.console import Console
from rich.text import Text

from core.stats.public_scores import PublicScores
from core.report import decision_format as F
from core.ground.text import html_text, markdown_inline, one_line

Table = tuple[str, list[str], list[str], list[list[str]]]   # title, notes, header, rows


def _tau(tau: float | None, lo: float | None = None, hi: float | None = None) -> str:
    if tau is None:
        return "n/a (fewer than 2 models in common)"
    text = f"{tau:+.2f}"
    if lo is not None and hi is not None:
        text += f" (95% interval {lo:+.2f} .. {hi:+.2f}, from the bootstrap of the own ratings)"
    return text


def public_tables(ps: PublicScores) -> list[Table]:
    out: list[Table] = []
    for b in ps.leaderboards:
        name = " ".join(p for p in (b.source or "public scores", b.date) if p)
        notes = [f"Rank agreement with the own ratings (Kendall tau-b): {_tau(b.tau, b.tau_low, b.tau_high)}."]
        if b.biggest_changes:
            notes.append("Rank changes most: " + ", ".join(b.biggest_changes) + ".")
        if b.only_public:
            notes.append("Not rated here (no votes): " + ", ".join(b.only_public) + ".")
        rows = [[r.model, f"{r.score:g}", F.interval(r.ci_low, r.ci_high, 1), str(r.public_rank), str(r.own_rank),
                 f"{r.rank_change:+d}"] for r in b.models]
        out.append((f"Public leaderboard: {name}", notes,
                    ["model", "public score", "interval", "public rank", "own rank", "change"], rows))
    for m in ps.online:
        name = m.metric + (f" ({m.period})" if m.period else "")
        agree = ("n/a" if m.agrees is None else "yes" if m.agrees else "no")
        notes = [f"{'Higher' if m.higher_is_better else 'Lower'} is better. Online and offline orderings agree: "
                 f"{agree}; Kendall tau-b {_tau(m.tau)}."]
        rows = [[r.model, f"{r.value:g}", str(r.n), F.interval(r.ci_low, r.ci_high, 3),
                 "-" if r.offline_rank is None else str(r.offline_rank)] for r in m.models]
        out.append((f"Online metric: {name}", notes, ["model", "value", "n", "95% interval (Wilson)",
                                                      "offline rank"], rows))
    return out


def public_lines(ps: PublicScores | None) -> list[str]:
    """Markdown."""
    if ps is None:
        return []
    lines = ["## Public and online scores", ""]
    for title, notes, header, rows in public_tables(ps):
        lines += [f"### {markdown_inline(title)}", ""] + [markdown_inline(n) for n in notes] + [""]
        lines += ["| " + " | ".join(header) + " |", "|" + "|".join("---" for _ in header) + "|"]
        lines += ["| " + " | ".join(markdown_inline(c) for c in r) + " |" for r in rows] + [""]
    return lines


def public_html(ps: PublicScores | None) -> str:
    if ps is None:
        return ""
    parts = ["<h2>Public and online scores</h2>"]
    for title, notes, header, rows in public_tables(ps):
        parts.append(f"<h3>{html_text(title)}</h3>")
        parts += [f"<p class=small>{html_text(n)}</p>" for n in notes]
        parts.append("<table><thead><tr>" + "".join(f"<th>{html_text(c)}</th>" for c in header)
                     + "</tr></thead><tbody>"
                     + "".join("<tr>" + "".join(f"<td>{html_text(c)}</td>" for c in r) + "</tr>" for r in rows)
                     + "</tbody></table>")
    return "".join(parts)


def print_public(ps: PublicScores | None, console: Console) -> None:
    if ps is None:
        return
    from rich.table import Table as RichTable

    for title, notes, header, rows in public_tables(ps):
        table = RichTable(title=Text(one_line(title)), title_justify="left", header_style="bold")
        for h in header:
            table.add_column(Text(h))
        for r in rows:
            table.add_row(*(Text(one_line(c)) for c in r))
        console.print(table)
        for n in notes:
            console.print(Text(one_line(n)))
