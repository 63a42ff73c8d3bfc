"""What we change in AIPerf: switches, strategy, transport, schedule, hook and priorities."""
