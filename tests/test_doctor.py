"""``mapush doctor`` / preflight: each check with the GPU facts injected."""
import json

import pytest

from mapush.diagnostics import doctor
from mapush.diagnostics.doctor import FAIL, OK, SKIP, WARN, Options
from mapush.diagnostics.gpu import DeviceFacts, GpuFacts, arch_support
from mapush.errors import MapushError
from mapush.spec import RunSpec
from tests.conftest import DOUBLE_ROOT, double_env, run_mapush

CU116_ARCHS = ["sm_37", "sm_50", "sm_60", "sm_70", "sm_75", "sm_80", "sm_86"]


def facts(name="NVIDIA GeForce RTX 2070", cap=(7, 5), free_mb=7757.0, total_mb=8192.0,
          driver="535.274.02", count=1, archs=None):
    return GpuFacts(devices=[DeviceFacts(i, name, cap, total_mb, free_mb) for i in range(count)],
                    driver_version=driver, torch_version="1.13.1+cu116", torch_cuda="11.6",
                    arch_list=list(CU116_ARCHS if archs is None else archs),
                    cuda_available=count > 0, nvidia_smi=True,
                    error=None if count else "no CUDA-capable device is detected")


def by_name(checks):
    return {c.name: c for c in checks}


@pytest.fixture
def healthy(tmp_path, monkeypatch):
    """Isaac Gym, patch records and MAPush present: only the GPU facts vary."""
    records = tmp_path / "records"
    records.mkdir()
    for component in doctor.PATCH_COMPONENTS:
        (records / ("%s.json" % component)).write_text(json.dumps(
            {"component": component, "status": "applied",
             "patches": [{"name": "0001-fix.patch", "sha256": "0" * 64}]}))
    monkeypatch.setenv("MAPUSH_PATCH_RECORDS", str(records))
    monkeypatch.setenv("MAPUSH_ROOT", str(DOUBLE_ROOT))
    monkeypatch.syspath_prepend(str(DOUBLE_ROOT.parent))  # the mqe double
    monkeypatch.setattr(doctor, "probe_isaacgym", lambda: (str(tmp_path / "isaacgym"), ""))
    monkeypatch.delenv("MAPUSH_CONTACT_PAIRS_MULTIPLIER", raising=False)
    return records


def checks_for(gpu, **opts):
    checks, _ = doctor.run_checks(Options(**opts), facts=gpu)
    return by_name(checks)


def test_healthy_machine_passes_every_check(healthy):
    checks = checks_for(facts(), num_envs=200)
    assert {c.status for c in checks.values()} == {OK}, [c.line() for c in checks.values()]


def test_no_gpu_in_a_container_fails_with_the_container_toolkit_hint(healthy, monkeypatch):
    monkeypatch.setenv("MAPUSH_WHERE", "container")
    checks = checks_for(facts(count=0))
    check = checks["gpu"]
    assert check.status == FAIL and "in this container" in check.message
    assert "--gpus" in check.fix and "nvidia-ctk" in check.fix and "NVIDIA Container Toolkit" in check.fix
    assert checks["devices"].status == SKIP  # never "[ok] devices cuda:0" without a GPU


def test_no_gpu_on_the_host_names_the_driver_not_docker_run(healthy, monkeypatch):
    monkeypatch.setenv("MAPUSH_WHERE", "host")
    checks = checks_for(facts(count=0))
    check = checks["gpu"]
    assert check.status == FAIL and "on this host" in check.message
    assert "nvidia-smi" in check.fix and "make doctor" in check.fix
    assert "docker run" not in check.fix and "--gpus" not in check.fix
    assert checks["devices"].status == SKIP and "no GPU visible" in checks["devices"].message


@pytest.mark.parametrize("marker, expected", [
    ({"MAPUSH_WHERE": "container"}, True), ({"MAPUSH_WHERE": "host"}, False),
    ({"APPTAINER_CONTAINER": "/x.sif"}, True), ({"container": "podman"}, True)])
def test_where_the_doctor_runs(monkeypatch, marker, expected):
    for name in ("MAPUSH_WHERE", "APPTAINER_CONTAINER", "SINGULARITY_CONTAINER", "container"):
        monkeypatch.delenv(name, raising=False)
    for name, value in marker.items():
        monkeypatch.setenv(name, value)
    assert doctor.in_container() is expected


def test_requested_gpu_index_beyond_the_visible_ones_names_the_fix_for_where_it_runs(
        healthy, monkeypatch):
    monkeypatch.setenv("MAPUSH_WHERE", "host")
    check = checks_for(facts(count=1), sim_device="cuda:1", rl_device="cuda:1")["gpu"]
    assert "CUDA_VISIBLE_DEVICES" in check.fix and "docker" not in check.fix
    monkeypatch.setenv("MAPUSH_WHERE", "container")
    check = checks_for(facts(count=1), sim_device="cuda:1", rl_device="cuda:1")["gpu"]
    assert "make GPU=N" in check.fix


def test_requested_gpu_index_beyond_the_visible_ones_fails(healthy):
    check = checks_for(facts(count=1), sim_device="cuda:1", rl_device="cuda:1")["gpu"]
    assert check.status == FAIL and "cuda:1" in check.message


def test_hopper_with_the_cu116_build_fails_naming_the_way_out(healthy):
    check = checks_for(facts(name="NVIDIA H100 80GB HBM3", cap=(9, 0), free_mb=80000))["gpu_arch"]
    assert check.status == FAIL
    assert "sm_90" in check.message and "no kernel image" in check.message
    assert "make build STACK=cu121" in check.fix and "make train STACK=cu121" in check.fix
    assert "reported to segfault on H100" in check.fix


def test_blackwell_has_no_stack_to_recommend(healthy):
    check = checks_for(facts(name="NVIDIA B200", cap=(10, 0), free_mb=80000))["gpu_arch"]
    assert check.status == FAIL and "STACK=cu121" not in check.fix
    assert "No stack of this project has sm_100 kernels" in check.fix


def test_hopper_on_the_cu121_stack_passes_the_arch_but_warns_of_isaac_gym(healthy):
    found = facts(name="NVIDIA H100 80GB HBM3", cap=(9, 0), free_mb=80000)
    found.arch_list = ["sm_50", "sm_60", "sm_70", "sm_75", "sm_80", "sm_86", "sm_90"]
    check = checks_for(found)["gpu_arch"]
    assert check.status == WARN and "sm_90 kernels" in check.message
    assert "segfault on H100" in check.message and "Ampere/Ada" in check.fix


def test_ada_runs_ampere_kernels(healthy):
    check = checks_for(facts(name="NVIDIA GeForce RTX 4090", cap=(8, 9), free_mb=23000))["gpu_arch"]
    assert check.status == OK and "sm_86" in check.message


def test_arch_support_rules():
    assert arch_support((8, 6), CU116_ARCHS) == ("native", "sm_86")
    assert arch_support((8, 9), CU116_ARCHS) == ("compatible", "sm_86")
    assert arch_support((9, 0), CU116_ARCHS) == ("none", "")
    assert arch_support((9, 0), CU116_ARCHS + ["compute_86"]) == ("ptx", "compute_86")
    assert arch_support((12, 0), ["sm_80", "sm_90"]) == ("none", "")


@pytest.mark.parametrize("driver,status", [("440.33.01", FAIL), ("450.80.02", WARN),
                                           ("470.57.02", WARN), ("510.39.01", OK),
                                           ("580.95.05", OK), (None, WARN)])
def test_driver_minimum_for_cuda_11(healthy, driver, status):
    check = checks_for(facts(driver=driver))["driver"]
    assert check.status == status, check.line()
    if status == FAIL:
        assert "450.80.02" in check.fix


def test_too_little_memory_for_the_envs_fails_and_suggests_fewer(healthy):
    check = checks_for(facts(free_mb=2500.0), num_envs=4096)["gpu_memory"]
    assert check.status == FAIL and "--num-envs" in check.fix
    assert checks_for(facts(free_mb=2500.0), num_envs=50)["gpu_memory"].status == OK


def test_upstream_multiplier_override_on_8_gb_fails(healthy, monkeypatch):
    monkeypatch.setenv("MAPUSH_CONTACT_PAIRS_MULTIPLIER", "5")
    check = checks_for(facts(), num_envs=200)["gpu_memory"]
    assert check.status == FAIL and "MAPUSH_CONTACT_PAIRS_MULTIPLIER" in check.fix


def test_mismatched_devices_warn(healthy):
    check = checks_for(facts(count=2), sim_device="cuda:0", rl_device="cuda:1")["devices"]
    assert check.status == WARN and "cuda:0" in check.message and "cuda:1" in check.message


def test_cpu_only_run_skips_gpu_checks_without_probing(healthy):
    def no_probe():
        raise AssertionError("GPU facts gathered for a CPU-only run")

    checks, gpu = doctor.run_checks(Options(sim_device="cpu", rl_device="cpu"), gather=no_probe)
    named = by_name(checks)
    assert gpu is None
    assert all(named[n].status == SKIP for n in ("gpu", "driver", "gpu_arch", "gpu_memory"))
    assert not doctor.failed(checks)


def test_missing_patch_record_fails(healthy):
    (healthy / "harl.json").unlink()
    check = checks_for(facts())["patches"]
    assert check.status == FAIL and "harl: no record" in check.message


def test_mapush_not_found_fails(healthy, monkeypatch, tmp_path):
    monkeypatch.setenv("MAPUSH_ROOT", str(tmp_path / "nowhere"))
    check = checks_for(facts())["mapush"]
    assert check.status == FAIL and "MAPUSH_ROOT" in check.fix


def test_gymtorch_build_is_found_in_torch_extensions_dir(tmp_path, monkeypatch):
    pkg = tmp_path / "isaacgym"
    (pkg / "_bindings" / "src" / "gymtorch").mkdir(parents=True)
    ext = tmp_path / "ext"
    monkeypatch.setenv("TORCH_EXTENSIONS_DIR", str(ext))
    state = {"isaacgym_dir": str(pkg)}
    missing = doctor.check_gymtorch(Options(), state)
    assert missing.status in (WARN, FAIL) and str(ext) in missing.message
    monkeypatch.setattr(doctor.shutil, "which", lambda name: None)
    assert doctor.check_gymtorch(Options(), state).status == FAIL  # no ninja/g++ to build it
    (ext / "gymtorch").mkdir(parents=True)
    (ext / "gymtorch" / "gymtorch.so").write_bytes(b"\x7fELF")
    assert doctor.check_gymtorch(Options(), state).status == OK


def test_cli_json_with_fake_gpu_file(tmp_path):
    fake = tmp_path / "gpu.json"
    fake.write_text(json.dumps(facts(name="NVIDIA H200", cap=(9, 0), free_mb=140000).to_dict()))
    out = run_mapush(["doctor", "--num-envs", "8", "--json"],
                     env=double_env(MAPUSH_FAKE_GPU=fake), timeout=120)
    report = json.loads(out.stdout)
    assert out.returncode == 1 and report["ok"] is False
    named = {c["name"]: c for c in report["checks"]}
    assert named["gpu_arch"]["status"] == FAIL and "sm_90" in named["gpu_arch"]["message"]
    assert named["gpu"]["status"] == OK
    # the tests' isaacgym is the stand-in: importable, and named as such, never as a result
    assert named["isaacgym"]["status"] == WARN and "stand-in" in named["isaacgym"]["message"]
    assert report["gpu"]["devices"][0]["name"] == "NVIDIA H200"


def test_cli_text_one_line_per_check_and_exit_status(tmp_path, healthy):
    fake = tmp_path / "gpu.json"
    fake.write_text(json.dumps(facts().to_dict()))
    env = double_env(MAPUSH_FAKE_GPU=fake, MAPUSH_PATCH_RECORDS=healthy)
    out = run_mapush(["doctor", "--num-envs", "200"], env=env, timeout=120)
    lines = out.stdout.strip().splitlines()
    assert out.returncode == 0, out.stdout + out.stderr
    assert len(lines) == 10 and lines[-1].startswith("doctor: ")
    # every check ok but Isaac Gym, which is the tests' stand-in and says so (a warning)
    assert [line.split()[1] for line in lines[:-1] if not line.startswith("[ok]")] == ["isaacgym"]
    assert "[warn] isaacgym" in out.stdout and "stand-in 0+stand" in out.stdout


def test_preflight_raises_on_a_failing_check(healthy, monkeypatch):
    spec = RunSpec(algo="ppo", task="go1push_mid", object="cuboid", num_envs=8, steps=10, seed=1,
                   run_dir="unused", sim_device="cpu", rl_device="cpu")
    assert not doctor.failed(doctor.preflight(spec)[0])
    monkeypatch.setattr(doctor, "probe_isaacgym", lambda: (None, "no module named isaacgym"))
    with pytest.raises(MapushError, match="preflight failed: isaacgym"):
        doctor.preflight(spec)


def test_upstream_fixture_records_pass_preflight_on_the_double(upstream, monkeypatch):
    """openrl + harl records and the mqe double (no MAPush tree under MAPUSH_ROOT): the
    missing mapush record is a warning there, a failure with a real MAPush tree."""
    monkeypatch.setenv("MAPUSH_PATCH_RECORDS", str(upstream["records"]))
    monkeypatch.setenv("MAPUSH_ROOT", str(DOUBLE_ROOT))
    check = doctor.check_patches(Options(), {})
    assert check.status == WARN and "openrl" in check.message and "harl" in check.message


def test_missing_mapush_record_fails_with_a_mapush_tree(healthy, tmp_path, monkeypatch):
    root = tmp_path / "mapush"
    (root / "mqe").mkdir(parents=True)
    (root / "mqe" / "__init__.py").write_text("")  # a MAPush tree: the mqe package
    monkeypatch.setenv("MAPUSH_ROOT", str(root))
    (healthy / "mapush.json").unlink()
    assert doctor.check_patches(Options(), {}).status == FAIL


@pytest.mark.parametrize("where, needle", [("host", "download"), ("container", "on the host")])
def test_missing_isaacgym_fix_fits_where_the_doctor_runs(healthy, monkeypatch, where, needle):
    monkeypatch.setenv("MAPUSH_WHERE", where)
    monkeypatch.setattr(doctor, "probe_isaacgym", lambda: (None, "No module named 'isaacgym'"))
    check = checks_for(facts())["isaacgym"]
    assert check.status == FAIL and needle in check.fix and "make build" in check.fix


@pytest.mark.parametrize("gpu, where, env, status, needle", [
    ("NVIDIA GeForce RTX 4090", "host", {"VK_ICD_FILENAMES": "ICD"}, OK, "Vulkan ICD found"),
    ("NVIDIA H100 80GB HBM3", "host", {"VK_ICD_FILENAMES": "ICD"}, WARN, "segfaults on datacenter"),
    ("NVIDIA A100-SXM4-40GB", "container", {"VK_ICD_FILENAMES": "ICD",
                                            "NVIDIA_DRIVER_CAPABILITIES": "all"}, WARN, "A100"),
    ("NVIDIA GeForce RTX 4090", "host", {"VK_ICD_FILENAMES": "MISSING"}, FAIL,
     "no NVIDIA Vulkan ICD"),
    ("NVIDIA GeForce RTX 4090", "container", {"VK_ICD_FILENAMES": "ICD",
                                              "NVIDIA_DRIVER_CAPABILITIES": "compute,utility"},
     FAIL, "'graphics' driver capability"),
])
def test_doctor_video_checks_rendering(healthy, monkeypatch, tmp_path, gpu, where, env, status,
                                       needle):
    icd = tmp_path / "nvidia_icd.json"
    icd.write_text("{}")
    monkeypatch.setenv("MAPUSH_WHERE", where)
    for name, value in env.items():
        monkeypatch.setenv(name, {"ICD": str(icd), "MISSING": str(tmp_path / "no.json")}.get(
            value, value))
    check = checks_for(facts(name=gpu, cap=(8, 9)), video=True)["rendering"]
    assert check.status == status and needle in check.message, check.line()
    if status == WARN:
        assert "workstation GPU" in check.fix  # the way out
    assert "rendering" not in checks_for(facts(name=gpu, cap=(8, 9)))  # only with --video


@pytest.mark.parametrize("text", ["not json", '{"devices": 3}', "[1, 2]"])
def test_a_broken_fake_gpu_file_is_one_line(tmp_path, text):
    """#77 (last round's 8): a MAPUSH_FAKE_GPU file that is no GPU facts was a traceback."""
    fake = tmp_path / "gpu.json"
    fake.write_text(text)
    proc = run_mapush(["doctor", "--num-envs", "8"], env=double_env(MAPUSH_FAKE_GPU=fake),
                      timeout=120)
    lines = [line for line in proc.stderr.splitlines() if line.strip()]
    assert proc.returncode == 2 and "Traceback" not in proc.stderr, proc.stderr[-2000:]
    assert lines[-1].startswith("error: MAPUSH_FAKE_GPU=%s: not a GPU facts file" % fake)
