import os
import sys

sys.path.insert(0, os.path.dirname(__file__))


def pytest_addoption(parser):
    parser.addoption("--long", action="store_true", default=False,
                     help="hardening: fuzz with a budget 10x larger, random (not derandomized) examples")


# every pass checks its ensures in the tests (and in the CLI runs they start)
os.environ["GRAPHEXEC_CHECK"] = "1"
import graphexec.passes.base  # noqa: E402

graphexec.passes.base.CHECK_CONTRACTS = True


# The slow tier (`pytest -m slow`; .ci/run runs it after the quick tier). A test is slow when it
# runs one of the larger light models (the quick tier keeps squeezenet and shufflenet), or is named
# here with why; tests/e2e/test_golden.py marks its own cases (a fixed sample stays quick).
HEAVY_LIGHT_MODELS = ("vgg19", "densenet121", "resnet50", "zfnet512", "alexnet", "inception_v1", "inception_v2")
SLOW = {
    "tests/e2e/test_real_models.py": "the real-model corpus (fetched from registries, run against onnxruntime)",
    "tests/hardening/test_fuzz.py": "fuzzing with a budget",
    "tests/e2e/test_conformance.py::test_node_conformance": "every ONNX node test (a sample runs in the quick tier)",
    "tests/e2e/test_sweep.py::test_cli_sweep_verify_plot_json_and_bad_options": "a sweep with every point computed",
    "tests/e2e/test_sweep.py::test_cli_run_and_compare_timing_only_give_the_full_numbers": "full runs beside timing-only",
    "tests/e2e/test_sweep.py::test_ray_gives_the_same_rows_and_reruns_a_dead_workers_point": "starts a Ray cluster",
    "tests/e2e/test_sweep.py::test_sigint_mid_sweep_loses_no_row_and_repeats_none": "a sweep process interrupted",
    "tests/e2e/test_sweep.py::test_rows_equal_individual_sessions": "every sweep row run again as a session",
    "tests/e2e/test_sweep.py::test_progress_bar_only_on_a_terminal": "sweeps under a pseudo-terminal",
    "tests/e2e/test_models_yaml.py::test_onnx_example_round_trips_through_yaml_by_cli": "several CLI processes",
    "tests/e2e/test_tensor_parallel.py::test_independent_tower_hides_the_all_reduce": "large tensor-parallel MLPs",
    "tests/e2e/test_tensor_parallel.py::test_compute_heavy_mlp_is_faster_on_two_cards": "large tensor-parallel MLPs",
    "tests/unit/runtime/test_caching.py::test_bisected_best_fit_agrees_with_a_scan": "a long randomized allocator run",
    "tests/unit/runtime/test_sim_core.py::test_sessions_match_with_the_core_off": "every light model twice",
    "tests/unit/runtime/test_systems.py::test_cli_devices_lists_the_systems": "a CLI process per system",
    "tests/unit/hccl/test_hccl.py::test_a_256mib_all_reduce_is_the_sum_and_takes_its_algorithms_time": "256 MiB per card",
    "tests/unit/passes/test_determinism.py::test_chain_cover_is_the_same_whatever_the_hash_seed": "processes per seed",
    "tests/hardening/test_sizes.py::test_chain_of_100000_nodes": "100,000-node graphs",
    "tests/hardening/test_peak_memory.py": "peak memory of whole runs, measured in processes",
    "tests/test_benchmarks.py": "every benchmark script in its quick mode",
    "tests/e2e/test_golden_blas.py": "a golden sample again in a process with another OpenBLAS kernel",
    "tests/e2e/test_cli.py::test_bad_input_one_line_exit_2": "a CLI process per bad input (the corpus has more)",
    "tests/e2e/test_cli.py::test_bad_files_exit_2": "a CLI process per bad file",
    "tests/e2e/test_cli_devices.py::test_compare_over_devices_table_json_and_plot": "CLI processes over cards",
    "tests/unit/engine/test_session_sharing.py::test_threads_sharing_a_session_get_their_own_outputs": "threads",
    "tests/e2e/test_multi_device.py::test_data_parallel_light_model_matches_one_device": "light models over cards",
    "tests/e2e/test_env_profiling.py::test_a_bad_output_path_is_one_warning_and_the_results_stay": "a process",
    "tests/e2e/test_env_profiling.py::test_an_eager_program_is_profiled_too": "a process",
}


def _slow(nodeid: str) -> bool:
    path, _, rest = nodeid.partition("::")
    name = rest.split("[", 1)[0]
    params = rest[len(name):]
    return (path in SLOW or f"{path}::{name}" in SLOW
            or (not path.endswith("test_golden.py") and any(m in params for m in HEAVY_LIGHT_MODELS)))


def pytest_collection_modifyitems(config, items):
    import pytest

    for item in items:
        if item.get_closest_marker("slow") is None and _slow(item.nodeid):
            item.add_marker(pytest.mark.slow)
