"""AIPerf plugin registry of inferlab-bench: the reset-after-warmup timing strategy."""
