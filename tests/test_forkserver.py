"""The tests' forkserver (tests/_forkserver.py) runs a script as a new Python would: a
test harness that hid a failure would make the tests that use it unable to fail."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from tests import _forkserver
from tests._scripts import run_snippet

PRELOAD = _forkserver.DOC_SNIPPETS


def test_a_forked_script_reports_its_output_exit_status_and_traceback(tmp_path: Path) -> None:
    script = tmp_path / "fails.py"
    script.write_text(
        "import os, sys\n"
        "print('argv', sys.argv[1:], 'cwd', os.getcwd(), 'name', __name__)\n"
        "print('env', os.environ.get('FORKED_TEST'), 'path0', sys.path[0])\n"
        "print('warned', file=sys.stderr)\n"
        "if sys.argv[1] == 'raise':\n"
        "    raise RuntimeError('as a script does')\n"
        "sys.exit(int(sys.argv[1]))\n"
    )
    env = {**os.environ, "FORKED_TEST": "yes"}
    for arg, code in (("0", 0), ("3", 3), ("raise", 1)):
        argv = [sys.executable, str(script), arg]
        done = _forkserver.run(argv, env=env, cwd=tmp_path, timeout=30, preload=PRELOAD)
        assert done.returncode == code
        assert done.stdout == (
            f"argv ['{arg}'] cwd {tmp_path} name __main__\nenv yes path0 {tmp_path}\n"
        )
        assert done.stderr.startswith("warned\n")
    assert done.stderr.endswith("RuntimeError: as a script does\n")


def test_a_snippet_past_its_timeout_is_killed(tmp_path: Path) -> None:
    script = tmp_path / "slow.py"
    script.write_text("import time\nprint('started', flush=True)\ntime.sleep(60)\n")
    with pytest.raises(subprocess.TimeoutExpired) as info:
        run_snippet(script, timeout=1)
    assert info.value.output == b"started\n"


def test_a_forked_server_keeps_its_socket_number_and_answers_signals(tmp_path: Path) -> None:
    listening = socket.socket()
    listening.bind(("127.0.0.1", 0))
    listening.listen(1)
    script = tmp_path / "serve.py"
    script.write_text(
        "import socket, sys\n"
        "sock = socket.socket(fileno=int(sys.argv[1]))\n"
        "conn, _ = sock.accept()\n"
        "conn.sendall(b'hello')\n"
        "conn.recv(1)\n"
    )
    fd, port = listening.fileno(), listening.getsockname()[1]
    proc = _forkserver.spawn([sys.executable, str(script), str(fd)], pass_fds=[fd])
    listening.close()  # the child has its own copy, under the same number
    with socket.create_connection(("127.0.0.1", port), timeout=30) as conn:
        assert conn.recv(5) == b"hello"
        assert proc.poll() is None
        assert os.readlink(f"/proc/{proc.pid}/fd/{fd}").startswith("socket:")
        proc.kill()
        assert proc.wait(10) == -signal.SIGKILL
    assert proc.poll() == -signal.SIGKILL


def test_a_child_that_cannot_start_fails_alone(tmp_path: Path) -> None:
    # A child failing before its script runs (here, a working directory that is gone)
    # once ran the forkserver's own clean-up in the child, killing its siblings.
    sleeper = tmp_path / "sleeper.py"
    sleeper.write_text("import time\ntime.sleep(60)\n")
    sibling = _forkserver.spawn([sys.executable, str(sleeper)])
    try:
        broken = _forkserver.spawn([sys.executable, str(sleeper)], cwd=tmp_path / "gone")
        assert broken.wait(30) == 1
        assert sibling.poll() is None
        # A spawn its caller gave up on (its status socket closed at once) does not end
        # the forkserver either: the next one starts.
        forkserver = _forkserver.FORKSERVERS[_forkserver.MCP_SERVERS]
        given_up = forkserver.spawn([sys.executable, str(sleeper)], (), None, (None, 1, 2), None)
        given_up._status.close()
        again = _forkserver.spawn([sys.executable, str(sleeper)])
        again.kill()
        assert again.wait(10) == -signal.SIGKILL
        assert sibling.poll() is None
        given_up.kill()
    finally:
        sibling.kill()
        assert sibling.wait(10) == -signal.SIGKILL
        sibling.kill()  # ended and waited for: signals nothing, raises nothing


def test_a_forked_script_ends_as_the_interpreter_ends_it(tmp_path: Path) -> None:
    # The child runs its script at the top of _forkserver.py, not inside its loop: an
    # interrupt ends it by SIGINT, and what runs at interpreter exit runs.
    script = tmp_path / "ends.py"
    script.write_text(
        "import sys\n"
        "class Late:\n"
        "    def __del__(self):\n"
        "        print('finalized', flush=True)\n"
        "keep = Late()\n"
        "if sys.argv[1] == 'interrupt':\n"
        "    raise KeyboardInterrupt\n"
        "sys.exit('a message')\n"
    )
    env, cwd = dict(os.environ), tmp_path
    argv = [sys.executable, str(script)]
    done = _forkserver.run([*argv, "interrupt"], env=env, cwd=cwd, timeout=30, preload=PRELOAD)
    assert done.returncode == -signal.SIGINT
    assert done.stderr.endswith("KeyboardInterrupt\n")
    done = _forkserver.run([*argv, "exit"], env=env, cwd=cwd, timeout=30, preload=PRELOAD)
    assert (done.returncode, done.stdout, done.stderr) == (1, "finalized\n", "a message\n")
