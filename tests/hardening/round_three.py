"""Issue 39's classes 1-5, 8 and 9 (untrusted names, `view` input, profiles, the exit-time
profile, eager arguments, loop budgets, the sweep front end), each case with its exact
line and exit code. ``Case`` is round two's: the maker gets a fresh folder ``d`` and
returns the command line. The corpus report (conftest.py) counts them per class.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Callable

import numpy as np
import onnx
from onnx import helper

from hardening import bad_inputs as B
from graphexec.errors import AclError
from hardening.round_two import Case, Make
from hardening.round_two_api import ApiCase

# what a hostile name carries: a screen clear, an OSC title, BEL, CR, a bidi override and isolate
HOSTILE = "\x1b[2J\x1b]0;pwn\x07\r\u202e\u2066"
SHOWN = "\\x1b[2J\\x1b]0;pwn\\x07\\x0d\\u202e\\u2066"   # the same, as a terminal is shown it
REPR = SHOWN.replace("\\x0d", "\\r")   # where the message quotes the name with repr()
SPACED = SHOWN.replace("\\x0d", " ")    # an error message is one line: its whitespace runs are one space
mk = helper.make_node


def _named(nodes: list[onnx.NodeProto], file: str = "m.onnx", **kw: object) -> Make:
    return lambda d: ["run", B.write(d, file, B.model(nodes, **kw))]  # type: ignore[arg-type]


def _relu_with(*args: str) -> Make:
    return lambda d: ["run", B.write(d, "m.onnx", B.relu_model()), *args]


NAMES = [
    Case("names", "dangling_input_named_hostile",
         _named([mk("Add", ["x", "g" + HOSTILE], ["y"], name="add")]),
         "{d}/m.onnx: node add (Add) reads 'g" + REPR + "', which no node, input or initializer produces"),
    Case("names", "node_named_hostile_in_a_cycle",
         _named([mk("Add", ["x", "b"], ["a"], name="A" + HOSTILE), mk("Relu", ["a"], ["b"], name="B"),
                 mk("Relu", ["a"], ["y"], name="C")]),
         "{d}/m.onnx: the graph has a cycle: A" + SPACED + " (Add) -> B (Relu) -> A" + SPACED + " (Add)"),
    Case("names", "file_named_hostile", lambda d: ["run", d / f"m{HOSTILE}.onnx"],
         "{d}/m" + SPACED + ".onnx: no such file"),
    Case("names", "feed_named_hostile", _relu_with("--shape", f"z{HOSTILE}=2,3"),
         "a shape is given for 'z" + REPR + "', which is not an input of the graph; inputs are: x"),
    Case("names", "input_file_named_hostile", _relu_with("--input", f"x=nope{HOSTILE}.npy"),
         "--input x: nope" + SPACED + ".npy: no such file"),
    Case("names", "output_written_twice_newline",
         _named([mk("Relu", ["x"], ["y\nfake line"], name="r1"), mk("Relu", ["x"], ["y\nfake line"], name="r2")],
                outputs=("y\nfake line",)),
         "{d}/m.onnx: value 'y\\nfake line' is written twice (again by node r2 (Relu))"),
    Case("names", "yaml_node_named_bidi",
         lambda d: ["run", B.write(d, "g.yaml", B.yaml_graph(replace={"name: act, op: Relu":
                                                                      'name: "a\\u202Ect", op: Frobnicate'}))],
         "{d}/g.yaml:8:25: node 'a\\u202ect': unknown op 'Frobnicate'; closest known: Concat"),
    Case("names", "device_profile_named_hostile",
         lambda d: ["run", B.write(d, "m.onnx", B.relu_model()), "--device", str(d / f"dev{HOSTILE}.yaml")],
         "{d}/dev" + SPACED + ".yaml: cannot read device profile: No such file or directory"),
]



def _timeline(mutate: Callable[[dict], object] | None = None, text: str | None = None, csv: str | None = None) -> Make:
    """A small valid --profile folder in d/p (a kernel, a counter, a diagnosis), changed by
    ``mutate``, or a timeline.json of ``text``; ``graphexec view`` of it."""
    def make(d: Path) -> list:
        (d / "p").mkdir()
        doc = json.loads(json.dumps(TIMELINE))
        if mutate is not None:
            mutate(doc)
        (d / "p" / "timeline.json").write_text(text if text is not None else json.dumps(doc), encoding="utf-8")
        if csv is not None:
            (d / "p" / "op_summary.csv").write_text(csv, encoding="utf-8")
        return ["view", d / "p"]
    return make


def _set(path: str, value: object) -> Callable[[dict], None]:
    """Set ``doc[a][b]...`` (a dotted path, numbers index lists)."""
    def mutate(doc: dict) -> None:
        *head, last = [int(k) if k.isdigit() else k for k in path.split(".")]
        target: Any = doc
        for k in head:
            target = target[k]
        if value is DELETE:
            del target[last]
        else:
            target[last] = value
    return mutate


DELETE = object()
TIMELINE = {"traceEvents": [
    {"ph": "M", "name": "process_name", "pid": 1, "tid": 0, "args": {"name": "device 0"}},
    {"ph": "X", "cat": "kernel", "name": "act", "ts": 1.0, "dur": 2.5, "pid": 1, "tid": 0,
     "args": {"node": "act", "op": "Relu", "unit": "vector"}},
    {"ph": "C", "cat": "counter", "name": "queued tasks", "ts": 1.0, "pid": 1, "tid": 0, "args": {"tasks": 1.0}}],
    "otherData": {"model": "m", "device": "ascend910", "device_pid": 1,
                  "peak": {"ai_cores": 32, "vector_cores": 32, "coupled": True, "hbm_bandwidth_gbps": 1200.0},
                  "stats": {"makespan_us": 3.5, "max_queue_depth": 1},
                  "diagnosis": {"reason": "dispatch", "message": "m", "ops": [], "causes": [],
                                "analyses": {"idle": {"0": {"idle_us": 1.0, "host_wait_us": 0.0,
                                                            "kernel_wait_us": 0.0, "other_us": 1.0}}}}}}
NOT_TIMELINE = "{d}/p/timeline.json: not a graphexec timeline: "
VIEW = [
    Case("view", "view_missing_pid", _timeline(_set("traceEvents.1.pid", DELETE)),
         NOT_TIMELINE + "traceEvents[1].pid: Field required"),
    Case("view", "view_counter_arg_string", _timeline(_set("traceEvents.2.args.tasks", "many")),
         NOT_TIMELINE + "traceEvents[2].args.tasks: Input should be a valid number, unable to parse string as a number"),
    Case("view", "view_stat_string", _timeline(_set("otherData.stats.makespan_us", "fast")),
         NOT_TIMELINE + "otherData.stats.makespan_us: Input should be a valid number, unable to parse string as a "
         "number"),
    Case("view", "view_nan_time", _timeline(text=json.dumps(TIMELINE).replace('"ts": 1.0, "dur"', '"ts": NaN, "dur"')),
         NOT_TIMELINE + "traceEvents[1].ts: Value error, must be a finite number of magnitude at most 1e+15"),
    Case("view", "view_negative_duration", _timeline(_set("traceEvents.1.dur", -1)),
         NOT_TIMELINE + "traceEvents[1].dur: Input should be greater than or equal to 0"),
    Case("view", "view_nested_100000", _timeline(text="[" * 100000 + "]" * 100000),
         "{d}/p/timeline.json: not a timeline: its JSON nests deeper than Python's JSON parser goes"),
    Case("view", "view_zero_cores", _timeline(_set("otherData.peak.ai_cores", 0)),
         NOT_TIMELINE + "otherData.peak.ai_cores: Input should be greater than or equal to 1"),
    Case("view", "view_other_not_object", _timeline(_set("otherData", [1])),
         NOT_TIMELINE + "otherData: Input should be a valid dictionary or instance of OtherData"),
    Case("view", "view_idle_stream_not_a_number", _timeline(_set("otherData.diagnosis.analyses.idle", {"s": {}})),
         NOT_TIMELINE + "otherData.diagnosis.analyses.idle.s.[key]: String should match pattern '^-?\\d{{1,10}}$'"),
    Case("view", "view_diagnosis_no_message", _timeline(_set("otherData.diagnosis.message", DELETE)),
         NOT_TIMELINE + "otherData.diagnosis.message: Field required"),
    Case("view", "view_wait_without_kind", _timeline(_set("traceEvents.1.cat", "event")),
         NOT_TIMELINE + "traceEvents[1]: Value error, an event's args.kind must be 'record' or 'wait'"),
    Case("view", "view_process_name_number", _timeline(_set("traceEvents.0.args.name", 7)),
         NOT_TIMELINE + "traceEvents[0]: Value error, a process_name event's args.name must be a string"),
    Case("view", "view_pid_float", _timeline(_set("traceEvents.1.pid", 1.5)),
         NOT_TIMELINE + "traceEvents[1].pid: Input should be a valid integer, got a number with a fractional part"),
    Case("view", "view_csv_field_past_limit", _timeline(csv="Op Name,OP Type\n\"" + "a" * 200000 + "\",Relu\n"),
         "{d}/p/op_summary.csv: not an op summary: field larger than field limit (131072)"),
]



def _device(**fields: object) -> Make:
    return lambda d: ["run", B.write(d, "m.onnx", B.relu_model()), "--device", B.device_profile(d, **fields)]


def _system(devices: int = 2, **fields: object) -> Make:
    """The built-in atlas800-910 system with ``fields`` replaced (``a__b`` nests), one group."""
    def make(d: Path) -> list:
        import yaml

        from graphexec.runtime.systems import load_system

        data = load_system("atlas800-910").model_dump(mode="json")
        data["topology"].update(groups=None, inter_group=None)
        data["sources"] = {k: v for k, v in data["sources"].items() if not k.startswith("topology.inter_group")}
        if any(k.startswith("device__") for k in fields):
            data["device"] = B.builtin_profiles()["ascend910"].model_dump()
        for key, value in fields.items():
            *parents, leaf = key.split("__")
            target = data
            for part in parents:
                target = target[part]
            target[leaf] = value
        path = B.write(d, "system.yaml", yaml.safe_dump(data))
        return ["run", B.write(d, "m.onnx", B.relu_model()), "--devices", str(devices), "--system", path]
    return make


RATE = "GB/s; 10 MB/s (a slow PCIe x1) to 100 TB/s (50x an H100's HBM)"
PROFILES = [
    Case("profiles", "device_bandwidth_denormal", _device(hbm_bandwidth_gbps=1e-320),
         "{d}/device.yaml: field 'hbm_bandwidth_gbps': 1e-320 is outside the plausible range 0.01 to 100000 (" + RATE + ")"),
    Case("profiles", "device_launch_1e308", _device(launch_cost_us=1e308),
         "{d}/device.yaml: field 'launch_cost_us': 1e+308 is outside the plausible range 0.001 to 100000 "
         "(us of host time per launch; 1 ns to 100 ms)"),
    Case("profiles", "device_10e9_cores", _device(ai_cores=10**9, vector_cores=10**9),
         "{d}/device.yaml: field 'ai_cores': 1000000000 is outside the plausible range 1 to 4096 "
         "(cores; the biggest chips have 100-200 (H100: 132 SMs))"),
    Case("profiles", "device_peak_1e30", _device(peak_tflops__cube__float16=1e30),
         "{d}/device.yaml: field 'peak_tflops.cube.float16': 1e+30 is outside the plausible range 0.001 to 100000 "
         "(TFLOPS; a 2024 GPU's densest format is about 1e4)"),
    Case("profiles", "device_efficiency_tiny", _device(kernels__cube__efficiency__default=1e-9),
         "{d}/device.yaml: field 'kernels.cube.efficiency.default': 1e-09 is outside the plausible range 0.0001 to 1 "
         "(fraction of the peak rate)"),
    Case("profiles", "device_memory_16_pib", _device(hbm_capacity_bytes=1 << 54),
         "{d}/device.yaml: field 'hbm_capacity_bytes': 18014398509481984 is outside the plausible range 1048576 to "
         "17592186044416 (bytes; 1 MiB to 16 TiB)"),
    Case("profiles", "device_copy_bandwidth_1e300", _device(copy_bandwidth_gbps__h2d=1e300),
         "{d}/device.yaml: field 'copy_bandwidth_gbps.h2d': 1e+300 is outside the plausible range 0.01 to 100000 ("
         + RATE + ")"),
    Case("profiles", "system_4000_cards", _system(count=4000),
         "{d}/system.yaml: field 'count': 4000 is outside the plausible range 1 to 512 (cards; links per ordered "
         "pair are built up front (at 512: 261,632 links, 2.6 s))"),
    Case("profiles", "system_10e9_cards", _system(count=10**9),
         "{d}/system.yaml: field 'count': 1000000000 is outside the plausible range 1 to 512 (cards; links per "
         "ordered pair are built up front (at 512: 261,632 links, 2.6 s))"),
    Case("profiles", "system_link_denormal", _system(topology__intra_group__bandwidth_gbps=1e-320),
         "{d}/system.yaml: field 'topology.intra_group.bandwidth_gbps': 1e-320 is outside the plausible range 0.01 to "
         "100000 (" + RATE + ")"),
    Case("profiles", "system_latency_1e308", _system(topology__intra_group__latency_us=1e308),
         "{d}/system.yaml: field 'topology.intra_group.latency_us': 1e+308 is outside the plausible range 0 to "
         "1000000 (us; up to a second)"),
    Case("profiles", "system_device_cores_10e9", _system(device__ai_cores=10**9, device__vector_cores=10**9),
         "{d}/system.yaml: field 'device.ai_cores': 1000000000 is outside the plausible range 1 to 4096 "
         "(cores; the biggest chips have 100-200 (H100: 132 SMs))"),
]

ROUND_THREE: list[Case] = NAMES + VIEW + PROFILES


def _child(mode: str, mark: str = "mark", output: str = "prof", signum: int | None = None) -> Make:
    """exit_child.py MODE MARK with the profile on (its folder ``output`` under d); the test
    sends ``signum`` once MARK exists. Returns [env, argv, signum]."""
    def make(d: Path) -> list:
        environ = {"ASCEND_PROFILING_ENABLED": "1", "ASCEND_PROFILING_OUTPUT_PATH": output}
        return [environ, [str(Path(__file__).with_name("exit_child.py")), mode, str(d / mark)], signum]
    return make


NOT_WRITTEN = "was written; it was not written"
EXIT_PROFILE = [
    Case("exit profile", "sigterm_during_the_write", _child("write", signum=15),
         "graphexec: SIGTERM while the profile for ASCEND_PROFILING_OUTPUT_PATH=prof " + NOT_WRITTEN, 143),
    Case("exit profile", "sigint_during_the_write", _child("write", signum=2),
         "graphexec: SIGINT while the profile for ASCEND_PROFILING_OUTPUT_PATH=prof " + NOT_WRITTEN, 130),
    Case("exit profile", "sigterm_during_the_diagnosis", _child("diagnose", signum=15),
         "graphexec: SIGTERM while the profile for ASCEND_PROFILING_OUTPUT_PATH=prof " + NOT_WRITTEN, 143),
    Case("exit profile", "sigint_during_the_diagnosis", _child("diagnose", signum=2),
         "graphexec: SIGINT while the profile for ASCEND_PROFILING_OUTPUT_PATH=prof " + NOT_WRITTEN, 130),
    Case("exit profile", "relative_path_after_chdir", _child("chdir", mark="elsewhere"), "", 0),
    Case("exit profile", "output_path_is_a_file", _child("plain", output="afile"),
         "graphexec: warning: ASCEND_PROFILING_OUTPUT_PATH=afile: cannot write the profile: File exists", 0),
    Case("exit profile", "profile_block_names_its_folder", _child("block", mark="afile"),
         "graphexec: warning: the profile folder {d}/afile/sub: cannot write the profile: Not a directory", 0),
]


def hostile_model(folder: Path) -> Path:
    """A valid model whose graph, node, tensor and file names carry ``HOSTILE``, a newline and
    a leading formula character: what class 1 renders on every medium."""
    bad = "=cmd|' /C calc'!A0" + HOSTILE
    nodes = [mk("Relu", ["x"], ["@t" + HOSTILE], name=bad), mk("Neg", ["@t" + HOSTILE], ["+y\nfake"], name="-n2\nfake")]
    return B.write(folder, f"m{HOSTILE}.onnx", B.model(nodes, outputs=("+y\nfake",), name="g" + HOSTILE))



def _npu(code: str) -> Callable[[], Any]:
    """Run ``code`` with ``npu`` and ``np`` in scope (a device tensor ``x`` of 3 ones ready)."""
    def call() -> Any:
        import numpy as np

        import graphexec.npu as npu

        x = npu.ones(3, device="npu")
        npu.synchronize()
        exec(code, {"npu": npu, "np": np, "x": x})
    return call


INVALID = "ACL_ERROR_INVALID_PARAM (100000): "
NOT_ON_DEVICE = "cannot live on a device (bool, integer, float and complex dtypes only)"
EAGER = [
    ApiCase("eager", "empty_object_on_a_card_read_back", _npu(
        "y = npu.full((64,), 3.5, device='npu'); del y; npu.empty(8, dtype=object, device='npu').cpu().numpy()"),
        AclError, INVALID + "a tensor on npu:0: dtype object " + NOT_ON_DEVICE),
    ApiCase("eager", "empty_object_issue_39", _npu("npu.empty(8, dtype=object).cpu()"),
            AclError, INVALID + "a tensor on npu:0: dtype object " + NOT_ON_DEVICE),   # the current device
    ApiCase("eager", "full_object", _npu("npu.full((2,), 1, dtype=object, device='npu')"),
            AclError, INVALID + "npu.full: dtype object " + NOT_ON_DEVICE),
    ApiCase("eager", "from_numpy_object_npu", _npu("npu.from_numpy(np.array([1, 'a'], dtype=object)).npu()"),
            AclError, INVALID + "npu.from_numpy: dtype object " + NOT_ON_DEVICE),
    ApiCase("eager", "tensor_of_objects", _npu("npu.tensor([object()], device='npu')"),
            AclError, INVALID + "npu.tensor: dtype object " + NOT_ON_DEVICE),
    ApiCase("eager", "wait_event_string", _npu("npu.current_stream().wait_event('x')"),
            AclError, INVALID + "Stream.wait_event: event must be an Event, got 'x'"),
    ApiCase("eager", "event_record_string", _npu("npu.Event().record('s')"),
            AclError, INVALID + "Event.record: stream must be a Stream or None, got 's'"),
    ApiCase("eager", "add_object", _npu("x + object()"),
            AclError, INVALID + "Add: an operand must be a tensor, a number or an array of numbers, not object"),
    ApiCase("eager", "full_with_an_array", _npu("npu.full([2, 2], np.arange(3.0), device='npu')"),
            AclError, INVALID + "npu.full: the value must be a number, not an array of shape [3]"),
    ApiCase("eager", "full_uint8_minus_one", _npu("npu.full((2,), -1, dtype=np.uint8, device='npu')"),
            AclError, INVALID + "npu.full: -1 is not a uint8 value (Python integer -1 out of bounds for uint8)"),
    ApiCase("eager", "randn_past_the_host_budget", _npu("npu.randn(2**40)"),
            AclError, INVALID + "npu.randn: a tensor of shape [1099511627776] needs 8796093022208 bytes, more than "
            "the host budget of 8589934592 bytes (GRAPHEXEC_HOST_BUDGET)"),
    ApiCase("eager", "to_a_nonsense_dtype", _npu("x.to(dtype='nonsense')"),
            AclError, INVALID + "Tensor.to: dtype 'nonsense' is not a dtype"),
    ApiCase("eager", "copy_an_object", _npu("x.copy_(object())"),
            AclError, INVALID + "Tensor.copy_: an operand must be a tensor, a number or an array of numbers, not object"),
    ApiCase("eager", "reshape_to_none", _npu("x.reshape(None)"),
            AclError, INVALID + "Tensor.reshape: an operand must be a tensor, a number or an array of numbers, not "
            "tuple"),
    ApiCase("eager", "empty_object_on_the_host", _npu("npu.empty(8, dtype=object, device='cpu')"),
            AclError, INVALID + "npu.empty: dtype object " + NOT_ON_DEVICE),
    # the functional ops and methods, checked from their annotations (runtime/argcheck.py, as ACL's)
    ApiCase("eager", "abs_of_an_event", _npu("npu.abs(npu.Event())"),
            AclError, INVALID + "npu.abs: x must be a Tensor, got an Event"),
    ApiCase("eager", "arange_to_a_stream", _npu("npu.arange(npu.current_stream())"),
            AclError, INVALID + "npu.arange: start must be a number, got a Stream"),
    ApiCase("eager", "arange_step_zero", _npu("npu.arange(0, 5, 0)"),
            AclError, INVALID + "npu.arange: needs finite bounds and a nonzero step, got 0, 5, 0"),
    ApiCase("eager", "flatten_from_an_event", _npu("x.flatten(npu.Event())"),
            AclError, INVALID + "Tensor.flatten: start_dim must be an int, got an Event"),
    ApiCase("eager", "permute_by_none", _npu("x.permute(None)"),
            AclError, INVALID + "Tensor.permute: each of *dims must be an int or a list or tuple of ints, got None"),
    ApiCase("eager", "item_of_three", _npu("x.item()"),
            AclError, INVALID + "Tensor.item: a tensor of 3 elements is not one number"),
    ApiCase("eager", "transpose_past_the_rank", _npu("x.transpose(0, 5)"),
            AclError, INVALID + "Tensor.transpose: dim 5 is out of range for a tensor of 1 dims"),
    ApiCase("eager", "stream_limit_of_an_event", _npu("npu.get_stream_limit(npu.Event())"),
            AclError, INVALID + "npu.get_stream_limit: stream must be a Stream, got an Event"),
    ApiCase("eager", "wait_on_a_reset_cards_event", _npu("e = npu.Event(); e.record(); npu.reset_device(); e.wait()"),
            AclError, "ACL_ERROR_RT_INVALID_HANDLE (107017): device npu:0 was reset; its streams and tensors are gone"),
]



def loop_model(trips: int, nodes: int = 20, scan: int = 0) -> onnx.ModelProto:
    """A Loop of ``trips`` (int64 max: a while loop) whose body adds 1 through ``nodes`` - 1
    Adds to a carried float32[16], its condition passed on; ``scan`` float32 elements of
    scan output an iteration."""
    vi, TP = helper.make_tensor_value_info, onnx.TensorProto
    names = ["v_in"] + [f"t{k}" for k in range(1, nodes - 1)] + ["v_out"]
    body_nodes = [mk("Identity", ["c_in"], ["c_out"])]
    body_nodes += [mk("Add", [names[k], "one"], [names[k + 1]]) for k in range(nodes - 1)]
    outs = [vi("c_out", TP.BOOL, []), vi("v_out", TP.FLOAT, [16])]
    if scan:
        body_nodes.append(mk("Expand", ["one", "scan_shape"], ["s_out"]))
        outs.append(vi("s_out", TP.FLOAT, [scan]))
    consts = [onnx.numpy_helper.from_array(np.array([1.0], np.float32), "one"),
              onnx.numpy_helper.from_array(np.array([scan], np.int64), "scan_shape")]
    body = helper.make_graph(body_nodes, "body", [vi("i", TP.INT64, []), vi("c_in", TP.BOOL, []),
                                                  vi("v_in", TP.FLOAT, [16])], outs, consts[:1 + bool(scan)])
    loop_outs = ["v"] + (["s"] if scan else [])
    g = helper.make_graph([mk("Loop", ["M", "cond", "v0"], loop_outs, body=body, name="loop")], "loops",
                          [vi("v0", TP.FLOAT, [16])], [vi(n, TP.FLOAT, None) for n in loop_outs],
                          [onnx.numpy_helper.from_array(np.array(trips, np.int64), "M"),
                           onnx.numpy_helper.from_array(np.array(True), "cond")])
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])


def _loop(trips: int, **kw: int) -> Make:
    return lambda d: ["run", B.write(d, "loop.onnx", loop_model(trips, **kw)), "--timing-only"]


ITERATIONS = "GRAPHEXEC_MAX_LOOP_ITERATIONS"
MUST_BE = ": must be a whole number of iterations >= 1 (default 1000000)"
LOOPS = [
    Case("loops", "max_iterations_1e3", _loop(10), ITERATIONS + "='1e3'" + MUST_BE),
    Case("loops", "max_iterations_0", _loop(10), ITERATIONS + "='0'" + MUST_BE),
    Case("loops", "max_iterations_negative", _loop(10), ITERATIONS + "='-5'" + MUST_BE),
    Case("loops", "max_iterations_word", _loop(10), ITERATIONS + "='many'" + MUST_BE),
    Case("loops", "max_iterations_0_no_loop", _relu_with(), ITERATIONS + "='0'" + MUST_BE),
    Case("loops", "million_iterations_of_20_nodes", _loop(10**6),
         "node loop (Loop): 1000000 iterations of 6 tasks each, 1536 bytes of host memory a task: the loop needs "
         "9216000000 bytes, more than the host budget of 8589934592 bytes (GRAPHEXEC_HOST_BUDGET); set "
         + ITERATIONS + " lower to stop it earlier"),
    Case("loops", "trillion_trips_refused_before_they_run", _loop(10**12),
         "node loop (Loop): its trip count 1000000000000 is past the limit of 1000000 iterations, and only the "
         "trip count can end it (set " + ITERATIONS + " to allow more)"),
    Case("loops", "while_loop_past_a_small_budget", _loop(2**63 - 1),
         "node loop (Loop): after 114 iterations of 6 tasks each, 1536 bytes of host memory a task: the loop needs "
         "1050624 bytes, more than the host budget of 1048576 bytes (GRAPHEXEC_HOST_BUDGET); set " + ITERATIONS
         + " lower to stop it earlier"),
    Case("loops", "scan_of_4_mib_an_iteration", _loop(1000, scan=1 << 20),
         "node loop (Loop): its carried and scan values hold 33554496 bytes after 8 iterations, and stacking the "
         "scans copies them: the loop needs 67108928 bytes, more than the host budget of 67108864 bytes "
         "(GRAPHEXEC_HOST_BUDGET)"),
]
LOOP_ENV = {"max_iterations_1e3": {ITERATIONS: "1e3"}, "max_iterations_0": {ITERATIONS: "0"},
            "max_iterations_negative": {ITERATIONS: "-5"}, "max_iterations_word": {ITERATIONS: "many"},
            "max_iterations_0_no_loop": {ITERATIONS: "0"},
            "while_loop_past_a_small_budget": {"GRAPHEXEC_HOST_BUDGET": str(1 << 20)},
            "scan_of_4_mib_an_iteration": {"GRAPHEXEC_HOST_BUDGET": str(64 << 20)}}



def _sweep(*args: str, output: str | None = "rows.csv") -> Make:
    def make(d: Path) -> list:
        out = ["--output", str(d / output)] if output else []
        return ["sweep", B.write(d, "m.onnx", B.relu_model()), *args, *out]
    return make


THOUSAND = ",".join(map(str, range(1, 1001)))
RAY_DOWN = "cannot start or reach a Ray cluster locally: "
SWEEP = [
    Case("sweep", "grid_of_a_million", _sweep("--streams", THOUSAND, "--devices", THOUSAND),
         "a sweep of up to 1,000,000 points (1 models x 1 devices x 1,000 stream counts x 1 policies x 1,000 card "
         "counts x 1 parallel modes) is more than the 100,000 one sweep takes; split the grid"),
    Case("sweep", "grid_past_the_limit_by_policies", _sweep("--streams", THOUSAND, "--policy", "ge,list,chains",
                                                             "--devices", ",".join(map(str, range(1, 41)))),
         "a sweep of up to 120,000 points (1 models x 1 devices x 1,000 stream counts x 3 policies x 40 card counts x "
         "1 parallel modes) is more than the 100,000 one sweep takes; split the grid"),
    Case("sweep", "ray_absent_no_output", _sweep("--backend", "ray"),
         "--backend ray needs ray: pip install -e '.[cluster]' (or pip install ray)"),
    Case("sweep", "ray_socket_path_too_long", _sweep("--backend", "ray"),
         RAY_DOWN + "OSError: validate_socket_filename failed: AF_UNIX path length cannot exceed 107 bytes: "
         "/tmp/ddd/ray/session_1/sockets/plasma_store"),
    Case("sweep", "ray_address_space_cap", _sweep("--backend", "ray"),
         RAY_DOWN + "Exception: The current node timed out during startup. This could happen because some of the "
         "raylet failed to startup or the GCS has become overloaded."),
    Case("sweep", "ray_unreachable_address", _sweep("--backend", "ray", "--address", "10.255.255.1:6379"),
         "cannot start or reach a Ray cluster at 10.255.255.1:6379: ConnectionError: could not connect"),
]
# what a fake ray's init raises (None: no ray at all)
SWEEP_RAY: dict[str, BaseException | None] = {
    "ray_absent_no_output": None,
    "ray_socket_path_too_long": OSError("validate_socket_filename failed: AF_UNIX path length cannot exceed 107 "
                                        "bytes: /tmp/ddd/ray/session_1/sockets/plasma_store"),
    "ray_address_space_cap": Exception("The current node timed out during startup. This could happen because some "
                                       "of the raylet failed to startup or the GCS has become overloaded.\nmore"),
    "ray_unreachable_address": ConnectionError("could not connect"),
}

CORPUS: list[Any] = ROUND_THREE + EXIT_PROFILE + EAGER + LOOPS + SWEEP   # what the corpus report counts for issue 39
