"""Case stage: prefix-cache reset, AIPerf load, records -> BenchClientResult."""
