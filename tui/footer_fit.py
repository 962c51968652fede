"""Which keys the footer names when they do not all fit the terminal's width.

Textual's footer lays its keys out in one row and cuts the row at the edge,
mid-word ("^q Qu"), whatever the keys matter. `fit_bindings` keeps the most
useful keys whole instead: it takes them in the screen's order of importance
while they fit, and leaves the rest out (they still work; F1 and the palette
list them all). The widths are those of Textual's `FooterKey` styles."""

from __future__ import annotations

from collections.abc import Callable

from rich.cells import cell_len
from textual.binding import ActiveBinding, Binding
from textual.screen import Screen
from textual.widgets import Footer


def key_width(key_display: str, description: str, compact: bool) -> int:
    """Cells one footer key takes: "^q Quit" and its spacing (compact: the
    key bare, a space, the words and a margin; else a pad around each part)."""
    if compact:
        return cell_len(key_display) + 1 + cell_len(description) + 1
    return 1 + cell_len(key_display) + 1 + cell_len(description) + 1


def group_width(key_displays: list[str], description: str) -> int:
    """Cells a group of keys takes ("a b c d best"): each key and a space,
    the words, a pad before and a margin after (either footer style)."""
    return sum(cell_len(k) + 1 for k in key_displays) + cell_len(description) + 2


def fit_bindings(bindings: dict[str, ActiveBinding], width: int, compact: bool,
                 key_display: Callable[[Binding], str],
                 rank: Callable[[ActiveBinding], int]) -> dict[str, ActiveBinding]:
    """The bindings whose footer keys fit in `width` cells, chosen by `rank`
    (lowest first), in their original order. Keys the footer does not show
    and second keys for an action already named cost nothing and are kept."""
    order = sorted(bindings, key=lambda k: rank(bindings[k]))
    kept: set[str] = set()
    named: set[str] = set()
    used = 0
    for key in order:
        binding = bindings[key].binding
        if key in kept or not binding.show or binding.action in named:
            kept.add(key)
            continue
        if binding.group is not None:   # a group ("a b c best") is named whole or not at all
            members = [k for k, b in bindings.items() if b.binding.group is binding.group and b.binding.show]
            cost = group_width([key_display(bindings[k].binding) for k in members], binding.group.description)
        else:
            members = [key]
            cost = key_width(key_display(binding), binding.description, compact)
        if used + cost <= width:
            used += cost
            kept.update(members)
            named.update(bindings[k].binding.action for k in members)
    return {key: b for key, b in bindings.items() if key in kept}


def fit_screen_bindings(screen: Screen, shown: dict[str, ActiveBinding], ours: tuple[object, ...],
                        order: tuple[str, ...]) -> dict[str, ActiveBinding]:
    """`fit_bindings` for a screen's footer: the keys of a focused widget
    that is not one of `ours` (a pane, the vote bar) first, then `ours` in
    `order` of importance, as many whole keys as the screen's width holds."""
    def rank(active: ActiveBinding) -> int:
        if not any(active.node is node for node in ours):
            return 0
        action = active.binding.action
        return 1 + (order.index(action) if action in order else len(order))

    footer = screen.query(Footer)
    compact = bool(footer) and footer.first().compact
    return fit_bindings(shown, screen.size.width, compact, screen.app.get_key_display, rank)
