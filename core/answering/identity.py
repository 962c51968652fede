"""Self-identification: does an answer say that it IS, or was MADE BY, the
model or vendor it actually is? ("I am Claude", "As an AI developed by
OpenAI", "Soy un modelo de Google", "我是通义千问".)

Such an answer gives its identity away in a blind comparison, so it is tagged
`identity_leak` (automatically, rater "lineup") wherever answers are recorded:
the chat and `lineup run` both call `tag_self_identification`.

A mention is not a claim. Only a first-person statement counts: a first-person
anchor ("I am", "je suis", "ich bin", "我是", "私は" ...) followed, within the
same clause and through nothing but descriptive words ("a large language model
trained by"), by one of the model's own names, or by its own vendor where that
vendor is said to have made it. Other vendors' models, the own vendor as a third
party ("search Google", "OpenAI's docs"), code, quotes, negations ("I am not
ChatGPT"), hypotheticals ("if I were", "pretend I am") and claims the prompt
itself made (echoes, translations) do not count. Precision comes first: a false
tag is a false record. Demo models have no identity.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from functools import lru_cache
from urllib.parse import urlsplit

from providers.events import Message
from providers.model_config import ModelConfig
from store.records import OutputRecord, TagRecord

TAG = "identity_leak"
RATER = "lineup"


@dataclass(frozen=True)
class Family:
    """A model family: how its model ids look, its product names, its makers."""

    key: str
    model_ids: str            # regex over the lower-cased model id
    names: tuple[str, ...]    # regexes of product names (case-insensitive)
    vendors: tuple[str, ...]  # regexes of the companies behind it


FAMILIES: tuple[Family, ...] = (
    Family("openai", r"(?:^|[^a-z])(?:chat)?gpt|(?:^|/)o[1-9](?:$|[^a-z0-9])|davinci|codex",
           (r"ChatGPT", r"GPT", r"o[1-9](?:-(?:mini|pro|preview))?", r"Codex"), (r"OpenAI",)),
    Family("anthropic", r"claude", (r"Claude",), (r"Anthropic",)),
    Family("google", r"gemini|gemma|palm|bard",
           (r"Gemini", r"Gemma", r"Bard", r"PaLM", r"LaMDA"),
           (r"Google(?:\s+DeepMind|\s+AI|\s+Research)?", r"DeepMind", r"Alphabet", r"谷歌")),
    Family("alibaba", r"qwen|qwq|tongyi",
           (r"Qwen", r"QwQ", r"Tongyi(?:\s+Qianwen)?", r"通义千问", r"通义", r"千问"),
           (r"Alibaba(?:\s+Cloud|\s+Group)?", r"阿里巴巴(?:集团)?", r"阿里云", r"Qwen\s+Team", r"通义实验室")),
    Family("meta", r"llama", (r"Llama", r"Meta\s+AI"), (r"Meta(?:\s+AI|\s+Platforms)?", r"Facebook")),
    Family("mistral", r"mistral|mixtral|codestral|ministral|magistral|pixtral|devstral",
           (r"Mistral", r"Mixtral", r"Codestral", r"Ministral", r"Magistral", r"Pixtral", r"Le\s+Chat"),
           (r"Mistral\s+AI",)),
    Family("deepseek", r"deepseek", (r"DeepSeek",), (r"DeepSeek(?:\s+AI)?", r"深度求索")),
    Family("microsoft", r"(?:^|[^a-z])phi(?:$|[^a-z])", (r"Phi",), (r"Microsoft(?:\s+Research)?", r"微软")),
    Family("xai", r"grok", (r"Grok",), (r"xAI",)),
    Family("cohere", r"command|(?:^|[^a-z])aya(?:$|[^a-z])|c4ai", (r"Command[\s-]?[RA]", r"Aya"), (r"Cohere",)),
    Family("01ai", r"(?:^|[^a-z])yi(?:$|[^a-z])", (r"Yi",), (r"01\.AI", r"零一万物")),
    Family("tii", r"falcon", (r"Falcon",), (r"TII", r"Technology\s+Innovation\s+Institute")),
    Family("ai2", r"olmo|tulu", (r"OLMo", r"T[üu]lu"), (r"Ai2", r"AI2", r"Allen\s+Institute(?:\s+for\s+AI)?")),
    Family("ibm", r"granite", (r"Granite",), (r"IBM",)),
    Family("nvidia", r"nemotron", (r"Nemotron",), (r"NVIDIA",)),
    Family("moonshot", r"kimi|moonshot", (r"Kimi",), (r"Moonshot(?:\s+AI)?", r"月之暗面")),
    Family("zhipu", r"glm", (r"ChatGLM", r"GLM", r"智谱清言"), (r"Zhipu(?:\s+AI)?", r"智谱(?:AI)?", r"Z\.ai")),
    Family("baidu", r"ernie", (r"ERNIE(?:\s+Bot)?", r"文心一言", r"文心"), (r"Baidu", r"百度")),
    Family("tencent", r"hunyuan", (r"Hunyuan", r"混元"), (r"Tencent", r"腾讯")),
    Family("bytedance", r"doubao", (r"Doubao", r"豆包"), (r"ByteDance", r"字节跳动")),
    Family("minimax", r"minimax|abab", (r"MiniMax",), (r"MiniMax",)),
    Family("ai21", r"jamba", (r"Jamba",), (r"AI21(?:\s+Labs)?",)),
)
_BY_PROVIDER = {"anthropic": "anthropic", "gemini": "google"}
_OPENAI_HOSTS = ("openai.com", "openai.azure.com")
#: Protocols whose default server is one maker's own API: (that maker's family, its hosts).
_OFFICIAL_HOSTS = {"openai": ("openai", _OPENAI_HOSTS), "openai-responses": ("openai", _OPENAI_HOSTS)}

# Versions and sizes that may follow a product name: "GPT-4o", "Claude 3.5 Sonnet", "Qwen2.5-Max".
_TAIL = (r"(?:[- \t]?(?:\d+(?:\.\d+)*[a-z]?\+?|v\d+(?:\.\d+)*|turbo|mini|pro|flash|ultra|nano|sonnet|opus|haiku"
         r"|instruct|max|plus|lite|preview|thinking|coder|vl|large|small|medium|omni|r\d?\+?)(?![a-z]))*")

# Words a first-person claim may pass through before it names itself.
SAFE = frozenset("""
a an the one of large big small language languages model models ai a.i. artificial intelligence assistant
assistants chatbot chat bot helpful friendly virtual conversational multimodal generative llm lm system program
version variant instance family series latest newest new open source open-source open-weight weights proprietary
called named known as also simply just here actually really indeed in fact your
made created developed trained built designed produced engineered programmed released owned maintained
powered based on running by from at team company lab labs research researchers engineers
un une le la l les modèle modèles de d du des langage langue intelligence artificielle ia assistante agent
conversationnel conversationnelle virtuel virtuelle grand grande appelé appelée nommé nommée connu connue sous nom
par créé créée conçu conçue développé développée entraîné entraînée formé formée fabriqué fabriquée programmé
basé basée sur équipe l'équipe société entreprise en vérité gran linguistico linguistica lingüístico linguístico
una el lo los modelo modelos lenguaje inteligencia asistente llamado llamada denominado denominada conocido
conocida como creado creada desarrollado desarrollada entrenado entrenada diseñado diseñada hecho hecha
construido construida por basado basada del equipo empresa compañía realidad
um uma o os modelo linguagem inteligência chamado chamada criado criada desenvolvido desenvolvida treinado
treinada pela pelo da do equipe baseado baseada em
uno il gli modello linguaggio intelligenza artificiale assistente virtuale chiamato chiamata creato creata
sviluppato sviluppata addestrato addestrata dal dalla di della basato basata su azienda
ein eine einer eines einem der die das modell sprachmodell ki ki-modell ki-sprachmodell künstliche
intelligenz assistent assistentin ki-assistent großes großer großen großem von entwickelt entwickeltes
entwickelter entwickeltem trainiert trainiertes trainierter trainiertem erstellt erstelltes gebaut gebautes
geschaffen geschaffenes namens genannt basierend auf firma unternehmen
языковая языковой языковую модель модели ии искусственный интеллект ассистент помощник чат-бот большая
большой разработанная разработанный разработан разработана созданная созданный создан создана обученная
обученный обучен обучена компанией компании командой от на основе названный по имени
""".split())
# After one of these (or before a model noun) a vendor is the maker, not a third party.
MAKER_MARKERS = frozenset("""
by from at par por pela pelo da dal dalla di della de d del do von от компанией компании командой
разработан разработана разработанная разработанный создан создана созданная созданный обучен обучена
обученная обученный
""".split())
MODEL_NOUNS = frozenset("""
model models ai assistant chatbot bot llm lm system language product modèle modelo modello modell
sprachmodell ki ia ki-modell assistent asistente assistente модель ассистент помощник ии
""".split())
MADE_VERBS = frozenset("""
made created developed trained built designed produced engineered programmed released powered based
créé créée conçu conçue développé développée entraîné entraînée creado creada desarrollado desarrollada
entrenado entrenada criado criada desenvolvido desenvolvida treinado treinada creato creata sviluppato
sviluppata addestrato addestrata entwickelt entwickeltes entwickelter entwickeltem trainiert trainiertes
trainierter trainiertem erstellt erstelltes gebaut gebautes разработан разработана разработанная
разработанный создан создана обучен обучена
""".split())
CONJUNCTIONS = frozenset("and so but or et y e und и а".split())
# What may follow a name in a claim: "I'm Claude, ...", "I'm Claude and ...", "I am ChatGPT trained by ...".
AFTER_NAME = MODEL_NOUNS | MADE_VERBS | CONJUNCTIONS | frozenset("""
by from here speaking version variant which that who your at i de par por von da di от made
""".split())
# A claim right after one of these is reported, hypothetical or denied, not made.
NOT_A_CLAIM = frozenset("""
if unless whether pretend pretending imagine suppose supposing assume assuming roleplay role-play
say says said saying claim claims claimed claiming wrote write writes ask asks asked tell tells told
think thinks thought believe believes believed when whenever while not never nor no non não
si comme dit dis écrit pense crois imagine supposons cuando dice dijo escribió piensa cree imagina
supongamos wenn falls ob sagt sagte schrieb denkt glaubt stell se diz disse escreveu pensa acha
если будто говорит сказал написал думает считает не
""".split())
GENERIC_IDS = frozenset("""
model local default server test custom chat base instruct assistant main llm gguf latest mine private
""".split())

_FIRST_PERSON = re.compile(
    r"""(?ix)
    (?P<maker>my\s+(?:creators?|developers?|makers?|parent\s+company)(?:\s+(?:is|are|was|were))?\b)
  | (?P<clause>(?:as|en\s+tant\s+que|als|sono)\b)
  | (?P<plain>
      \bI\s*(?:am|'m|’m)\b | \bI\s+(?:was|have\s+been)\b | \bI['’]ve\s+been\b | \bmy\s+name\s+is\b | \bcall\s+me\b
    | \byou(?:['’]re|\s+are)\s+(?:talking|chatting|speaking)\s+(?:to|with)\b
    | \bje\s+suis\b | \bj['’]ai\s+été\b | \bje\s+m['’]appelle\b | \bmon\s+nom\s+est\b
    | \b(?:yo\s+)?soy\b | \bme\s+llamo\b | \bmi\s+nombre\s+es\b | \bfui\b | \bhe\s+sido\b
    | \b(?:eu\s+)?sou\b | \bme\s+chamo\b | \bmeu\s+nome\s+é\b
    | \bio\s+sono\b | \bmi\s+chiamo\b | \bil\s+mio\s+nome\s+è\b
    | \bich\s+bin\b | \bich\s+heiße\b | \bmein\s+name\s+ist\b | \bich\s+wurde\b
    | (?<!\w)я(?!\w) | \bменя\s+зовут\b | \bмо[ёе]\s+имя\b
    )""")
# In a prompt, a claim the answer would repeat may also be put to it: "You are ChatGPT", "act as Claude".
_PROMPT_ANCHORS = re.compile(
    r"(?i)\byou(?:['’]re|\s+are)\b|\bas\b|\btu\s+es\b|\beres\b|\bdu\s+bist\b|\bvous\s+êtes\b|\bты\b|你是|あなたは")
# The first word of each anchor: only where one stands is the anchor pattern tried (fast on long answers).
_ANCHOR_WORDS = frozenset("""
i my call you je j mon yo soy me mi fui he eu sou meu sono io il ich mein я меня моё мое as en als
""".split())
_WORD = re.compile(r"[^\W\d_]+")
_CJK_FIRST_PERSON = re.compile(r"我(?:其实|就|正|真的)?是由?|我叫|我的名字(?:是|叫)|作为|我由|私は|わたしは|僕は|저는|나는")
_CJK_HYPOTHETICAL = re.compile(r"如果|假如|假设|要是|もし|仮に|만약|만일")
_CJK_GAP = re.compile(
    r"(?:一个|一款|一种|个|由|的|大型|超大规模|大规模|语言模型|语言|模型|人工智能|智能|AI|LLM|助手|对话|聊天机器人|预训练|"
    r"开发|研发|训练|打造|创建|推出|公司|团队|名叫|名为|叫做|称为|、|，|,|\s|"
    r"大規模|言語モデル|モデル|アシスタント|によって|により|開発|された|した|トレーニング|訓練|が|の|"
    r"에서|개발한|만든|훈련된|언어|모델|어시스턴트|인공지능)*")
_CJK_VENDOR_AFTER = re.compile(
    r"\s*(?:开发|研发|训练|打造|创建|推出|公司|团队|旗下|的\s*(?:AI|人工智能|大型|超大规模|大规模|语言模型|模型|助手)|"
    r"によって|により|が(?:開発|作成|訓練|トレーニング)|の(?:AI|大規模|言語モデル|モデル|アシスタント)|製|で(?:開発|訓練)|"
    r"에서\s*(?:개발|만든|훈련)|[가이]\s*(?:개발|만든)|의\s*(?:AI|모델|언어|어시스턴트))")
_CJK_NAME_END = re.compile(r"\s*(?:$|[，,。.！!、:：（(\s]|です|だ|と申します|という|입니다|이에요|예요|라고|이라고|"
                           r"的?(?:AI|人工智能|大型|超大规模|大规模|大模型|语言模型|模型|助手)|，|由|来自)")
_VENDOR_ACTS = r"\s+(?:\w+\s+)?(?:created|trained|built|developed|designed)\s+me\b"   # not "made me (think)"
_BOUNDARY = re.compile(r"[.!?;:\n。！？；：](?!\d)")
_TOKEN = re.compile(r"(?:[ldjmnstc]|qu)['’](?=\w)|[^\W\d_](?:[\w'’.-]*\w)?|\d[\w.]*|[,—–()\-]|\S")
_QUOTES = re.compile(
    r"""(?msx)
      ^[ \t]*(```|~~~).*?(?:^[ \t]*\1[ \t]*$|\Z)      # fenced code
    | `[^`\n]+`                                         # inline code
    | ^[ \t]*>[^\n]*$                                   # block quote
    | "[^"\n]{0,400}"  | “[^”\n]{0,400}”  | „[^“”\n]{0,400}[“”]  | «[^»\n]{0,400}»  | ‹[^›\n]{0,400}›
    | 「[^」\n]{0,400}」 | 『[^』\n]{0,400}』 | ‘[^’\n]{0,400}’(?!\w)
    | (?<![\w'])'(?=\S)[^'\n]{0,400}?(?<=[^\s'])'(?![\w])
    """)
_MAX_GAP = 14


@dataclass(frozen=True)
class SelfIdentification:
    """Where an answer names itself: the claim's span and the name it used."""

    start: int
    end: int
    name: str      # the own name or vendor, as written
    key: str       # its canonical form, to compare claims


@dataclass(frozen=True)
class _Identity:
    names: re.Pattern[str]
    vendors: re.Pattern[str] | None
    acts: re.Pattern[str] | None


def identity_of(cfg: ModelConfig) -> _Identity | None:
    """The names this model and its maker go by; None for demo models."""
    if cfg.is_demo:
        return None
    return _identity(cfg.provider, cfg.model, cfg.base_url or "")


def _families(provider: str, model: str, base_url: str) -> list[Family]:
    """The families a model belongs to: by its id, else by its provider's own API."""
    lowered = model.lower()
    families = [f for f in FAMILIES if re.search(f.model_ids, lowered)]
    by_provider = _BY_PROVIDER.get(provider)
    host = (urlsplit(base_url).hostname or "") if base_url else ""
    official = _OFFICIAL_HOSTS.get(provider)
    if not families and official is not None and (not host or host.endswith(official[1])):
        by_provider = official[0]
    families += [f for f in FAMILIES if f.key == by_provider and f not in families]
    return families


def family_of(provider: str, model: str, base_url: str | None = None) -> str:
    """The family a model belongs to, to keep a judge from judging its own
    kin (`lineup judge`): a known family's key ("openai", "anthropic"...),
    a demo style as itself ("demo:concise"), else the model id's stem
    ("zorblax" for "zorblax-7b-instruct")."""
    if provider == "demo":
        return f"demo:{model}"
    families = _families(provider, model, base_url or "")
    if families:
        return families[0].key
    stem = re.split(r"[^a-z0-9]", model.lower().rsplit("/", 1)[-1])[0]
    return stem or model.lower()


@lru_cache(maxsize=256)
def _identity(provider: str, model: str, base_url: str) -> _Identity | None:
    lowered = model.lower()
    families = _families(provider, model, base_url)
    names = [n for f in families for n in f.names]
    vendors = [v for f in families for v in f.vendors]
    if not families:
        # an unknown model is known by its own id ("zorblax-7" -> Zorblax), unless that is an ordinary word
        stem = re.split(r"[^a-z]", lowered.rsplit("/", 1)[-1])[0]
        if len(stem) >= 4 and stem not in GENERIC_IDS and stem not in SAFE:
            # written as a name: capitalised ("I'm Zorblax"), so "I am thorough" is not "thorough"
            names.append(f"(?-i:{stem[0].upper()}){re.escape(stem[1:])}")
    if not names:
        return None
    edge = r"(?<![A-Za-z0-9])"
    name_re = re.compile(rf"{edge}(?:{'|'.join(sorted(names, key=len, reverse=True))}){_TAIL}(?![A-Za-z0-9])",
                         re.IGNORECASE)
    vendor_alt = "|".join(sorted(vendors, key=len, reverse=True))
    vendor_re = re.compile(rf"{edge}(?:{vendor_alt})(?![A-Za-z0-9])", re.IGNORECASE) if vendors else None
    acts = re.compile(rf"{edge}(?:{vendor_alt}){_VENDOR_ACTS}", re.IGNORECASE) if vendors else None
    return _Identity(name_re, vendor_re, acts)


def _blank_quotes(text: str) -> str:
    """`text` with code, quotations and block quotes blanked (same length, so
    offsets hold); each blank ends a clause."""
    return _QUOTES.sub(lambda m: "\n" + " " * (len(m.group(0)) - 1), text)


def _key(name: str) -> str:
    return re.sub(r"[\s\-_.]+", "", re.sub(_TAIL + "$", "", name, flags=re.IGNORECASE)).lower()


def _claims(text: str, ident: _Identity, *, prompt: bool = False) -> list[SelfIdentification]:
    found = []
    anchors = []
    for w in _WORD.finditer(text):
        if w.group(0).lower() not in _ANCHOR_WORDS:
            continue
        m = _FIRST_PERSON.match(text, w.start())
        clause = m.group("clause") if m is not None else None
        if m is not None and (clause is None or _clause_start(text, m.start(), comma=clause.lower() == "sono")):
            anchors.append((m.start(), m.end(), m.group("maker") is not None))
    if prompt:
        anchors += [(m.start(), m.end(), False) for m in _PROMPT_ANCHORS.finditer(text)]
    for start, end, maker in anchors:
        if not prompt and _reported(text, start):
            continue
        hit = _walk(text, end, ident, maker=maker)
        if hit is not None:
            found.append(SelfIdentification(start, hit[1], hit[0], _key(hit[0])))
    for m in _CJK_FIRST_PERSON.finditer(text):
        if _CJK_HYPOTHETICAL.search(text, max(0, m.start() - 6), m.start()):
            continue
        hit = _cjk(text, m.end(), ident, by=m.group(0).endswith("由"))
        if hit is not None:
            found.append(SelfIdentification(m.start(), hit[1], hit[0], _key(hit[0])))
    if ident.acts is not None and ident.vendors is not None:   # both or neither
        for m in ident.acts.finditer(text):
            if not _reported(text, m.start()):
                vendor = ident.vendors.match(text, m.start())
                if vendor is not None:   # always: `acts` starts with a vendor's name
                    name = vendor.group(0)
                    found.append(SelfIdentification(m.start(), m.end(), name, _key(name)))
    return found


def _clause_start(text: str, at: int, *, comma: bool = False) -> bool:
    """"As ..." and "Sono ..." are claims only where a sentence (or line) starts
    ("Ciao, sono Claude" too; "..., as Google's docs say" is not one)."""
    before = text[max(0, at - 40):at].rstrip(" \t")
    return not before or before[-1] in ".!?\n:;" or (comma and before[-1] == ",")


def _reported(text: str, at: int) -> bool:
    """True if the words just before `at` (same clause) make what follows
    reported, hypothetical or denied: "if I were", "the user said I am"."""
    before = text[max(0, at - 120):at]
    start = max(before.rfind(c) for c in ".!?;:,\n。！？，")
    words = re.findall(r"[^\W\d_][\w'’-]*", before[start + 1:].lower())[-5:]
    return any(w in NOT_A_CLAIM or w.endswith("n't") for w in words)


def _walk(text: str, pos: int, ident: _Identity, *, maker: bool) -> tuple[str, int] | None:
    """From the end of a first-person anchor, through descriptive words only,
    to an own name (or own vendor named as the maker) in the same clause."""
    prev: str | None = None
    marker = False
    described = maker   # a made-verb or model noun seen: "a model ... from", "created ... by"
    for _ in range(_MAX_GAP):
        while pos < len(text) and text[pos] in " \t\u00a0":
            pos += 1
        if pos >= len(text) or _BOUNDARY.match(text, pos):
            return None
        name = ident.names.match(text, pos)
        if name is not None:
            return (name.group(0), name.end()) if _ends_claim(text, name.end()) else None
        vendor = ident.vendors.match(text, pos) if ident.vendors is not None else None
        if vendor is not None:
            # the maker, not a third party: "my developers at X", "a model trained by X",
            # "a model X"... or "an X model", "X's assistant"
            after = _next_word(text, vendor.end())
            if maker or (marker and described) or (prev or "") in MODEL_NOUNS or after in MODEL_NOUNS \
                    or after in MADE_VERBS or _possessive_model(text, vendor.end()):
                return vendor.group(0), vendor.end()
            return None
        tok = _TOKEN.match(text, pos)
        if tok is None:
            return None
        word = tok.group(0).lower().strip("'’")
        if word in SAFE or word in ",—–()-":
            marker = marker or word in MAKER_MARKERS
            described = described or word in MADE_VERBS or word in MODEL_NOUNS
        elif word in CONJUNCTIONS and _next_word(text, tok.end()) in MADE_VERBS:
            pass
        else:
            return None
        prev = word if word not in ",—–()-" else prev
        pos = tok.end()
    return None


_SPACE = re.compile(r"\s*")


def _run_end(pattern: re.Pattern[str], text: str, pos: int) -> int:
    """Where a run of `pattern` (a `(...)*` one, which matches anywhere) from `pos` ends."""
    m = pattern.match(text, pos)
    return pos if m is None else m.end()


_POSSESSIVE = re.compile(r"['’]s\s+([^\W\d_][\w-]*)")
_COMPOUND = re.compile(r"-[^\W\d_]")


def _next_word(text: str, pos: int) -> str:
    m = _TOKEN.match(text, _run_end(_SPACE, text, pos))
    return m.group(0).lower() if m else ""


def _possessive_model(text: str, pos: int) -> bool:
    """"Anthropic's AI assistant": a possessive followed by a model noun."""
    m = _POSSESSIVE.match(text, pos)
    if not m or m.group(1).lower() not in MODEL_NOUNS:
        return False
    end = m.end()
    while (nxt := _WORD.match(text, _run_end(_SPACE, text, end))) and nxt.group(0).lower() in MODEL_NOUNS:
        end = nxt.end()     # "Anthropic's AI assistant"
    return _ends_claim(text, end)   # not "Google's model card"


def _ends_claim(text: str, pos: int) -> bool:
    """A name is the claim, not a modifier ("a ChatGPT user", "Claude's fans",
    "Claude-like"): what follows must end the clause or continue the claim."""
    if text[pos:pos + 1] in ("'", "’"):
        return _possessive_model(text, pos)
    if _COMPOUND.match(text, pos):
        return False
    at = pos
    while at < len(text) and text[at] in " \t":
        at += 1
    if at >= len(text) or text[at] in ",.!?;:\n—–()…":
        return True
    word = _next_word(text, pos)
    if not word or not word[0].isalpha():
        return True
    return word in AFTER_NAME


def _cjk(text: str, pos: int, ident: _Identity, *, by: bool) -> tuple[str, int] | None:
    """The same for Chinese, Japanese and Korean, where words are not spaced."""
    gap_end = _run_end(_CJK_GAP, text, pos)
    for end in range(pos, min(len(text), pos + 40) + 1):
        if end > gap_end:
            break
        name = ident.names.match(text, end)
        if name is not None and _CJK_NAME_END.match(text, name.end()):
            return name.group(0), name.end()
        vendor = ident.vendors.match(text, end) if ident.vendors is not None else None
        if vendor is not None and ((by and end == pos) or text[max(pos, end - 1):end] == "由"
                                   or _CJK_VENDOR_AFTER.match(text, vendor.end())):
            return vendor.group(0), vendor.end()
    return None


def self_identification(text: str, cfg: ModelConfig, prompts: Iterable[str] = ()) -> SelfIdentification | None:
    """The first place where `text` says it is, or was made by, the model `cfg`
    actually is; None if it never does. `prompts` (the user messages and system
    prompt it answered) are what an echo or a translation would repeat: a claim
    the prompt already made is not the answer's own."""
    ident = identity_of(cfg)
    if ident is None or not text:
        return None
    claims = _claims(_blank_quotes(text), ident)
    if not claims:
        return None
    prompt_list = [p for p in prompts if p]
    echoed = {c.key for p in prompt_list for c in _claims(p, ident, prompt=True)}
    said = " ".join(" ".join(p.split()) for p in prompt_list).lower()
    for claim in sorted(claims, key=lambda c: c.start):
        if claim.key in echoed or " ".join(text[claim.start:claim.end].split()).lower() in said:
            continue
        return claim
    return None


def prompt_texts(messages: Iterable[Message], system: str | None = None) -> list[str]:
    """What an answer was asked: the user's messages and the system prompt."""
    return [m.content for m in messages if m.role == "user"] + ([system] if system else [])


async def tag_self_identification(store, output: OutputRecord, cfg: ModelConfig,
                                  prompts: Sequence[str] = ()) -> TagRecord | None:
    """Tag a just-finished answer `identity_leak` (auto, rater "lineup") if it
    identifies itself. Called once, when its final record is saved: an answer
    that is never redone is never tagged twice, and a tag a rater removed is
    not put back. The note says where, never the name (it may be read before
    the vote)."""
    if not output.text:
        return None
    found = self_identification(output.text, cfg, prompts)
    if found is None:
        return None
    note = f"the answer identifies itself as its own model or vendor (characters {found.start}-{found.end})"
    rec = TagRecord(output_id=output.id, tag=TAG, rater=RATER, auto=True, note=note)
    await store.add_tag(rec)
    return rec
