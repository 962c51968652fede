"""Stratified sampling of prompts from real request logs into a sample set
(`lineup sample`). The logs are read by `core.exchange.logs` (every format, and what
is skipped and why); this module decides what the sample is. Steps, each
deterministic:

1. drop duplicates: exact (after normalisation) and near-duplicates, found
   with MinHash over word 3-shingles and LSH banding (linear in the input,
   never all pairs), confirmed by the exact shingle Jaccard; the first
   occurrence in log order is kept. A case's key is its whole conversation
   (earlier turns, the prompt, its images' hashes), not its system prompt.
   With `template`, values that vary between uses of one prompt template
   (numbers, ids, e-mail addresses, URLs, dates, times; and capitalised
   names with "names") are replaced by placeholders before comparing, and
   the result says how many more prompts that merged;
2. allocate `n` over the strata proportionally (largest remainder), at least
   one per stratum;
3. draw within each stratum with a generator seeded by (seed, stratum), so a
   stratum's draw does not change when another stratum appears;
4. write the cases (a multi-turn case as `messages`, inline images as files
   beside the set) atomically.
"""

from __future__ import annotations

import json
import math
import random
import re
import unicodedata
import zlib
from collections import Counter, defaultdict
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from core.exchange.log_records import LoadedLogs, LogRecord

DEFAULT_THRESHOLD = 0.8
TEMPLATE_MODES = ("values", "names")   # what `template` normalises: values; values and names

_TOKEN = re.compile(r"\w+")
_MONTH = (r"(?:jan(?:uary)?|feb(?:ruary)?|mar(?:ch)?|apr(?:il)?|may|june?|july?|aug(?:ust)?"
          r"|sep(?:t(?:ember)?)?|oct(?:ober)?|nov(?:ember)?|dec(?:ember)?)\.?")
# In order: each pattern sees the text the ones before it left. Each has a
# cheap test (a substring the text must hold) that spares most texts the regex.
_TEMPLATE_VALUES: tuple[tuple[tuple[str, ...], re.Pattern[str], str], ...] = (
    (("://", "www."), re.compile(r"\b(?:https?|ftp)://\S+|\bwww\.\S+", re.I), " _url_ "),
    (("@",), re.compile(r"[\w.+-]+@[\w-]+(?:\.[\w-]+)+"), " _email_ "),
    (("-",), re.compile(r"\b[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}\b", re.I), " _id_ "),
    (("-", "/", "."), re.compile(r"\b\d{4}-\d{1,2}-\d{1,2}(?:[T ]\d{1,2}:\d{2}(?::\d{2}(?:\.\d+)?)?"
                                 r"(?:Z|[+-]\d{2}:?\d{2})?)?\b|\b\d{1,2}[/.-]\d{1,2}[/.-]\d{2,4}\b"), " _date_ "),
    (("jan", "feb", "mar", "apr", "may", "jun", "jul", "aug", "sep", "oct", "nov", "dec"),
     re.compile(rf"\b{_MONTH}\s+\d{{1,2}}(?:st|nd|rd|th)?(?:,?\s+\d{{4}})?\b"
                    rf"|\b\d{{1,2}}(?:st|nd|rd|th)?\s+(?:of\s+)?{_MONTH}(?:,?\s+\d{{4}})?\b", re.I), " _date_ "),
    ((":",), re.compile(r"\b\d{1,2}:\d{2}(?::\d{2})?(?:\s?[ap]\.?m\b\.?)?", re.I), " _time_ "),
)
# What is left with a digit in it: a number (3, 4.5, 1,000), then an id (ORD42, 4o, a1b2).
_NUMBER = re.compile(r"(?<!\w)\d+(?:[.,]\d+)*(?!\w)")
_ID = re.compile(r"\w*\d\w*")
_DIGIT = re.compile(r"\d")
_WORD_AT = re.compile(r"[^\W\d_][\w'’-]*")
_SENTENCE_END = frozenset(".!?:;\n")


def template_text(text: str, names: bool = False) -> str:
    """`text` with the values a template fills in replaced by placeholders
    (`_num_`, `_id_`, `_email_`, `_url_`, `_date_`, `_time_`) and, with
    `names`, every capitalised word that does not start a sentence (`_name_`)."""
    text = unicodedata.normalize("NFKC", text)
    if names:
        pieces, pos = [], 0
        for m in _WORD_AT.finditer(text):
            word = m.group()
            before = text[max(0, m.start() - 16):m.start()].rstrip(" \t")   # a window: linear in the text
            starts_sentence = not before or before[-1] in _SENTENCE_END or before[-1] in "\"'“(«"
            if word[0].isupper() and word != "I" and not starts_sentence:
                pieces.append(text[pos:m.start()])
                pieces.append(" _name_ ")
                pos = m.end()
        pieces.append(text[pos:])
        text = "".join(pieces)
    if not _DIGIT.search(text) and "@" not in text and "://" not in text and "www." not in text:
        return text                           # every value below has a digit, an @ or a URL in it
    folded = text.casefold()
    for needs, pattern, placeholder in _TEMPLATE_VALUES:
        if any(n in folded for n in needs):
            text = pattern.sub(placeholder, text)
    return _ID.sub(" _id_ ", _NUMBER.sub(" _num_ ", text))


def record_key(record: LogRecord) -> str:
    """What two records must share to be duplicates: the conversation's text."""
    return "\n".join([t for _, t in record.history] + [record.prompt])


# ---------------------------------------------------------------- duplicates


def normalise(text: str) -> str:
    """NFKC, case-folded, punctuation dropped, whitespace collapsed."""
    return " ".join(_TOKEN.findall(unicodedata.normalize("NFKC", text).casefold()))


_NUM_PERM = 64
_BANDS, _ROWS = 16, 4           # 16 x 4: candidates found with ~99% recall at Jaccard 0.7
_BUCKET_RECENT = 16             # kept docs compared per bucket: bounds the worst case
_MAX_VERIFY = 24                # candidates verified per doc, most shared bands first
_CHUNK_SHINGLES = 1 << 16
_M1, _M2 = np.uint64(0x9E3779B97F4A7C15), np.uint64(0xC2B2AE3D27D4EB4F)
_perm_rng = np.random.default_rng(20240601)  # fixed: dedup never depends on the sampling seed
_PERM_A = _perm_rng.integers(1, 2**63, size=_NUM_PERM, dtype=np.uint64) | np.uint64(1)
_PERM_B = _perm_rng.integers(0, 2**63, size=_NUM_PERM, dtype=np.uint64)


class _Vocab(dict):
    """word -> small id, assigned on first sight (ids in insertion order, from 1)."""

    def __missing__(self, word: str) -> int:
        value = self[word] = len(self) + 1
        return value


def _band_keys(sig: np.ndarray) -> np.ndarray:
    """One int per (doc, band): the band's rows mixed into 60 bits, band number in the low 4."""
    rows = sig.reshape(len(sig), _BANDS, _ROWS)
    with np.errstate(over="ignore"):
        mixed = np.zeros(rows.shape[:2], dtype=np.uint64)
        for r in range(_ROWS):
            mixed = (mixed ^ rows[:, :, r]) * _M1
    mixed = (mixed >> np.uint64(4) << np.uint64(4)) | np.arange(_BANDS, dtype=np.uint64)[None, :]
    return mixed


def _shingles(texts: Sequence[str]) -> tuple[np.ndarray, np.ndarray]:
    """Word 3-shingle hashes of every text, concatenated; and each text's offset.
    Texts under 3 words are padded, so every text has at least one shingle."""
    vocab = _Vocab()
    ids: list[int] = []
    lengths = np.empty(len(texts), dtype=np.int64)
    lookup = vocab.__getitem__
    for i, text in enumerate(texts):
        words = text.split()
        ids.extend(map(lookup, words))
        pad = max(0, 3 - len(words))
        if pad:
            ids.extend([0] * pad)  # 0 is the padding word
        lengths[i] = len(words) + pad
    word_hash = np.zeros(len(vocab) + 1, dtype=np.uint64)
    word_hash[1:] = [zlib.crc32(w.encode("utf-8")) + 1 for w in vocab]  # stable across runs, unlike hash()
    h = word_hash[np.asarray(ids, dtype=np.int64)]
    with np.errstate(over="ignore"):
        s = h[:-2] * _M1 + h[1:-1] * _M2 + h[2:] if len(h) >= 3 else np.empty(0, dtype=np.uint64)
    ends = np.cumsum(lengths)
    valid = np.ones(len(s), dtype=bool)
    for k in (1, 2):
        idx = ends - k
        valid[idx[idx < len(s)]] = False
    shingles = s[valid]
    offsets = np.concatenate(([0], np.cumsum(lengths - 2)))
    return shingles, offsets


def _minhash(shingles: np.ndarray, offsets: np.ndarray) -> np.ndarray:
    """(docs, _NUM_PERM) MinHash signatures, computed in chunks of documents."""
    n_docs = len(offsets) - 1
    sig = np.empty((n_docs, _NUM_PERM), dtype=np.uint64)
    start = 0
    with np.errstate(over="ignore"):
        while start < n_docs:
            end = int(np.searchsorted(offsets, offsets[start] + _CHUNK_SHINGLES, side="right")) - 1
            end = min(max(end, start + 1), n_docs)
            lo, hi = offsets[start], offsets[end]
            hv = (shingles[lo:hi][None, :] * _PERM_A[:, None] + _PERM_B[:, None]) >> np.uint64(32)
            sig[start:end] = np.minimum.reduceat(hv, offsets[start:end] - lo, axis=1).T
            start = end
    return sig


@dataclass
class DedupResult:
    kept: list[int]                              # indices into the input, in order
    exact: int = 0
    near: int = 0
    near_pairs: list[tuple[int, int]] = field(default_factory=list)  # (removed, kept-original)
    template: str | None = None                  # None, or one of TEMPLATE_MODES
    template_merged: int = 0                     # removed beyond what plain de-duplication removes
    largest_template: int = 0                    # prompts that share the commonest template


def dedupe(prompts: Sequence[str], threshold: float = DEFAULT_THRESHOLD, template: str | None = None,
           suffixes: Sequence[str] | None = None) -> DedupResult:
    """Indices of the prompts to keep: the first of each group of exact
    duplicates (normalised text), then the first of near-duplicates whose
    word-3-shingle Jaccard is >= `threshold` (>= 1.0: exact only).
    `template` ("values" or "names") compares the prompts' templates
    (`template_text`); `suffixes[i]` (image hashes) is added to prompt i's
    text after normalising, so it is never mistaken for a template value."""
    extra = suffixes if suffixes is not None else [""] * len(prompts)
    plain = [normalise(p) + (" " + x if x else "") for p, x in zip(prompts, extra, strict=True)]
    if template is None:
        return _dedupe_normed(plain, threshold)
    if template not in TEMPLATE_MODES:
        raise ValueError(f"template mode must be one of {', '.join(TEMPLATE_MODES)}, got {template!r}")
    templated = [normalise(template_text(p, names=template == "names")) + (" " + x if x else "")
                 for p, x in zip(prompts, extra, strict=True)]
    result = _dedupe_normed(templated, threshold)
    result.template = template
    result.template_merged = len(_dedupe_normed(plain, threshold).kept) - len(result.kept)
    result.largest_template = max(Counter(templated).values(), default=0)
    return result


def _dedupe_normed(normed: list[str], threshold: float) -> DedupResult:
    prompts = normed
    first: dict[str, int] = {}
    unique: list[int] = []
    for i, t in enumerate(normed):
        if t not in first:
            first[t] = i
            unique.append(i)
    result = DedupResult(kept=[], exact=len(prompts) - len(unique))
    if threshold >= 1.0 or len(unique) < 2:
        result.kept = unique
        return result
    shingles, offsets = _shingles([normed[i] for i in unique])
    sig = _minhash(shingles, offsets)
    keys = _band_keys(sig)
    # Only a doc with a band key that some other doc shares can have a
    # near-duplicate: the Python loop below visits those docs alone.
    _, inverse, counts = np.unique(keys, return_inverse=True, return_counts=True)
    shared_mask = (counts[inverse.reshape(-1)] > 1).reshape(keys.shape)
    buckets: dict[int, list[int]] = defaultdict(list)
    sets: dict[int, np.ndarray] = {}

    def shingle_set(j: int) -> np.ndarray:
        got = sets.get(j)
        if got is None:
            got = sets[j] = np.unique(shingles[offsets[j]:offsets[j + 1]])
        return got

    is_dup = np.zeros(len(unique), dtype=bool)
    for j in np.flatnonzero(shared_mask.any(axis=1)).tolist():
        my_keys = keys[j][shared_mask[j]].tolist()
        shared: Counter[int] = Counter()
        for key in my_keys:
            members = buckets.get(key)
            if members:
                shared.update(members[-_BUCKET_RECENT:])
        duplicate_of = None
        if shared:
            mine = shingle_set(j)
            for cand, _count in sorted(shared.items(), key=lambda kv: (-kv[1], kv[0]))[:_MAX_VERIFY]:
                other = shingle_set(cand)
                inter = np.intersect1d(mine, other, assume_unique=True).size
                if inter / (mine.size + other.size - inter) >= threshold:
                    duplicate_of = cand
                    break
        if duplicate_of is not None:
            is_dup[j] = True
            result.near += 1
            result.near_pairs.append((unique[j], unique[duplicate_of]))
            sets.pop(j, None)
            continue
        for key in my_keys:
            buckets[key].append(j)
    kept_local = np.flatnonzero(~is_dup).tolist()
    result.kept = [unique[j] for j in kept_local]
    return result


# ---------------------------------------------------------------- allocation and drawing


def allocate(sizes: dict[str, int], n: int) -> dict[str, int]:
    """Split `n` over strata proportionally to `sizes` (largest remainder),
    at least one per stratum and never more than a stratum holds.
    Raises ValueError when n is smaller than the number of strata."""
    strata = sorted(sizes)
    total = sum(sizes.values())
    if any(sizes[s] <= 0 for s in strata):
        raise ValueError("every stratum needs at least one record")
    if n >= total:
        return dict(sizes)
    if n < len(strata):
        raise ValueError(f"-n {n} is smaller than the number of strata ({len(strata)}): "
                         f"at least one case per stratum needs -n {len(strata)} or more")
    quota = {s: n * sizes[s] / total for s in strata}
    alloc = {s: min(sizes[s], max(1, math.floor(quota[s]))) for s in strata}
    diff = n - sum(alloc.values())
    while diff > 0:  # hand out the rest by largest remainder
        order = sorted((s for s in strata if alloc[s] < sizes[s]), key=lambda s: (-(quota[s] - alloc[s]), -sizes[s], s))
        for s in order[:diff]:
            alloc[s] += 1
        diff = n - sum(alloc.values())
    while diff < 0:  # the minimum of one overshot: take back where the excess is largest
        order = sorted((s for s in strata if alloc[s] > 1), key=lambda s: (quota[s] - alloc[s], sizes[s], s))
        for s in order[:-diff]:
            alloc[s] -= 1
        diff = n - sum(alloc.values())
    return alloc


def strata_sizes(logs: LoadedLogs) -> Counter[str]:
    """Records per stratum, as logged (duplicates count: they are traffic);
    the strata `lineup sample` reports, and the traffic mix `lineup decide
    --mix-from` takes."""
    return Counter(r.stratum for r in logs.records)


@dataclass
class StratumRow:
    stratum: str
    logged: int
    unique: int
    sampled: int


@dataclass
class SampleResult:
    logs: LoadedLogs
    dedup: DedupResult
    rows: list[StratumRow]
    chosen: list[LogRecord]
    n_requested: int
    threshold: float


def sample_records(logs: LoadedLogs, n: int, seed: int = 0, threshold: float = DEFAULT_THRESHOLD,
                   template: str | None = None) -> SampleResult:
    """Dedupe, allocate and draw: the records of the sample, by stratum then log order."""
    if n < 1:
        raise ValueError("-n must be at least 1")
    records = logs.records
    suffixes = [" ".join(f"image{img.sha256}" for img in r.images) for r in records]
    dedup = dedupe([record_key(r) for r in records], threshold, template=template, suffixes=suffixes)
    logged = strata_sizes(logs)
    by_stratum: dict[str, list[LogRecord]] = defaultdict(list)
    for i in dedup.kept:
        by_stratum[records[i].stratum].append(records[i])
    sizes = {s: len(v) for s, v in by_stratum.items()}
    alloc = allocate(sizes, n) if sizes else {}
    chosen: list[LogRecord] = []
    for s in sorted(by_stratum):
        members = by_stratum[s]
        rng = random.Random(f"{seed}:{s}")
        picks = sorted(rng.sample(range(len(members)), alloc[s]))
        chosen.extend(members[k] for k in picks)
    rows = [StratumRow(s, logged[s], sizes.get(s, 0), alloc.get(s, 0)) for s in sorted(logged)]
    return SampleResult(logs, dedup, rows, chosen, n, threshold)


def _slug(text: str) -> str:
    slug = re.sub(r"[^A-Za-z0-9._-]+", "-", unicodedata.normalize("NFKD", text)).strip("-.").lower()
    return slug[:40] or "case"


_IMAGE_SUFFIX = {"image/png": ".png", "image/jpeg": ".jpg", "image/gif": ".gif", "image/webp": ".webp"}
MAX_URL_TAG = 500


@dataclass
class SampleOutput:
    cases: list[dict[str, Any]]
    images: dict[str, bytes]          # path relative to the set's folder -> bytes


def image_folder(out: str | Path) -> str:
    """The folder beside a set that holds its sampled images: `SET.images`."""
    return Path(out).stem + ".images"


def to_cases(result: SampleResult, images_dir: str = "images", keep_answers: bool = False) -> SampleOutput:
    """Sample-set case objects (id, category = stratum, system, prompt or
    messages, images, tags; with `keep_answers`, the answer the log holds)
    and the image files they name (under `images_dir`, by content hash)."""
    cases = []
    images: dict[str, bytes] = {}
    used: set[str] = set()
    counters: Counter[str] = Counter()
    name = Path(result.logs.path).name
    for rec in result.chosen:
        slug = _slug(rec.stratum)
        counters[slug] += 1
        case_id = f"{slug}-{counters[slug]:03d}"
        while case_id in used:
            counters[slug] += 1
            case_id = f"{slug}-{counters[slug]:03d}"
        used.add(case_id)
        case: dict[str, Any] = {"id": case_id, "category": rec.stratum[:200]}
        if rec.system:
            case["system"] = rec.system
        if rec.history:
            case["messages"] = [{"role": role, "content": text} for role, text in rec.history] + \
                [{"role": "user", "content": rec.prompt}]
        else:
            case["prompt"] = rec.prompt
        if rec.images:
            paths = []
            for img in rec.images:
                rel = f"{images_dir}/{img.sha256[:20]}{_IMAGE_SUFFIX.get(img.mime, '.img')}"
                images[rel] = img.data
                paths.append(rel)
            case["images"] = paths
        tags = ["sampled", f"{result.logs.by}={rec.stratum}", f"source:{name}:{rec.source or rec.line}"]
        tags += [f"image-url:{url[:MAX_URL_TAG]}" for url in rec.image_urls]
        case["tags"] = tags
        if keep_answers and rec.logged is not None and rec.logged.text:
            case["logged"] = {k: v for k, v in asdict(rec.logged).items() if v is not None}
        cases.append(case)
    return SampleOutput(cases, images)


def write_jsonl(cases: Sequence[dict[str, Any]], out: str | Path,
                check: Callable[[Path], object] | None = None) -> None:
    """Write atomically: a partial file never replaces a good one, and no
    temporary file is left behind, whatever fails (the disk, `check`, Ctrl-C).
    `check(tmp)` runs on the written file before it takes `out`'s place."""
    out = Path(out)
    tmp = out.with_name(out.name + ".tmp")
    try:
        with tmp.open("w", encoding="utf-8") as f:
            for case in cases:
                f.write(json.dumps(case, ensure_ascii=False) + "\n")
        if check is not None:
            check(tmp)
        tmp.replace(out)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise


def write_set(output: SampleOutput, out: str | Path, check: Callable[[Path], object] | None = None) -> None:
    """The images (each written whole, then renamed), then the set, as
    `write_jsonl` writes it. If anything fails, the images this call added
    are removed again (and their folder, if it made it): nothing is left but
    what was there before."""
    out = Path(out)
    added: list[Path] = []
    made: list[Path] = []
    try:
        for rel, data in sorted(output.images.items()):
            path = out.parent / rel
            existed = path.exists()
            if existed and path.is_file() and path.read_bytes() == data:
                continue                      # named by content: already there
            if not path.parent.is_dir():
                path.parent.mkdir()
                made.append(path.parent)
            tmp = path.with_name(path.name + ".tmp")
            try:
                tmp.write_bytes(data)
                tmp.replace(path)
            except BaseException:
                tmp.unlink(missing_ok=True)
                raise
            if not existed:
                added.append(path)
        write_jsonl(output.cases, out, check=check)
    except BaseException:
        for path in added:
            path.unlink(missing_ok=True)
        for folder in made:
            try:
                folder.rmdir()
            except OSError:
                pass
        raise
