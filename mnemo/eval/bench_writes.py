"""The write-path benchmark: what `remember` and `forget` leave in the store, on labelled examples.

    examples = build_examples(split="test")                 # mnemo.eval.datasets_writes
    res = run_writes(examples, embedder="hash")
    res.rows, res.aggregates                                # one row per example; sums and means by family

Each example (see `mnemo.eval.datasets_writes`) is played through the public API alone, so the
benchmark measures any implementation of the write path: its steps run in order, one simulated
minute apart, under a user of its own (`Memory.remember(text, user=...)` for a turn,
`Memory.forget(query=..., user=...)` for an API forget); then `Memory.memories(user,
include_inactive=True)` is read once. A memory *comes from* step i when its `turn_id` is the
turn id step i's `WriteReport` returned. A memory *mentions* a value when
`metrics.mentions(text, [value])` holds (whole words, case and punctuation ignored). A memory is
*retired* when its status is not "active" (superseded, forgotten or decayed). A memory is
*negative* when it is flagged `meta["negated"]` or its text carries negation wording
(`NEGATIVE`: not, n't, never, no longer, ...), so "It is not true that X is a citizen of India"
does not count as a positive memory of India.

An example that raises anywhere is a row with its error, scored at the worst value of every
metric that applies to its family (0 for the rates below, 1 for collateral), never dropped.

## Metrics (numerator / denominator; what counts)

* **duplicate precision** (family duplicate_distinct): stored_distinct / distinct_given, summed
  over the family's examples (micro; the 300-ticket example weighs 300). distinct_given = the
  example's statements, each a different fact (different identifier, or different subject of
  one relation). A statement counts as stored distinct when some *active* memory comes from its
  step and mentions its key value (the identifier, or the object value). A statement merged
  into an earlier one (duplicate, corroboration), one that superseded an earlier one (which
  then is not active), and one the write path stored nothing for, all count 0.
* **paraphrase handled** (duplicate_paraphrase): examples handled / examples. One statement,
  then the same fact in another of the dataset's templates. Handled = every memory that comes
  from the original step and mentions the value is active, at least one exists, and exactly
  one active memory of the user mentions the value (stored once, or corroborated). Also
  reported: **paraphrase superseded original** = examples where a memory from the original step
  was superseded / examples (a paraphrase must never supersede its own original).
* **correction recall** (correction): examples corrected / examples. An old statement, then the
  new value of the same subject and relation, usually in another template. Corrected = at
  least one memory comes from the old step and mentions the old value, every such memory is
  superseded (status "superseded"), and some active memory from the new step mentions the new
  value.
* **correction precision** (correction and correction_negative together, micro over
  supersessions): correct supersessions / all supersessions made. A supersession is a memory
  whose final status is "superseded". Correct = in a correction example, a memory that comes
  from the old step and mentions the old value. Everything else is a false positive: in a
  correction example any other superseded memory (the new statement's, for instance); in a
  correction_negative example every superseded memory (same relation, different subject or
  identifier: nothing may be superseded). NaN when nothing at all was superseded. Also
  reported: **negative kept** (correction_negative) = examples where nothing was retired and
  both statements have an active memory mentioning their value / examples.
* **negation handled** (negation): examples handled / examples. A statement, then its negation
  ("It is not true that ...", "<subject>'s <relation> is no longer <value>"). Handled = at least
  one memory comes from the positive step and mentions the value, every such memory is retired
  (superseded or forgotten, whatever the reason), and no active memory of the user that
  mentions the value is positive (each is negative, as defined above).
* **forget precision / recall / collateral** (forget; `metrics.forgetting`, macro over
  examples): several facts about one subject, then a request naming one of them by its
  relation (a turn "Please forget the <relation> of <subject>." or the API
  `forget(query="the <relation> of <subject>")`). Per example: F = the user's retired memories
  among those that come from the fact steps; T = the memories from the target fact's step
  (a phantom id when there are none, so a fact never stored cannot count as forgotten);
  K = the memories from the other facts' steps. precision = |F ∩ T| / |F| (1 when F is empty),
  recall = |F ∩ T| / |T|, collateral = |F ∩ K| / |K| (0 when K is empty; lower is better).
  Memories of the request turn itself are in none of F, T, K.
* **extraction recall** (extraction; LoCoMo observations, silver): facts found / facts, summed
  over the family's examples (micro). One LoCoMo turn is remembered; its gold facts are the
  observations the dataset attributes to that turn (see `datasets_writes.content_terms` and
  `SUPPORT` for which observations are kept). A fact is found when at least `COVER` = 0.6 of
  its content terms are among the content terms of the memories that come from the turn
  (active or not). Content terms: lowercase alphanumeric tokens, minus the SMART stopwords
  (mnemo/assets/stopwords_english.txt) and the speaker's name, plural-stemmed (Harman's S
  stemmer). Also reported per row: the memories stored and their share of the turn's terms,
  because storing the turn verbatim maximises this recall.

Aggregates are per family and split ("<family> | <split>") and over all examples of a split
("all | <split>"); each carries n (examples), errors (rows with an error), and the metrics that
apply. Counts stay counts (sums), rates are computed from the sums where the definition says
micro, from row means where it says examples.
"""
