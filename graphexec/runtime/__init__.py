"""The emulated device runtime: profiles, memory, streams, events, simulation."""
