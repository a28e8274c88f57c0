"""Megatron-Core's `pipeline_model_parallel_layout` (`--pipeline-model-parallel-layout`, MCORE-PPLAYOUT): which
layers every pipeline chunk builds, written as a string such as "Et|(tt|)*30mL" or as a list of lists of layer
names. Parsed here into one string per chunk in model order (chunk j = vpp rank · pp + pp rank), each of the
symbols E (embedding), t (decoder layer), m (MTP layer) and L (output layer and loss); engine.cost.layout checks
it against pp, vpp and the model (what Megatron-Core's PipelineParallelLayerLayout asserts) and prices it.

The string is read as Megatron-Core reads it (`parse_str_to_list`): commas are cosmetic and dropped, every
"(group)*n" is unrolled (groups do not nest), then every "x*n" (one symbol repeated), then the chunks are split at
"|". Unlike Megatron-Core, the unrolling is bounded: a file is untrusted input, and "t*999999999" must be a
diagnostic, not a gigabyte string.
"""

from __future__ import annotations

import re

# Symbols of a layout string and the LayerType names of its list form (Megatron-Core's LayerType members).
SYMBOLS = {"E": "embedding", "t": "decoder", "m": "mtp", "L": "loss"}
_BY_NAME = {name: sym for sym, name in SYMBOLS.items()}
# Bounds on what a file may ask for: a layout names every layer once, so a few thousand symbols cover any model
# and pipeline; the source text is bounded before any unrolling.
MAX_TEXT = 4096
MAX_SYMBOLS = 65_536
_GROUP = re.compile(r"\(([^)]+)\)\*(\d+)")
_ONE = re.compile(r"(.)\*(\d+)")


class LayerLayoutError(ValueError):
    """A layout Megatron-Core could not parse (the message says what and where)."""


def parse_layout_text(text: str) -> tuple[str, ...]:
    """The chunks of a layout string, in model order. Raises LayerLayoutError on a symbol Megatron-Core does not
    know or an unrolling beyond MAX_SYMBOLS."""
    if len(text) > MAX_TEXT:
        raise LayerLayoutError(f"the layout is {len(text):,} characters long (at most {MAX_TEXT:,} are read)")
    flat = text.replace(",", "")
    budget = [MAX_SYMBOLS - len(flat)]
    for pattern in (_GROUP, _ONE):
        flat = pattern.sub(lambda m: _unrolled(m, budget), flat)
    chunks = tuple(flat.split("|"))
    for chunk in chunks:
        bad = next((c for c in chunk if c not in SYMBOLS), None)
        if bad is not None:
            raise LayerLayoutError(f"{bad!r} is not a layer symbol (Megatron-Core's are E embedding, t decoder, "
                                   "m MTP, L loss; chunks are separated by '|', '(…)*n' and 'x*n' repeat)")
    return chunks


def _unrolled(match: re.Match[str], budget: list[int]) -> str:
    """One "(group)*n" or "x*n", repeated, charged against the symbols left in `budget`."""
    body, count = match.group(1), int(match.group(2))
    grown = len(body) * count - len(match.group(0))
    if grown > budget[0]:
        raise LayerLayoutError(f"{match.group(0)!r} unrolls the layout past {MAX_SYMBOLS:,} symbols")
    budget[0] -= grown
    return body * count


def layout_from_names(rows: list[list[str]]) -> tuple[str, ...]:
    """The chunks of a layout written as a list of lists of LayerType names ("embedding", "decoder", "mtp",
    "loss"; case and spaces ignored, as Megatron-Core reads them)."""
    chunks = []
    for row in rows:
        syms = []
        for name in row:
            key = name.strip().lower()
            if key not in _BY_NAME:
                raise LayerLayoutError(f"{name!r} is not a layer type (Megatron-Core's are "
                                       f"{', '.join(_BY_NAME)})")
            syms.append(_BY_NAME[key])
        chunks.append("".join(syms))
    if sum(len(c) for c in chunks) > MAX_SYMBOLS:
        raise LayerLayoutError(f"the layout names more than {MAX_SYMBOLS:,} layers")
    return tuple(chunks)


def stage_rows(chunks: tuple[str, ...], pp: int) -> tuple[tuple[str, tuple[str, ...]], ...]:
    """The layout as a table of pipeline stages (rows) by virtual chunks (columns), each cell the chunk's layers in
    words ("embedding, decoder×2"), consecutive stages that hold the same grouped ("1-6"), as Megatron-Core logs
    it when it parses a layout. Empty where the chunks do not divide over `pp`."""
    if pp < 1 or len(chunks) % pp:
        return ()
    v = len(chunks) // pp
    cells = [tuple(_chunk_words(chunks[c * pp + i]) for c in range(v)) for i in range(pp)]
    rows: list[tuple[str, tuple[str, ...]]] = []
    start = 0
    for i in range(1, pp + 1):
        if i == pp or cells[i] != cells[start]:
            rows.append((str(start) if i - 1 == start else f"{start}-{i - 1}", cells[start]))
            start = i
    return tuple(rows)


def _chunk_words(chunk: str) -> str:
    """One chunk's layers in words, runs counted: "Ettt" -> "embedding, decoder×3"."""
    words: list[str] = []
    for sym, run in ((m.group(0)[0], len(m.group(0))) for m in re.finditer(r"(.)\1*", chunk)):
        words.append(SYMBOLS[sym] + (f"×{run}" if run > 1 else ""))
    return ", ".join(words) or "(empty)"


def layout_vpp(chunks: int, pp: int) -> int | None:
    """The vpp a layout of `chunks` chunks sets at `pp` (Megatron-LM takes vpp = chunks / pp), None where they do
    not divide over pp or leave one chunk per stage (no interleaving)."""
    if pp < 1 or chunks % pp or chunks // pp < 2:
        return None
    return chunks // pp


def layout_text(chunks: tuple[str, ...]) -> str:
    """The layout as Megatron-LM's flag takes it: the chunks joined by '|' (runs of one chunk written (c|)*n
    would be shorter; the plain form reads back the same)."""
    return "|".join(chunks)
