"""Device profiles, the emulator (cost model) and the meters."""
