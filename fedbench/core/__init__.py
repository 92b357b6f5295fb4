"""The bottom layer: value types and base classes every other layer shares.

Nothing here imports another fedbench package (only `fedbench.errors` and
`fedbench.paths`, which sit in this layer too); tests/test_layers.py checks
it. A type belongs here when modules of two different layers exchange it:

- device.py   a fleet device (`DeviceSpec`), its emulated state between
              rounds (`DeviceState`) and a population device's draw (`Traits`)
- plans.py    memory plans of one optimizer step (`Plan`, `PlanLog`)
- workload.py what one training step asks of a device (`Workload`)
- meter.py    what a round costs (`Cost`), what is trained (`TrainJob`,
              `WatchJob`) and the `Meter` interface that costs it
- records.py  the RoundReport and its keys: the one spelling of a record
- seating.py  which Flower node carries a device's message (`Seating`)
"""
