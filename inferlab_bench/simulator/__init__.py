"""A simulated OpenAI-compatible inference server with ground truth and faults."""
