"""Publishing and reproducing results: bundles, reproduction verdicts, peers' files, one page."""
