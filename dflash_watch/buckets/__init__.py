"""`dflash-watch buckets`: bucket boundaries that minimise padding (CONTRACTS section 8).

A length-bucketed loader pads every sample of bucket ``(b[i-1], b[i]]`` to
``b[i]``; the boundaries decide how many of the tokens a GPU multiplies are
padding. This package finds the boundaries that make that number smallest,
exactly, and says what given boundaries cost on the same lengths.

* ``optimal``  the exact dynamic programme over the distinct lengths (numpy)
* ``lengths``  reading lengths from .npy, .txt, .jsonl and .pt files
* ``batching`` filling token-budget batches per bucket, as a loader does
* ``plan``     one analysis of a length distribution (what the command prints)
* ``report``   that analysis as text for a person, or as section 8 JSON

Nothing here is imported by ``dflash-watch --help``: numpy comes in only
when the command runs.
"""
