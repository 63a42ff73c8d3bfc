"""Token counting for preparation, with ``ChatTokenizer`` as its one face.

``tokenize`` (``ChatTokenizer``: render, count, bound; ``fingerprint``), ``template`` (chat
templates rendered from plans), ``pretoken`` (exact counts by word), ``patterns`` (the split
patterns read to the character), ``bounds`` (proved per-segment bounds), ``counting`` (counts
on every core), ``background`` (the tokenizer loaded on a thread) and ``store`` (the kept
backend, verified plans and word memory for warm runs). Nothing here imports the stage.
"""

from inferlab_bench.prepare.tokens.tokenize import ChatTokenizer, fingerprint

__all__ = ["ChatTokenizer", "fingerprint"]
