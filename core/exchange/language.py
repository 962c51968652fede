"""A small, dependency-free guess at the language of a prompt, for
`lineup sample --by language` when the logs carry no language field.

Why it exists: stratifying by language keeps a set from being all English
when a tenth of the traffic is not, and most logs do not record a language.
A real identifier (fastText, CLD3) is a large model for a job this rough;
this module reads only the text's script and a few hundred function words.

How: letters are counted by Unicode script. A script that mostly means one
language gives it (Hangul `ko`, kana `ja`, Han without kana `zh`, Greek `el`,
Hebrew `he`, Thai `th`, Devanagari `hi`, Arabic `ar` or `fa` by the letters
Persian adds, Cyrillic `ru` or `uk` by the letters Ukrainian adds). Latin text
is scored by its common function words in English, Spanish, French, German,
Italian, Portuguese and Dutch; the best must have at least two hits and beat
the runner-up.

Limits, said plainly: fewer than 3 words (or 2 letters of a non-Latin
script) is `und` (undetermined), and so is Latin text whose function words
do not decide (code, lists of names, most languages not listed, which is
honest rather than a wrong label); mixed text gets the majority's label;
Serbian and Bulgarian read as `ru`, Urdu as `ar`, Marathi and Nepali as `hi`,
Cantonese as `zh`; a Latin-script language outside the seven is `und`.
"""

from __future__ import annotations

import re
import unicodedata
from collections import Counter

UNDETERMINED = "und"
_SAMPLE_CHARS = 4000     # the start of a long prompt decides

_WORD = re.compile(r"[^\W\d_]+")

_FUNCTION_WORDS: dict[str, frozenset[str]] = {
    "en": frozenset("the and is are to of in that it for with you this what how can my be on do does "
                    "i me your please would should which there".split()),
    "es": frozenset("el la los las de que y en es un una por para con cómo qué mi del se no lo al "
                    "está son pero más muy puedes".split()),
    "fr": frozenset("le la les des est et un une du que pour dans avec vous je ce pas sur qui mon "
                    "au aux est-ce une être comment pourquoi".split()),
    "de": frozenset("der die das und ist nicht ich ein eine zu mit den von für wie auf sie es mein "
                    "bitte dem des auch wir kann werden".split()),
    "it": frozenset("il lo la gli le di che e è un una per con non come mi sono del della questo "
                    "nel alla anche ho perché".split()),
    "pt": frozenset("o a os as de que e é um uma para com não como meu do da em se você "
                    "no na dos das isso está".split()),
    "nl": frozenset("de het een en is van dat niet ik je met voor op zijn hoe wat mijn te er ook "
                    "maar dit kan wordt".split()),
}


def _script(ch: str) -> str | None:
    """The script of a letter, for the scripts this module tells apart."""
    o = ord(ch)
    if 0x3040 <= o <= 0x30FF or 0x31F0 <= o <= 0x31FF:
        return "kana"
    if 0xAC00 <= o <= 0xD7AF or 0x1100 <= o <= 0x11FF or 0x3130 <= o <= 0x318F:
        return "hangul"
    if 0x4E00 <= o <= 0x9FFF or 0x3400 <= o <= 0x4DBF or 0xF900 <= o <= 0xFAFF:
        return "han"
    if 0x0400 <= o <= 0x052F:
        return "cyrillic"
    if 0x0370 <= o <= 0x03FF or 0x1F00 <= o <= 0x1FFF:
        return "greek"
    if 0x0590 <= o <= 0x05FF:
        return "hebrew"
    if 0x0600 <= o <= 0x06FF or 0x0750 <= o <= 0x077F:
        return "arabic"
    if 0x0900 <= o <= 0x097F:
        return "devanagari"
    if 0x0E00 <= o <= 0x0E7F:
        return "thai"
    if ch.isalpha() and unicodedata.name(ch, "").startswith("LATIN"):
        return "latin"
    return None


def detect_language(text: str) -> str:
    """A language code (`en`, `de`, `ja`, ...) or `und`; see the module's doc for its limits."""
    text = text[:_SAMPLE_CHARS]
    scripts: Counter[str] = Counter(s for s in map(_script, text) if s)
    if not scripts:
        return UNDETERMINED
    non_latin = {k: v for k, v in scripts.items() if k != "latin"}
    if non_latin:
        # Han and kana are one writing system: kana anywhere means Japanese.
        if "kana" in non_latin or "han" in non_latin:
            cjk = non_latin.pop("han", 0) + non_latin.pop("kana", 0)
            non_latin["kana" if "kana" in scripts else "han"] = cjk
        top, count = max(non_latin.items(), key=lambda kv: (kv[1], kv[0]))
        # A script decides with 2 letters or more, unless the text is mostly
        # Latin (an English prompt quoting one word of Greek).
        if count >= 2 and count * 3 >= scripts.get("latin", 0):
            return _by_script(top, text)
    words = [w.casefold() for w in _WORD.findall(text)]
    if len(words) < 3:
        return UNDETERMINED
    scores = {lang: sum(1 for w in words if w in vocab) for lang, vocab in _FUNCTION_WORDS.items()}
    ranked = sorted(scores.items(), key=lambda kv: (-kv[1], kv[0]))
    (best, first), (_, second) = ranked[0], ranked[1]
    if first < 2 or first == second:
        return UNDETERMINED
    return best


def _by_script(script: str, text: str) -> str:
    if script == "kana":
        return "ja"
    if script == "han":
        return "zh"
    if script == "hangul":
        return "ko"
    if script == "cyrillic":
        return "uk" if re.search("[ієїґІЄЇҐ]", text) else "ru"
    if script == "arabic":
        return "fa" if re.search("[پچژگ]", text) else "ar"
    return {"greek": "el", "hebrew": "he", "devanagari": "hi", "thai": "th"}.get(script, UNDETERMINED)
