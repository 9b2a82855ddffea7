"""The peer converters (tflite2onnx, tf2onnx) in their own virtual environment, installed on first use.

They get a separate venv because tf2onnx's `--tflite` path needs TensorFlow (it asks tf.lite.Interpreter for
tensor details), and TensorFlow caps numpy below what the app's environment uses; neither is ever a dependency of
the app or its tests.
"""
from __future__ import annotations

import json
import os
import select
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
VENV = HERE / ".peers-venv"
PYTHON = VENV / "bin" / "python"
DRIVER = HERE / "peer_driver.py"
# Exact versions the bench was measured with; numpy/protobuf are what TensorFlow 2.21 accepts (numpy < 2.5).
REQUIREMENTS = ["tflite2onnx==0.4.1", "tf2onnx==1.17.0", "tensorflow-cpu==2.21.0",
                "numpy==2.4.6", "protobuf==7.36.2", "onnx==1.23.2"]
PEERS = ("tflite2onnx", "tf2onnx")


def ensure_venv(log=lambda msg: print(msg, flush=True)) -> Path:
    """Create/refresh the peers' venv with pip; a stamp file records what was installed."""
    stamp = VENV / ".installed"
    want = "\n".join(REQUIREMENTS)
    if stamp.exists() and stamp.read_text() == want and PYTHON.exists():
        return PYTHON
    t0 = time.perf_counter()
    log(f"installing peers into {VENV} ({', '.join(REQUIREMENTS[:3])}) ...")
    if not PYTHON.exists():
        subprocess.run([_base_python(), "-m", "venv", str(VENV)], check=True)
    pip = [str(PYTHON), "-m", "pip", "install", "-q", "--disable-pip-version-check"]
    subprocess.run(pip + ["--upgrade", "pip"], check=True)
    subprocess.run(pip + REQUIREMENTS, check=True)
    stamp.write_text(want)
    log(f"peers installed in {time.perf_counter() - t0:.0f} s")
    return PYTHON


def _base_python() -> str:
    """The interpreter the app's venv was made from (a venv made from a venv would still work, this is tidier)."""
    return getattr(sys, "_base_executable", None) or sys.executable


def versions() -> dict[str, str]:
    code = ("import importlib.metadata as m, json; print(json.dumps({p: m.version(p) for p in "
            "['tflite2onnx', 'tf2onnx', 'tensorflow-cpu', 'numpy', 'onnx', 'protobuf']}))")
    out = subprocess.run([str(PYTHON), "-c", code], capture_output=True, text=True)
    return json.loads(out.stdout) if out.returncode == 0 else {}


class Driver:
    """One long-lived peer process (bench/peer_driver.py): imports once, then converts model after model.
    A crash or a timeout is that model's failure; the next model gets a fresh process."""

    def __init__(self, peer: str):
        self.peer = peer
        self.proc: subprocess.Popen | None = None
        self.log = None

    def _start(self) -> None:
        self.log = tempfile.TemporaryFile("w+")
        self.proc = subprocess.Popen([str(PYTHON), str(DRIVER), self.peer], stdin=subprocess.PIPE,
                                     stdout=subprocess.PIPE, stderr=self.log, text=True, env=_quiet_env())
        ready = self._answer(300)
        if not ready or not ready.get("ready"):
            raise RuntimeError(f"{self.peer} driver did not start: {self._tail()}")

    def _answer(self, timeout: float) -> dict | None:
        if not select.select([self.proc.stdout], [], [], timeout)[0]:
            return None
        line = self.proc.stdout.readline()
        return json.loads(line) if line else None

    def _tail(self) -> str:
        self.log.seek(0)
        lines = [x for x in self.log.read().strip().splitlines() if x.strip()]
        return lines[-1][:160] if lines else "no message"

    def convert(self, model: Path, out: Path, runs: int, timeout: float = 900, adapt: bool = True) -> dict:
        """A warm-up + `runs` timed conversions (more for fast ones with `adapt`): {ok, times (s), warmup, error}."""
        try:
            if self.proc is None or self.proc.poll() is not None:
                self._start()
            self.proc.stdin.write(json.dumps({"model": str(model), "out": str(out), "runs": runs, "adapt": adapt}) + "\n")
            self.proc.stdin.flush()
            answer = self._answer(timeout)
        except (RuntimeError, BrokenPipeError, OSError, ValueError) as e:
            answer, err = None, str(e)
        else:
            err = None
        if answer is not None:
            return answer
        if err is None and self.proc.poll() is None:
            err = f"timeout after {timeout:.0f} s"
        elif err is None:
            err = f"process died (exit {self.proc.returncode}): {self._tail()}"
        self.close()
        return {"ok": False, "error": err}

    def close(self) -> None:
        if self.proc is not None:
            if self.proc.poll() is None:
                self.proc.kill()
            self.proc.wait()
            self.proc = None


def cli_command(peer: str, model: Path, out: Path) -> list[str]:
    if peer == "tflite2onnx":
        return [str(VENV / "bin" / "tflite2onnx"), str(model), str(out)]
    return [str(PYTHON), "-m", "tf2onnx.convert", "--tflite", str(model), "--output", str(out)]


def _quiet_env() -> dict:
    env = dict(os.environ)
    env.update(TF_CPP_MIN_LOG_LEVEL="3", PYTHONWARNINGS="ignore")
    return env


def cli_env() -> dict:
    return _quiet_env()
