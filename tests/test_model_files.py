"""Model files are data (sfenv.agents.model_files): the weights-only form loads no code and plays what the SB3
zip plays; zips and pickles need an explicit opt-in; a model's files stay in its folder, are regular and capped."""

from __future__ import annotations

import base64
import hashlib
import io
import json
import os
import pickle
import shutil
import time
import zipfile
from pathlib import Path

import gymnasium as gym
import numpy as np
import pytest

pytest.importorskip("stable_baselines3")
pytest.importorskip("sb3_contrib")

import torch
from sfenv.agents import model_files
from sfenv.agents.learned import LearnedPolicy, _latest, _save, make_env_fn, train

from sfenv.app.cli import main
from sfenv.errors import InvalidInput, UntrustedCode
from sfenv.runs.protocol import ENV_VERSION
from sfenv.scenario import load_scenario

torch.set_num_threads(1)

#: episode fields measured on the wall clock (never equal between two runs)
WALL_CLOCK = ("decision_time_mean_s", "decision_time_max_s")
SCENARIO = load_scenario("spider-8").with_overrides(workload={"num_jobs": 5})


class _Payload:
    """Unpickling this creates the file ``path``: the stand-in for any program a pickle can run."""

    def __init__(self, path: Path):
        self.path = str(path)

    def __reduce__(self):
        return open, (self.path, "w")


@pytest.fixture(scope="module")
def run(tmp_path_factory) -> Path:
    """A run folder of a tiny sfenv train (maskable-ppo, VecNormalize on observations and rewards)."""
    path = train("maskable-ppo", "spider-8", total_timesteps=64, n_envs=1, out_dir=tmp_path_factory.mktemp("runs"),
                 env_kwargs={"num_jobs": 4}, algo_kwargs={"n_steps": 32, "batch_size": 32, "n_epochs": 1},
                 tensorboard=False, plot=False, eval_every=0, eval_seeds=[10_000])
    return path.parent


def _sb3_only(run: Path, dest: Path, stem: str = "model") -> Path:
    """Copy a run's SB3 files (zip, sidecar, VecNormalize pickle) to ``dest``, without the weights-only form."""
    dest.mkdir(parents=True)
    for name in (f"{stem}.zip", f"{stem}.json", f"{stem}_vecnormalize.pkl"):
        if (run / name).exists():
            shutil.copy(run / name, dest / name)
    return dest / f"{stem}.zip"


def _weights_only(run: Path, dest: Path) -> Path:
    """Copy a run's weights-only form of ``model`` to ``dest``; returns the spec's path."""
    dest.mkdir(parents=True)
    for suffix in (model_files.SPEC_SUFFIX, model_files.WEIGHTS_SUFFIX):
        shutil.copy(run / f"model{suffix}", dest / f"model{suffix}")
    return dest / f"model{model_files.SPEC_SUFFIX}"


def _with_pickle(zip_path: Path, out: Path, marker: Path) -> Path:
    """``zip_path`` with one more ``:serialized:`` entry in its ``data``, whose unpickling creates ``marker``."""
    with zipfile.ZipFile(zip_path) as src, zipfile.ZipFile(out, "w") as dst:
        for item in src.infolist():
            data = src.read(item.filename)
            if item.filename == "data":
                entries = json.loads(data)
                entries["extra"] = {":type:": "<class 'object'>",
                                    ":serialized:": base64.b64encode(pickle.dumps(_Payload(marker))).decode()}
                data = json.dumps(entries).encode()
            dst.writestr(item, data)
    shutil.copy(zip_path.with_suffix(".json"), out.with_suffix(".json"))
    return out


def _rows(policy: LearnedPolicy, seeds: tuple[int, ...] = (0, 1)) -> str:
    """The policy's episodes (the evaluator's rows, action logs) as JSON text, wall-clock times and name left out."""
    from sfenv.app.evaluate import run_policy_episode

    rows = [run_policy_episode(policy, SCENARIO, seed, record_actions=True) for seed in seeds]
    for row in rows:
        for key in (*WALL_CLOCK, "agent"):
            del row[key]
    return json.dumps(rows)  # NaN (no job finished) compares equal as text


def _assert_same_network(a: LearnedPolicy, b: LearnedPolicy) -> None:
    mine, theirs = a.model.policy.state_dict(), b.model.policy.state_dict()
    assert list(mine) == list(theirs)
    assert all(torch.equal(mine[name], theirs[name]) for name in mine)


def test_train_writes_the_weights_only_form_beside_every_model(run):
    for stem in ("model", "best_model"):
        spec_path, weights = run / f"{stem}.policy.json", run / f"{stem}.policy.npz"
        spec = json.loads(spec_path.read_text())
        assert spec["format"] == "sfenv-policy" and spec["format_version"] == 1 and spec["env_version"] == ENV_VERSION
        assert spec["algo"] == "maskable-ppo" and spec["weights"] == weights.name
        assert spec["weights_sha256"] == hashlib.sha256(weights.read_bytes()).hexdigest()
        assert spec["meta"] == json.loads((run / f"{stem}.json").read_text())  # the training sidecar
        assert spec["policy_kwargs"] == {"net_arch": {"pi": [128, 128], "vf": [128, 128]}}
        assert spec["observation_space"]["type"] == "Dict" and spec["action_space"] == {"type": "Discrete", "n": 17,
                                                                                        "start": 0}
        assert spec["normalization"]["norm_obs"] and spec["normalization"]["gamma"] == 0.999
        assert spec_path.stat().st_size < model_files.MAX_SPEC_BYTES
        with np.load(weights, allow_pickle=False) as arrays:  # plain arrays: numpy reads them without pickle
            assert all(arrays[name].dtype.kind == "f" for name in arrays.files)
            assert {"policy/action_net.weight", "obs_rms/queue/mean", "obs_rms/queue/var"} <= set(arrays.files)
    policy = LearnedPolicy(run / "model.zip")  # the zip names its weights-only twin
    assert policy.spec_path == run / "model.policy.json" and isinstance(policy.model, model_files.WeightsOnlyModel)
    assert policy.model.num_timesteps == 64 and policy.meta["vecnormalize"] == "model_vecnormalize.pkl"
    for given in (run / "model.policy.json", run / "model.policy.npz", f"maskable-ppo:{run / 'model.policy.json'}"):
        assert LearnedPolicy(given).spec_path == run / "model.policy.json"
    with pytest.raises(InvalidInput, match="exactly one"):  # a folder must name one spec
        LearnedPolicy(run)
    with pytest.raises(InvalidInput, match="a maskable-ppo policy, not ppo"):
        LearnedPolicy(f"ppo:{run / 'model.policy.json'}")
    # a results file identifies the model by the file played: the spec, which pins its weights by SHA-256
    from sfenv.app.evaluate import agent_settings
    from sfenv.runs.results import file_hash

    for given in (run / "model.zip", run / "model.policy.json", run / "model.policy.npz"):
        assert agent_settings(f"model:{given}")["model_sha"] == file_hash(run / "model.policy.json")


def test_the_weights_only_form_plays_the_sb3_zips_episodes_bit_for_bit(run, tmp_path):
    zip_path = _sb3_only(run, tmp_path / "sb3")
    with pytest.raises(UntrustedCode, match="SB3 .zip is code"):  # no weights-only twin: refused by default
        LearnedPolicy(zip_path)
    sb3 = LearnedPolicy(zip_path, trust_code=True)
    data = LearnedPolicy(run / "model.zip")
    assert sb3.spec_path is None and type(sb3.model).__name__ == "MaskablePPO"
    _assert_same_network(data, sb3)
    for key, rms in sb3.vec_normalize.obs_rms.items():
        mine = data.vec_normalize.obs_rms[key]
        assert np.array_equal(mine.mean, rms.mean) and np.array_equal(mine.var, rms.var) and mine.count == rms.count
    env = make_env_fn(SCENARIO, False, {})()
    raw, _ = env.reset(seed=0)
    normalised = data.normalize_obs(raw)
    assert all(np.array_equal(normalised[k], sb3.normalize_obs(raw)[k]) for k in raw)
    assert not np.array_equal(normalised["queue"], raw["queue"])  # the statistics change what the policy sees
    rows = _rows(data)
    assert rows == _rows(sb3)  # every metric, every job, every plan named, bit for bit
    assert all(r["finished"] and r["actions"]["decisions"] and not r["stopped_early"] for r in json.loads(rows))


@pytest.mark.parametrize(("algo", "normalize"), [("ppo", "none"), ("a2c", "reward"), ("dqn", "all")])
def test_unmasked_algorithms_round_trip(algo, normalize, tmp_path):
    """Flattened observations, no statistics / reward statistics only / a Box's, and classes in policy_kwargs."""
    from stable_baselines3 import A2C, DQN, PPO
    from stable_baselines3.common.vec_env import DummyVecEnv, VecNormalize

    env_kwargs = {"num_jobs": 4, "invalid_action_limit": 3}
    vec = DummyVecEnv([make_env_fn("spider-8", True, env_kwargs)])
    if normalize != "none":
        vec = VecNormalize(vec, norm_obs=normalize == "all", norm_reward=True)
    cls, hp = {"ppo": (PPO, {"n_steps": 32, "batch_size": 32, "n_epochs": 1}), "a2c": (A2C, {"n_steps": 8}),
               "dqn": (DQN, {"learning_starts": 8, "buffer_size": 64, "train_freq": 8})}[algo]
    kwargs = {"net_arch": [16], "activation_fn": torch.nn.ReLU}
    model = cls("MlpPolicy", vec, seed=0, device="cpu", policy_kwargs=kwargs, **hp)
    model.learn(32)
    folder = tmp_path / "run"
    folder.mkdir()
    _save(model, folder, "model", {"algo": algo, "env_kwargs": env_kwargs})
    spec = json.loads((folder / "model.policy.json").read_text())
    assert spec["policy_kwargs"]["activation_fn"] == {"$class": "torch.nn.modules.activation.ReLU"}
    if algo == "a2c":  # A2C adds its optimiser: a class and its settings
        assert spec["policy_kwargs"]["optimizer_class"] == {"$class": "torch.optim.rmsprop.RMSprop"}
    data = LearnedPolicy(folder / "model.policy.json")
    sb3 = LearnedPolicy(_sb3_only(folder, tmp_path / "sb3"), trust_code=True)
    assert data.spec.flatten and sb3.spec.flatten
    assert (data.vec_normalize is None) == (normalize == "none")
    assert (data.normalize_obs is None) == (normalize != "all")
    _assert_same_network(data, sb3)
    if normalize == "all":  # a Box observation's statistics
        raw = np.asarray(vec.get_original_obs()[0])
        assert np.array_equal(data.normalize_obs(raw), sb3.normalize_obs(raw))
        assert not np.array_equal(data.normalize_obs(raw), raw)
    assert _rows(data, (0,)) == _rows(sb3, (0,))


def test_a_pickle_in_a_model_zip_is_refused_and_never_runs(run, tmp_path, capsys):
    marker = tmp_path / "MARKER"
    folder = tmp_path / "submission"
    evil = _with_pickle(_sb3_only(run, folder), folder / "evil.zip", marker)
    play = ["--scenario", "spider-8", "--num-jobs", "3", "--seeds", "1", "--quiet"]
    with pytest.raises(UntrustedCode, match="an SB3 .zip is code"):
        LearnedPolicy(evil)
    assert main(["evaluate", "--agents", f"model:{evil}", *play]) == 2
    err = capsys.readouterr().err
    assert err == (f"sfenv: {evil}: refused: no weights-only form (evil.policy.json) is beside it, and an SB3 .zip "
                   "is code: loading it unpickles objects, which can run any program; if you trust where it came "
                   "from, pass --trust-model-code (Python: trust_code=True), or write its weights-only form once "
                   f"with `sfenv export-model {evil} --trust-model-code`\n")
    assert main(["leaderboard", "--agents", f"model:{evil}", "--scenarios", "spider-8", "--seeds", "1",
                 "--out-dir", str(tmp_path / "lb"), "--quiet"]) == 2
    assert main(["export-model", str(evil)]) == 2
    assert "refused" in capsys.readouterr().err
    assert not marker.exists()
    # with a weights-only twin beside it, the zip is never opened
    shutil.copy(run / "model.policy.npz", folder / "model.policy.npz")
    shutil.copy(run / "model.policy.json", folder / "evil.policy.json")
    assert LearnedPolicy(evil).spec_path == folder / "evil.policy.json"
    assert main(["evaluate", "--agents", f"model:{evil}", *play]) == 0
    assert not marker.exists()
    # trusted, the zip is loaded as what it is: code (documented), and it ran
    (folder / "evil.policy.json").unlink()
    assert main(["evaluate", "--agents", f"model:{evil}", *play, "--trust-model-code"]) == 0
    assert marker.exists()


def test_export_model_writes_the_weights_only_form_of_a_trusted_zip(run, tmp_path, capsys, monkeypatch):
    zip_path = _sb3_only(run, tmp_path / "old")
    assert main(["export-model", str(zip_path)]) == 2
    assert "--trust-model-code" in capsys.readouterr().err
    with monkeypatch.context() as patched:  # a full disk while the spec is written: one line, no file left
        def full(path, text):
            raise OSError(28, "No space left on device")

        patched.setattr(model_files, "atomic_write_text", full)
        assert main(["export-model", str(zip_path), "--trust-model-code"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith(f"sfenv: {zip_path}: cannot write") and "No space left" in err
    assert sorted(p.name for p in zip_path.parent.iterdir()) == ["model.json", "model.zip", "model_vecnormalize.pkl"]
    assert main(["export-model", str(zip_path), "--trust-model-code"]) == 0
    twin = zip_path.with_name("model.policy.json")
    assert f"wrote {twin}" in capsys.readouterr().out
    exported = LearnedPolicy(zip_path)
    assert exported.spec_path == twin
    _assert_same_network(exported, LearnedPolicy(run / "model.zip"))
    assert exported.meta == LearnedPolicy(run / "model.zip").meta
    assert main(["export-model", str(zip_path), "--trust-model-code"]) == 2  # never over an existing form
    assert "already there" in capsys.readouterr().err


def test_resume_and_rllib_checkpoints_need_trust(run, tmp_path, capsys):
    from sfenv.agents.rllib import META_FILE, RLlibPolicy

    shutil.copytree(run, tmp_path / "run")
    with pytest.raises(UntrustedCode, match="pickles"):
        train(total_timesteps=128, resume=tmp_path / "run")
    assert main(["train", "--resume", str(tmp_path / "run"), "--quiet"]) == 2
    assert capsys.readouterr().err.startswith(f"sfenv: {tmp_path / 'run'}: refused: resuming loads")
    assert main(["train", "--trust-model-code", "--quiet"]) == 2  # only a resume loads a model
    checkpoint = tmp_path / "rllib-ppo-spider-8-s0"
    checkpoint.mkdir()
    (checkpoint / META_FILE).write_text("{}")
    with pytest.raises(UntrustedCode, match="RLlib checkpoint is code"):  # before Ray is imported
        RLlibPolicy(checkpoint)
    assert main(["evaluate", "--agents", f"rllib:{checkpoint}", "--seeds", "1", "--quiet"]) == 2
    assert "--trust-model-code" in capsys.readouterr().err


def test_files_a_model_names_stay_in_its_folder(run, tmp_path):
    marker = tmp_path / "MARKER"
    outside = tmp_path / "elsewhere"
    outside.mkdir()
    (outside / "stats.pkl").write_bytes(pickle.dumps(_Payload(marker)))
    zip_path = _sb3_only(run, tmp_path / "model")
    sidecar = json.loads(zip_path.with_suffix(".json").read_text())
    (zip_path.parent / "link.pkl").symlink_to(outside / "stats.pkl")
    for name, message in (("../elsewhere/stats.pkl", "leads out of the model folder"),
                          (str(outside / "stats.pkl"), "is an absolute path"),
                          ("link.pkl", "leads out of the model folder")):
        zip_path.with_suffix(".json").write_text(json.dumps({**sidecar, "vecnormalize": name}))
        with pytest.raises(InvalidInput, match=message):
            LearnedPolicy(zip_path, trust_code=True)
    assert not marker.exists()
    (zip_path.parent / "other.pkl").write_bytes(pickle.dumps(3))  # a pickle, but not statistics: one line
    zip_path.with_suffix(".json").write_text(json.dumps({**sidecar, "vecnormalize": "other.pkl"}))
    with pytest.raises(InvalidInput, match="holds a int, not VecNormalize statistics"):
        LearnedPolicy(zip_path, trust_code=True)
    # the weights-only spec's weights field
    spec_path = _weights_only(run, tmp_path / "data")
    spec = json.loads(spec_path.read_text())
    shutil.copy(run / "model.policy.npz", outside / "w.npz")
    (spec_path.parent / "w.npz").symlink_to(outside / "w.npz")
    for name in ("../elsewhere/w.npz", str(outside / "w.npz"), "w.npz"):
        spec_path.write_text(json.dumps({**spec, "weights": name}))
        with pytest.raises(InvalidInput, match="leads out of the model folder|is an absolute path"):
            LearnedPolicy(spec_path)
    # a resumed run's sidecar too
    run_copy = tmp_path / "resumed"
    shutil.copytree(run, run_copy)
    meta = json.loads((run_copy / "model.json").read_text())
    (run_copy / "model.json").write_text(json.dumps({**meta, "vecnormalize": "../elsewhere/stats.pkl"}))
    with pytest.raises(InvalidInput, match="leads out of the model folder"):
        _latest(run_copy)


def test_files_that_are_not_regular_are_refused_at_once(run, tmp_path):
    spec_path = _weights_only(run, tmp_path / "data")
    weights = spec_path.with_name("model.policy.npz")
    weights.unlink()
    os.mkfifo(weights)  # reading a FIFO would block until a writer comes
    device = tmp_path / "zero.policy.json"
    device.symlink_to("/dev/zero")  # endless
    (tmp_path / "dir.policy.json").mkdir()
    for path in (spec_path, device, tmp_path / "dir.policy.json"):
        started = time.perf_counter()
        with pytest.raises(InvalidInput, match="is not a regular file"):
            LearnedPolicy(path)
        assert time.perf_counter() - started < 2
    with pytest.raises(InvalidInput, match="not a regular file"):
        LearnedPolicy("maskable-ppo:/dev/zero", trust_code=True)
    with pytest.raises(UntrustedCode):
        LearnedPolicy("maskable-ppo:/dev/zero")
    big = tmp_path / "big.policy.json"
    big.write_text(" " * model_files.MAX_SPEC_BYTES + "{}")
    with pytest.raises(InvalidInput, match="at most 1,048,576 are read"):
        LearnedPolicy(big)


def _npz(arrays: dict[str, np.ndarray], compressed: bool = False, allow_pickle: bool = False) -> bytes:
    buffer = io.BytesIO()
    (np.savez_compressed if compressed else np.savez)(buffer, allow_pickle=allow_pickle, **arrays)
    return buffer.getvalue()


def _arrays(run: Path) -> dict[str, np.ndarray]:
    with np.load(run / "model.policy.npz") as found:
        return {name: found[name] for name in found.files}


def _mutated_spec(run: Path, change) -> dict:
    spec = json.loads((run / "model.policy.json").read_text())
    change(spec)
    return spec


SPEC_CASES = {
    "format": (lambda s: s.update(format="pickle"), "format 'pickle'"),
    "field missing": (lambda s: s.pop("policy_class"), "policy_class: expected str"),
    "field of another type": (lambda s: s.update(num_timesteps="64"), "num_timesteps: expected int"),
    "policy class not allowed": (lambda s: s.update(policy_class="os.system"), "'os.system' is not one"),
    "class not allowed": (lambda s: s["policy_kwargs"].update(activation_fn={"$class": "builtins.eval"}),
                          "'builtins.eval' is not one"),
    "keyword not taken": (lambda s: s["policy_kwargs"].update(layers=3), "do not build a policy"),
    "other layer sizes": (lambda s: s["policy_kwargs"].update(net_arch=[8]), "do not fit the policy"),
    "layer sizes no weight has": (lambda s: s["policy_kwargs"]["net_arch"].update(pi=[3001, 3001]),
                                  r"net_arch\.pi\[0\]: 3001 is not a size of any policy array"),
    "more layers than weights": (lambda s: s["policy_kwargs"]["net_arch"].update(pi=[128] * 500),
                                 "502 layers; the weights file holds"),
    "a layer size not an integer": (lambda s: s["policy_kwargs"]["net_arch"].update(vf=[128, "128"]),
                                    r"net_arch\.vf\[1\]: 128 is not a size"),
    "negative size": (lambda s: s["observation_space"]["spaces"][0][1].update(shape=[-1]), r"candidates\.shape"),
    "huge space": (lambda s: s["observation_space"]["spaces"][0][1].update(shape=[10**9]), "elements; at most"),
    "bound": (lambda s: s["observation_space"]["spaces"][0][1].update(low="zero"), r"candidates\.low"),
    "space type": (lambda s: s["action_space"].update(type="Tuple"), r"action_space\.type"),
    "env setting": (lambda s: s["meta"]["env_kwargs"].update(scenario="/dev/zero"), "not a setting of GeoSchedEnv"),
    "statistics": (lambda s: s["normalization"].pop("obs_count"), "observation statistics|obs_count"),
    "sha": (lambda s: s.update(weights_sha256="0" * 64), "SHA-256"),
}


@pytest.mark.parametrize("case", sorted(SPEC_CASES))
def test_a_malformed_spec_is_one_clear_error(run, tmp_path, case):
    change, message = SPEC_CASES[case]
    spec_path = _weights_only(run, tmp_path / "data")
    spec_path.write_text(json.dumps(_mutated_spec(run, change)))
    with pytest.raises(InvalidInput, match=message) as caught:
        LearnedPolicy(spec_path)
    assert str(spec_path) in str(caught.value)


def test_layers_larger_than_the_weights_file_are_refused_before_they_are_built(run, tmp_path, capsys):
    """A weights file with an array of the width the spec names still cannot hold 3000 x 3000 layers."""
    arrays = {**_arrays(run), "policy/padding": np.zeros(3000, np.float32)}
    data = _npz(arrays)
    spec_path = _weights_only(run, tmp_path / "m")
    spec_path.with_name("model.policy.npz").write_bytes(data)
    spec = _mutated_spec(run, lambda s: s["policy_kwargs"]["net_arch"].update(pi=[3000, 3000]))
    spec_path.write_text(json.dumps({**spec, "weights_sha256": hashlib.sha256(data).hexdigest()}))
    _assert_one_line(spec_path, "policy_kwargs.net_arch.pi: layers of", "huge layers", capsys, cli=True)


def test_malformed_files_are_one_line_in_the_cli(run, tmp_path, capsys):
    arrays = _arrays(run)
    transposed = {**arrays, "policy/action_net.weight": arrays["policy/action_net.weight"].T.copy()}
    weights_cases = {
        "not an npz": (b"PK\x03\x04 not a zip", "is not an .npz archive"),
        "an object array (a pickle)": (_npz({**arrays, "policy/action_net.bias": np.array([{}], dtype=object)},
                                            allow_pickle=True), "not a readable plain array"),
        "compressed": (_npz(arrays, compressed=True), "is compressed"),
        "a weight missing": (_npz({k: v for k, v in arrays.items() if k != "policy/value_net.bias"}),
                             "do not fit the policy"),
        "a weight of another shape": (_npz(transposed), "weight action_net.weight is float32"),
        "float64 weights": (_npz({k: v.astype(np.float64) for k, v in arrays.items()}), "the policy needs float32"),
    }
    spec_cases = {"not JSON": ("{", "is not valid JSON"), "NaN": ('{"format": NaN}', "is not valid JSON"),
                  "an array": ("[]", "must be a JSON object"), "too deep": ("[" * 100_000, "is not valid JSON")}
    for i, (case, (data, message)) in enumerate(weights_cases.items()):
        spec_path = _weights_only(run, tmp_path / f"w{i}")
        spec_path.with_name("model.policy.npz").write_bytes(data)
        spec_path.write_text(json.dumps({**json.loads(spec_path.read_text()),
                                         "weights_sha256": hashlib.sha256(data).hexdigest()}))
        _assert_one_line(spec_path, message, case, capsys, cli=i % 2 == 0)
    for i, (case, (text, message)) in enumerate(spec_cases.items()):
        spec_path = _weights_only(run, tmp_path / f"s{i}")
        spec_path.write_text(text)
        _assert_one_line(spec_path, message, case, capsys, cli=i % 2 == 1)


def _assert_one_line(spec_path: Path, message: str, case: str, capsys, cli: bool) -> None:
    """``InvalidInput`` in Python; with ``cli``, also exit 2 and one ``sfenv:`` line naming the file in the CLI."""
    with pytest.raises(InvalidInput, match=message):
        LearnedPolicy(spec_path)
    if not cli:
        return
    assert main(["evaluate", "--agents", f"model:{spec_path}", "--seeds", "1", "--quiet"]) == 2, case
    err = capsys.readouterr().err
    assert err.startswith(f"sfenv: {spec_path.parent}") and err.count("\n") == 1 and message in err, case


@pytest.mark.parametrize("space", [
    gym.spaces.Box(0, 1, (3,), bool),
    gym.spaces.Box(np.array([0, -np.inf], np.float32), np.array([1, 2], np.float32)),
    gym.spaces.Box(-1, 5, (2, 3), np.int64),
    gym.spaces.MultiBinary([2, 3]),
    gym.spaces.MultiDiscrete([3, 4]),
    gym.spaces.Discrete(5, start=-2),
], ids=str)
def test_spaces_round_trip_through_json(space):
    data = json.loads(json.dumps(model_files.space_to_json(space), allow_nan=False))  # strict JSON
    back = model_files.space_from_json(data, "space")
    assert back == space and type(back) is type(space)
    if hasattr(space, "low"):
        assert back.dtype == space.dtype
        assert np.array_equal(back.low, space.low) and np.array_equal(back.high, space.high)
