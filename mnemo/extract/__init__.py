"""Extraction: a turn of text in, claims out (subject, slot, value, polarity, time), offline or live.

    extractor = extractor_for(llm)                         # parser or model, chosen once (`Memory.open`)
    extractor(turn, context, cfg)                          # the write path's entry: the claims of one turn
    extract_offline(text, context=(), now=None, cfg=...)   # the offline parser (spaCy) on its own

The offline extractor reads sentences through spaCy's English dependency parser (`parser`, the
only module importing spaCy) and builds one claim per clause from the parse (`clauses`, `claims`),
with the turn-level reading of speakers, commands and notes in `turns`; a long write parses
ahead in a second process (`parse_worker`). The live extractor asks the
model for the same claim schema (`live`). Word lists that remain are data in `words/`.
"""

from ..normalise import sentences
from .claims import EXTRACTOR
from .live import EXTRACT_SCHEMA, Extractor, extractor_for
from .parse_worker import parse_later, start_parse_worker
from .parser import ParserUnavailable, parser_name
from .turns import AHEAD, extract_offline, parsed_texts, read_ahead, read_turn

__all__ = ["AHEAD", "EXTRACT_SCHEMA", "EXTRACTOR", "Extractor", "ParserUnavailable", "extract_offline",
           "extractor_for", "parse_later",
           "parser_name", "parsed_texts", "read_ahead", "read_turn", "sentences",
           "start_parse_worker"]
