"""The release catalog of public Bench datasets: one JSON file per dataset."""
