"""Hand-built workloads: the emulator tested without measuring a model."""

from __future__ import annotations

from fedbench.core.workload import OpCost, Workload

MB = 1 << 20


def synthetic_workload(
    batch: int,
    gflop_per_sample: float = 1.0,
    act_mb_per_sample: float = 20.0,
    params_m: float = 3.0,
    input_shape: tuple[int, ...] = (3, 64, 64),
) -> Workload:
    """A CNN-like step: dense compute, elementwise traffic, a momentum-SGD update."""
    flops = gflop_per_sample * 1e9 * batch
    act = act_mb_per_sample * MB * batch
    params = params_m * 1e6 * 4

    def costs(scale: float) -> dict[str, OpCost]:
        return {
            "dense": OpCost(0.9 * flops * scale, (0.2 * act + params) * scale),
            "depthwise": OpCost(0.05 * flops * scale, 0.1 * act * scale),
            "elementwise": OpCost(0.01 * flops * scale, 2.0 * act * scale),
            "movement": OpCost(0.0, 0.1 * act * scale),
        }

    inputs = 4 * batch
    for d in input_shape:
        inputs *= d
    return Workload(
        model="synthetic",
        input_shape=input_shape,
        batch_size=batch,
        plan="full",
        num_params=int(params_m * 1e6),
        forward=costs(1.0),
        backward=costs(2.0),
        optimizer=OpCost(3 * params / 4, 5 * params),
        param_bytes=int(params),
        grad_bytes=int(params),
        optimizer_state_bytes=int(params),
        saved_activation_bytes=int(act),
        workspace_bytes=int(0.1 * act),
        input_bytes=inputs,
    )
