"""Device populations: per-device variation drawn from distributions or read from traces."""
