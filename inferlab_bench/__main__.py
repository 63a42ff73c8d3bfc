"""``python -m inferlab_bench`` runs the command line."""

from inferlab_bench.cli import entry

raise SystemExit(entry())
