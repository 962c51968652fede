"""Style control's two recipes (`core.stats.style`, `--style-recipe`):
lmarena's published one (the default: (a - b) / (a + b + 1), standardised,
lmarena's Markdown rules over the conversation, length in tokens where a
tokenizer is here, penalty 0.5) and lineup's first form ((a - b) / (a + b),
root mean square, the voted answer). Each fit is set beside a reference
written from the published description (`tests.style_planted.reference_fit`)
on planted Arena battles; a taste planted in one form is recovered by the
recipe of that form; the report says which recipe and which length unit it
used, in the JSON, the HTML, the Markdown and the terminal."""

from __future__ import annotations

import json
import subprocess
import sys

import numpy as np
import pytest

from core.report import style_section
from core.stats.ratings import BattleSet, rate
from core.stats.style import RECIPES, lmarena_counts, lmarena_markdown, style_control, style_features
from lineup.cli import main
from lineup.commands import DEFAULT_STYLE_RECIPE, STYLE_RECIPES
from store import Store
from store import report_queries as Q
from tests.style_planted import _REF_CODE, Answerer, form, planted_battles, reference_fit, reference_markdown

pytest.importorskip("scipy")

TASTE = (0.3, 0.8, 0.2, 0.3)        # length, headers, list items, bold
# every model writes the same prose and lists, but headers at its own rate: a
# Markdown taste with small counts, where the two forms differ most
HEADERS = [Answerer(100, 0.3, 1, 0.3), Answerer(100, 2.0, 1, 0.3), Answerer(100, 0.6, 1, 0.3),
           Answerer(100, 1.2, 1, 0.3), Answerer(100, 0.1, 1, 0.3), Answerer(100, 1.5, 1, 0.3)]


def _battle_set(battles):
    return BattleSet.from_arrays([b["model_a"] for b in battles], [b["model_b"] for b in battles],
                                 [b["winner"] for b in battles])


def _fit(pb, recipe, *, winner_first=False):
    """lineup's fit of the planted battles; `winner_first`: the rows stored as
    the report stores them (winner first), the side shown first given apart."""
    battles, ca, cb = pb.battles, pb.counts_a, pb.counts_b
    shown = None
    if winner_first:
        flip = np.array([b["winner"] == "model_b" for b in battles])
        battles = [dict(b, model_a=b["model_b"], model_b=b["model_a"], winner="model_a") if f else b
                   for b, f in zip(battles, flip, strict=True)]
        ca, cb = np.where(flip[:, None], cb, ca), np.where(flip[:, None], ca, cb)
        shown = ~flip
    bs = _battle_set(battles)
    summary, _ = style_control(bs, ca, cb, rate(bs, rounds=0, seed=0), rounds=0, seed=0, recipe=recipe,
                               a_shown_first=shown)
    return summary


@pytest.mark.parametrize("recipe", RECIPES)
def test_the_fit_matches_the_published_recipe_within_one_elo(recipe):
    pb = planted_battles(4000, recipe=recipe, taste=TASTE, seed=2)
    want, coef = reference_fit(pb.battles, pb.counts_a, pb.counts_b, recipe)
    got = _fit(pb, recipe, winner_first=True)
    assert got.recipe == recipe
    for row in got.models:
        assert row.adjusted == pytest.approx(want[row.name], abs=1.0), (row, want)
    assert [c.coef for c in got.coefficients] == pytest.approx(list(coef), abs=0.01)
    assert [r.name for r in got.models] == sorted(want, key=lambda m: -want[m])


def test_lmarena_standardises_in_the_orientation_the_rater_saw():
    """The mean FastChat subtracts is over model_a = the left side; rows
    stored winner first must not move it (centring them would subtract the
    very taste being measured)."""
    pb = planted_battles(3000, recipe="lmarena", taste=TASTE, seed=5)
    shown = _fit(pb, "lmarena")
    stored = _fit(pb, "lmarena", winner_first=True)
    for a, b in zip(shown.models, stored.models, strict=True):
        assert a.adjusted == pytest.approx(b.adjusted, abs=1e-6)
    # without the sides shown, winner-first rows would be centred wrongly
    flip = np.array([b["winner"] == "model_b" for b in pb.battles])
    ca, cb = np.where(flip[:, None], pb.counts_b, pb.counts_a), np.where(flip[:, None], pb.counts_a, pb.counts_b)
    right, _ = style_features(ca, cb, "lmarena", ~flip)
    wrong, _ = style_features(ca, cb, "lmarena", None)
    assert np.abs(right - wrong).max() > 0.1


@pytest.mark.parametrize("planted", RECIPES)
def test_a_taste_planted_in_one_form_is_recovered_by_its_recipe(planted):
    pb = planted_battles(8000, recipe=planted, taste=(0.0, 2.0, 0.0, 0.0), seed=0, answerers=HEADERS)
    taste = {}
    for recipe in RECIPES:
        fit = _fit(pb, recipe, winner_first=True)
        f = form(pb.counts_a, pb.counts_b, recipe)[:, 1]
        scale = f.std() if recipe == "lmarena" else np.sqrt((f * f).mean())
        taste[recipe] = fit.coefficients[1].coef / scale     # per unit of the recipe's own form
        if recipe == planted:
            errors = [abs(r.adjusted - pb.truth[r.name]) for r in fit.models]
            raw = [abs(r.rating - pb.truth[r.name]) for r in fit.models]
            assert max(errors) < 20 < 60 < max(raw), (errors, raw)
    other = next(r for r in RECIPES if r != planted)
    assert taste[planted] == pytest.approx(2.0, abs=0.3), taste
    assert abs(taste[other] - 2.0) > 0.6, taste


@pytest.mark.parametrize("text, want", [
    ("# a\n## b\n###### c\n####### d\n#e\n #f", (3, 0, 0)),
    ("1. one\n  2. two\n- x\n* y\n+ z\n-no\n12.5 no", (0, 5, 0)),
    ("**a** and __b__ **c\nd**", (0, 0, 2)),
    ("```\n# not a header\n- nor an item\n```\n# header", (1, 0, 0)),
    ("#\n#\n", (2, 0, 0)),
    ("**a__b**c__", (0, 0, 2)),
])
def test_markdown_is_counted_by_lmarenas_rules(text, want):
    assert lmarena_markdown(text) == want
    assert reference_markdown(text) == want


def test_markdown_counts_agree_with_fastchats_expressions_on_random_text():
    rng = np.random.default_rng(0)
    pieces = ["#", "##", "-", "*", "+", "**", "__", "1.", "12.", " ", "  ", "\n", "\n\n", "\t", "a", "word",
              "```", "`", "_", "x**y**", "\u2003"]
    for _ in range(3000):
        text = "".join(rng.choice(pieces, size=int(rng.integers(1, 40))))
        if any(block and text.count(block) > 1 for block in _REF_CODE.findall(text)):
            continue   # FastChat also removes copies of a code block found elsewhere: ours does not
        assert lmarena_markdown(text) == reference_markdown(text), repr(text)


def test_a_page_of_blank_lines_is_counted_in_linear_time():
    """FastChat's "^\\s*" lets every line start scan all the blank lines after
    it; ours reads each once. A quadratic pattern would not finish here."""
    code = ("from core.stats.style import lmarena_markdown; "
            "print(lmarena_markdown('\\n' * 2_000_000 + ' ' * 1_000_000 + '-'))")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert done.stdout.strip() == "(0.0, 0.0, 0.0)", done.stderr


def test_length_is_summed_over_turns_in_words_without_a_tokenizer():
    assert lmarena_counts(["a b c", "## d e"], None) == (6.0, 1.0, 0.0, 0.0)


def test_length_is_counted_in_cl100k_tokens_when_a_tokenizer_is_here():
    pytest.importorskip("tiktoken")
    from core.stats.style import token_counter

    tokens = token_counter()
    if tokens is None:
        pytest.skip("tiktoken is here but not the cl100k_base file (the tokens extra brings it)")
    assert tokens("hello world") == 2
    assert lmarena_counts(["hello world", "hello world"], tokens)[0] == 4.0


def test_the_command_line_names_the_core_recipes():
    assert STYLE_RECIPES == RECIPES and DEFAULT_STYLE_RECIPE == RECIPES[0]


# ------------------------------------------------------------------ the report


@pytest.fixture
def arena_db(tmp_path, capsys, monkeypatch):
    """Planted battles with a Markdown taste, imported from Arena JSON; the
    length in words (the reference counts words)."""
    monkeypatch.setattr(style_section, "token_counter", lambda: None)
    pb = planted_battles(2500, recipe="lmarena", taste=(0.2, 1.0, 0.4, 0.3), seed=11)
    src = tmp_path / "battles.json"
    src.write_text(json.dumps(pb.battles), encoding="utf-8")
    db = str(tmp_path / "arena.db")
    assert main(["import", "--db", db, str(src)]) == 0
    capsys.readouterr()
    return db, pb


@pytest.mark.parametrize("recipe", [None, "lmarena", "lineup"])
def test_report_json_matches_the_reference_and_names_its_recipe(arena_db, capsys, recipe):
    db, pb = arena_db
    args = ["report", "--db", db, "--bootstrap", "20", "--json", "--style-control"]
    if recipe:
        args += ["--style-recipe", recipe]
    assert main(args) == 0
    style = json.loads(capsys.readouterr().out)["style"]
    used = recipe or "lmarena"
    assert style["recipe"] == used and used in style["recipe_text"]
    assert style["length_unit"] == "words"
    assert style["coefficients"][0]["description"] == "answer length (words)"
    want, _ = reference_fit(pb.battles, pb.counts_a, pb.counts_b, used)
    got = {r["name"]: r["adjusted"] for r in style["models"]}
    assert got == pytest.approx(want, abs=1.0)
    assert [r["name"] for r in style["models"]] == sorted(want, key=lambda m: -want[m])


def test_html_markdown_and_terminal_say_the_recipe(arena_db, capsys, tmp_path):
    db, _ = arena_db
    for recipe in RECIPES:
        page, md = tmp_path / f"{recipe}.html", tmp_path / f"{recipe}.md"
        assert main(["report", "--db", db, "--bootstrap", "10", "--style-control", "--style-recipe", recipe,
                     "--html", str(page), "--md", str(md)]) == 0
        capsys.readouterr()
        assert main(["report", "--db", db, "--bootstrap", "10", "--style-control", "--style-recipe", recipe]) == 0
        terminal = " ".join(capsys.readouterr().out.split())
        for text in (page.read_text(encoding="utf-8"), md.read_text(encoding="utf-8"), terminal):
            assert f"Recipe: {recipe} (" in text
            assert "length counted in words" in text
        per = "standard deviation" if recipe == "lmarena" else "root mean square"
        assert f"per {per} of the normalised difference" in terminal


def test_the_report_counts_tokens_when_a_tokenizer_is_here(arena_db, capsys, monkeypatch):
    db, _ = arena_db
    monkeypatch.setattr(style_section, "token_counter", lambda: lambda text: 2 * len(text.split()))
    assert main(["report", "--db", db, "--bootstrap", "0", "--json", "--style-control"]) == 0
    style = json.loads(capsys.readouterr().out)["style"]
    assert style["length_unit"] == "tokens (cl100k_base)"
    assert style["coefficients"][0]["description"] == "answer length (tokens (cl100k_base))"


def test_a_conversation_counts_every_assistant_turn_up_to_the_vote(tmp_path, capsys):
    """lmarena's features are over all assistant turns of the battle; two
    battles under one question id keep their own turns."""
    conv = lambda *answers: [m for k, a in enumerate(answers)      # noqa: E731
                             for m in ({"role": "user", "content": f"q{k}"}, {"role": "assistant", "content": a})]
    battles = [{"model_a": "p", "model_b": "q", "winner": "model_a", "question_id": "same", "tstamp": 1.7e9 + k,
                "conversation_a": conv(f"# p{k} one", f"- p{k} two"), "conversation_b": conv(f"q{k}", f"q{k} b")}
               for k in range(2)]
    src = tmp_path / "b.json"
    src.write_text(json.dumps(battles), encoding="utf-8")
    db = tmp_path / "c.db"
    assert main(["import", "--db", str(db), str(src)]) == 0
    store = Store.open(db)
    try:
        ids = [r[0] for r in store.conn.execute("SELECT id FROM vote ORDER BY created")]
        threads = Q.voted_threads(store, ids)
    finally:
        store.close()
    for k, vid in enumerate(ids):
        assert threads[vid].answers == {"p": [f"# p{k} one", f"- p{k} two"], "q": [f"q{k}", f"q{k} b"]}
        assert threads[vid].shown == ["p", "q"]
        assert lmarena_counts(threads[vid].answers["p"], None) == (6.0, 1.0, 1.0, 0.0)


def test_decide_takes_the_recipe_and_says_it(arena_db, capsys):
    db, pb = arena_db
    for recipe in RECIPES:
        assert main(["decide", "--db", db, "--bootstrap", "10", "--json", "--style-control",
                     "--style-recipe", recipe]) == 0
        decision = json.loads(capsys.readouterr().out)
        (style,) = decision["style_by_category"].values()
        assert style["recipe"] == recipe and style["length_unit"] == "words"
        want, _ = reference_fit(pb.battles, pb.counts_a, pb.counts_b, recipe)
        assert {r["name"]: r["adjusted"] for r in style["models"]} == pytest.approx(want, abs=1.0)
