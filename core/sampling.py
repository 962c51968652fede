"""Stratified sampling of prompts from real request logs into a sample set
(`lineup sample`).

Inputs: JSONL (one object per line), CSV/TSV with a header, or an `llm` CLI
`logs.db` (SQLite, table `responses`). Steps, each deterministic:

1. read the records: prompt text, stratum (the `--by` field), system prompt;
2. drop duplicates: exact (after normalisation) and near-duplicates, found
   with MinHash over word 3-shingles and LSH banding (linear in the input,
   never all pairs), confirmed by the exact shingle Jaccard; the first
   occurrence in log order is kept;
3. allocate `n` over the strata proportionally (largest remainder), at least
   one per stratum;
4. draw within each stratum with a generator seeded by (seed, stratum), so a
   stratum's draw does not change when another stratum appears.
"""

from __future__ import annotations

import csv
import io
import json
import math
import random
import re
import sqlite3
import unicodedata
import zlib
from collections import Counter, defaultdict
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from core.inputs import InputError, lines, open_input, shown_name
from core.jsonl import json_objects

PROMPT_FIELD_NAMES = ("prompt", "input", "question", "message", "messages", "text", "query", "instruction",
                      "user_input", "content")
NONE_STRATUM = "(none)"
DEFAULT_THRESHOLD = 0.8

_SQLITE_MAGIC = b"SQLite format 3\x00"
_TOKEN = re.compile(r"\w+")


class LogError(ValueError):
    """Unusable log input; the message names the file and line (or row)."""


@dataclass(frozen=True, slots=True)
class LogRecord:
    prompt: str
    stratum: str
    line: int                 # line in a JSONL/CSV file, rowid in SQLite
    system: str | None = None


@dataclass
class LoadedLogs:
    path: str
    kind: str                 # "jsonl" | "csv" | "sqlite"
    prompt_field: str
    by: str
    records: list[LogRecord]
    skipped: int = 0          # records without a (non-empty) prompt
    first_skipped: int | None = None


# ---------------------------------------------------------------- reading logs


def read_logs(path: str | Path, by: str, prompt_field: str | None = None) -> LoadedLogs:
    """Read a log file of any supported kind (detected from its content).
    Opened as `core.inputs.open_input` opens any input: a regular file only,
    bounded in size (an `llm` logs.db, which SQLite reads itself, in kind only)."""
    path = Path(path)
    try:
        with open_input(path, limit=0) as f:
            head = f.read(64)
    except InputError as exc:
        raise LogError(str(exc)) from None
    if head.startswith(_SQLITE_MAGIC):
        return _read_sqlite(path, by, prompt_field)
    try:
        f = open_input(path)
    except InputError as exc:
        raise LogError(str(exc)) from None
    with f:
        suffix = path.suffix.lower()
        if suffix in (".csv", ".tsv"):
            return _read_csv(f, path, by, prompt_field, delimiter="\t" if suffix == ".tsv" else ",")
        if suffix in (".jsonl", ".ndjson", ".json"):
            return _read_jsonl(f, path, by, prompt_field)
        if head.lstrip(b"\xef\xbb\xbf \t\r\n").startswith(b"{"):
            return _read_jsonl(f, path, by, prompt_field)
        return _read_csv(f, path, by, prompt_field, delimiter=",")


def _pick_field(available: Iterable[str], wanted: str | None, what: str, where: str) -> str:
    """The field named `wanted` (case-insensitively), or the first common prompt name."""
    names = list(available)
    lower = {n.lower(): n for n in reversed(names)}
    if wanted is not None:
        if wanted in names:
            return wanted
        if wanted.lower() in lower:
            return lower[wanted.lower()]
        raise LogError(f"{where}: no {what} field {wanted!r}; fields: {', '.join(names) or '(none)'}")
    for candidate in PROMPT_FIELD_NAMES:
        if candidate in lower:
            return lower[candidate]
    raise LogError(
        f"{where}: no prompt field found (looked for {', '.join(PROMPT_FIELD_NAMES)}); "
        f"fields: {', '.join(names) or '(none)'}; name one with --prompt-field"
    )


def _prompt_text(value: Any) -> str | None:
    """Prompt text from a string, or the last user message of a chat `messages` list."""
    if isinstance(value, str):
        return value
    if isinstance(value, list) and value and all(isinstance(m, dict) for m in value):
        users = [m for m in value if m.get("role") == "user"]
        if not users:
            return None
        content = users[-1].get("content")
        if isinstance(content, list):  # content parts
            content = "\n".join(p.get("text", "") for p in content if isinstance(p, dict) and p.get("type") == "text")
        return content if isinstance(content, str) else None
    raise TypeError(type(value).__name__)


def _stratum(value: Any) -> str:
    if value is None or value == "":
        return NONE_STRATUM
    if isinstance(value, str):
        return value
    if isinstance(value, (dict, list)):
        return json.dumps(value, sort_keys=True, ensure_ascii=False)
    return str(value)


def _dig(obj: Any, dotted: str) -> tuple[bool, Any]:
    """(found, value) for a dotted path into nested objects."""
    if isinstance(obj, dict) and dotted in obj:
        return True, obj[dotted]
    cur = obj
    for part in dotted.split("."):
        if isinstance(cur, dict) and part in cur:
            cur = cur[part]
        else:
            return False, None
    return True, cur


def _read_jsonl(f, path: Path, by: str, prompt_field: str | None) -> LoadedLogs:
    out = LoadedLogs(str(path), "jsonl", prompt_field or "", by, [])
    by_seen = False
    keys_seen: list[str] = []
    shown = shown_name(path)
    for lineno, where, obj, problem in json_objects(lines(f, shown), shown, "a log record"):
        if obj is None:   # then `problem` says why
            raise LogError(problem)
        if not out.prompt_field:
            out.prompt_field = _pick_field(obj.keys(), prompt_field, "prompt", where)
        if not keys_seen:
            keys_seen = list(obj.keys())
        found, raw_stratum = _dig(obj, by)
        by_seen = by_seen or found
        try:
            text = _prompt_text(obj.get(out.prompt_field))
        except TypeError as exc:
            raise LogError(f"{where}: {out.prompt_field}: expected text, got {exc}") from None
        system = obj.get("system") if isinstance(obj.get("system"), str) else None
        _add(out, text, raw_stratum, lineno, system)
    if not out.records and not out.skipped:
        raise LogError(f"{shown}: no records")
    if not by_seen:
        raise LogError(f"{shown}: no record has the field {by!r} given to --by; fields: {', '.join(keys_seen)}")
    return out


def _add(out: LoadedLogs, text: str | None, raw_stratum: Any, line: int, system: str | None) -> None:
    if text is None or not text.strip():
        out.skipped += 1
        if out.first_skipped is None:
            out.first_skipped = line
        return
    out.records.append(LogRecord(text, _stratum(raw_stratum), line, system or None))


def _read_csv(binary, path: Path, by: str, prompt_field: str | None, delimiter: str) -> LoadedLogs:
    csv.field_size_limit(2**31 - 1)   # a field is bounded by the file, which `open_input` bounded
    out = LoadedLogs(str(path), "csv", "", by, [])
    shown = shown_name(path)
    try:
        f = io.TextIOWrapper(binary, encoding="utf-8-sig", newline="")
        reader = csv.reader(f, delimiter=delimiter)
        try:
            header = next(reader)
        except StopIteration:
            raise LogError(f"{shown}: empty file (expected a header row)") from None
        header = [h.strip() for h in header]
        where = f"{shown}:1"
        out.prompt_field = _pick_field(header, prompt_field, "prompt", where)
        by_col = _pick_field(header, by, "--by", where)
        p_idx, b_idx = header.index(out.prompt_field), header.index(by_col)
        s_idx = next((i for i, h in enumerate(header) if h.lower() == "system"), None)
        try:
            for row in reader:
                if not row or (len(row) == 1 and not row[0].strip()):
                    continue
                line = reader.line_num
                if len(row) > len(header):
                    raise LogError(f"{shown}:{line}: {len(row)} fields but the header has {len(header)}")
                get = lambda i: row[i] if i is not None and i < len(row) else None  # noqa: E731
                _add(out, get(p_idx), get(b_idx), line, get(s_idx))
        except csv.Error as exc:
            raise LogError(f"{shown}:{reader.line_num}: bad CSV: {exc}") from None
    except UnicodeDecodeError as exc:
        raise LogError(f"{shown}: not UTF-8 text (near byte {exc.start + 1} of a read block)") from None
    if not out.records and not out.skipped:
        raise LogError(f"{shown}: no data rows")
    return out


def _read_sqlite(path: Path, by: str, prompt_field: str | None) -> LoadedLogs:
    """An `llm` CLI logs.db: rows of the `responses` table."""
    shown = shown_name(path)
    try:
        conn = sqlite3.connect(f"file:{path.resolve()}?mode=ro", uri=True)
    except sqlite3.Error as exc:
        raise LogError(f"{shown}: cannot open the SQLite database: {exc}") from None
    try:
        try:
            cols = [r[1] for r in conn.execute("PRAGMA table_info(responses)")]
        except sqlite3.DatabaseError as exc:
            raise LogError(f"{shown}: not a readable SQLite database: {exc}") from None
        if not cols:
            raise LogError(f"{shown}: no 'responses' table (expected an `llm` logs.db)")
        where = f"{shown}: table responses"
        pcol = _pick_field(cols, prompt_field or "prompt", "prompt", where)
        bcol = _pick_field(cols, by, "--by", where)
        scol = "system" if "system" in cols else None
        q = lambda c: '"' + c.replace('"', '""') + '"'  # noqa: E731
        sql = f"SELECT rowid, {q(pcol)}, {q(bcol)}, {q(scol) if scol else 'NULL'} FROM responses ORDER BY rowid"
        out = LoadedLogs(str(path), "sqlite", pcol, bcol, [])
        try:
            for rowid, prompt, stratum, system in conn.execute(sql):
                if prompt is not None and not isinstance(prompt, str):
                    raise LogError(f"{shown}: responses rowid {rowid}: {pcol}: expected text, got {type(prompt).__name__}")
                _add(out, prompt, stratum, rowid, system if isinstance(system, str) else None)
        except sqlite3.DatabaseError as exc:
            raise LogError(f"{shown}: reading responses failed: {exc}") from None
    finally:
        conn.close()
    if not out.records and not out.skipped:
        raise LogError(f"{shown}: the responses table is empty")
    return out


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


def dedupe(prompts: Sequence[str], threshold: float = DEFAULT_THRESHOLD) -> DedupResult:
    """Indices of the prompts to keep: the first of each group of exact
    duplicates (normalised text), then the first of near-duplicates whose
    word-3-shingle Jaccard is >= `threshold` (>= 1.0: exact only)."""
    normed = [normalise(p) for p in prompts]
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


def sample_records(logs: LoadedLogs, n: int, seed: int = 0, threshold: float = DEFAULT_THRESHOLD) -> SampleResult:
    """Dedupe, allocate and draw: the records of the sample, by stratum then log order."""
    if n < 1:
        raise ValueError("-n must be at least 1")
    records = logs.records
    dedup = dedupe([r.prompt for r in records], threshold)
    logged = Counter(r.stratum for r in records)
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


def to_cases(result: SampleResult) -> list[dict[str, Any]]:
    """Sample-set case objects (id, category = stratum, prompt, tags)."""
    cases = []
    used: set[str] = set()
    counters: Counter[str] = Counter()
    for rec in result.chosen:
        slug = _slug(rec.stratum)
        counters[slug] += 1
        case_id = f"{slug}-{counters[slug]:03d}"
        while case_id in used:
            counters[slug] += 1
            case_id = f"{slug}-{counters[slug]:03d}"
        used.add(case_id)
        case: dict[str, Any] = {"id": case_id, "category": rec.stratum[:200], "prompt": rec.prompt}
        if rec.system:
            case["system"] = rec.system
        where = "row" if result.logs.kind == "sqlite" else "line"
        case["tags"] = ["sampled", f"{result.logs.by}={rec.stratum}", f"source:{Path(result.logs.path).name}:{where}{rec.line}"]
        cases.append(case)
    return cases


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
