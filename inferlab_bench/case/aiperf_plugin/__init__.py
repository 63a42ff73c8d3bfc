"""AIPerf plugin registry of inferlab-bench: credit-waiting and reset-after-warmup strategies."""
