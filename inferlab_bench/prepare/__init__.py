"""Preparation stage: ShareGPT -> tokenized, admitted, seeded, frozen population."""
