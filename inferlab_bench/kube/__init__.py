"""Kubernetes engine: run a case through AIPerf's own operator (or raw JobSet manifests)."""
