"""A private simulation node keeps only the Ray processes a simulation uses."""

from __future__ import annotations

import tempfile

import ray
import ray._private.ray_constants as rc
import ray._private.worker as ray_worker

from fedbench.runtime.simulation import _stop_idle_services


@ray.remote
def _square(x: int) -> int:
    return x * x


def test_the_monitors_and_the_dashboard_are_stopped_and_tasks_still_run() -> None:
    with tempfile.TemporaryDirectory(prefix="fbray-") as tmp:
        ray.init(
            include_dashboard=False,
            log_to_driver=False,
            logging_level="ERROR",
            num_cpus=1,
            _temp_dir=tmp,
            object_store_memory=80 * 1024**2,
        )
        try:
            node = ray_worker._global_node
            assert node is not None
            started = [
                t
                for t in (
                    rc.PROCESS_TYPE_MONITOR,
                    rc.PROCESS_TYPE_LOG_MONITOR,
                    rc.PROCESS_TYPE_DASHBOARD,
                )
                if node.all_processes.get(t)
            ]
            assert started  # ray.init starts them: what the step below is for
            procs = [p.process for t in started for p in node.all_processes[t]]
            _stop_idle_services(keep_logs=False)
            for t in started:
                assert not node.all_processes.get(t)
            for p in procs:
                p.wait(timeout=30)  # gone, not just forgotten
            assert ray.get(_square.remote(7)) == 49  # the node still runs work
        finally:
            ray.shutdown()
