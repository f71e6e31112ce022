"""Progress without noise (issue 35, item 6): no dependency warning on import, no bar escape
codes in a log, bars where someone watches (a terminal, Jupyter), and no "IProgress not found"
without ipywidgets."""

from __future__ import annotations

import fcntl
import io
import os
import pty
import struct
import subprocess
import sys
import termios
import textwrap

import pytest

from reward_lens_tl.progress import in_notebook, progress_bar

ENV = {**os.environ, "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1", "PYTHONWARNINGS": ""}

#: Three long jobs with their bars asked for: scoring pairs, a benchmark, a token sweep.
JOBS = textwrap.dedent(
    """
    from types import SimpleNamespace as Pair
    from reward_lens_tl import HookedRewardModel
    from reward_lens_tl.data import RankedItem
    from reward_lens_tl.evals.run import score_items
    from reward_lens_tl.scoring import score_pairs
    from reward_lens_tl.sweep.runner import token_sweep
    from reward_lens_tl.zoo import zoo_path

    model = HookedRewardModel.from_pretrained(zoo_path("scalar"))
    pair = Pair(prompt="explain how to bake bread", chosen="the oven", rejected="the bomb")
    score_pairs(model, [pair] * 40, batch_size=4, progress=True)
    items = [RankedItem("how bake bread", "oven bread", ("rain",))] * 6
    score_items(model, items, batch_size=2, progress=True)
    token_sweep(model, "explain how to bake bread", chunk_size=8, progress=True)
    print("done")
    """
)


def run_python(code: str, *options: str, **kwargs) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, *options, "-c", code], env=ENV, timeout=600, text=True, **kwargs
    )


@pytest.mark.parametrize(
    "statements",
    [
        "import reward_lens_tl; import reward_lens_tl.model",
        "from reward_lens_tl import HookedRewardModel\n"
        "import reward_lens_tl.views, reward_lens_tl.sae.training, reward_lens_tl.evals.run\n"
        "from reward_lens_tl.zoo import zoo_path\n"
        "model = HookedRewardModel.from_pretrained(zoo_path('scalar'))\n"
        "model.score('explain how to bake bread', 'the bomb')",
    ],
)
def test_importing_shows_no_dependency_warning(statements):
    """Every warning shown (`always`), a deprecation an error: none may come, on import or on
    loading a model (TransformerLens deprecates the `HookedTransformer` it is built on)."""
    out = run_python(
        statements, "-W", "always", "-W", "error::DeprecationWarning", capture_output=True
    )
    assert out.returncode == 0 and out.stderr == "", out.stderr[-3000:]


def test_only_those_warnings_are_silenced():
    """The filters name the message and the module: the same message from another module, and
    another warning from sae_lens, still show."""
    code = textwrap.dedent(
        """
        import warnings
        import reward_lens_tl
        ours = [f for f in warnings.filters if f[1] is not None]  # the filters naming a message
        tl = "The 'utils' module has been deprecated. Please use 'transformer_lens.utilities'"
        tqdm = "IProgress not found. Please update jupyter and ipywidgets. See"
        shown = []
        for text, category, module in [
            (tl, DeprecationWarning, "sae_lens.load_model"),
            (tqdm, UserWarning, "tqdm.auto"),
            (tl, DeprecationWarning, "my_analysis"),
            ("something else", DeprecationWarning, "sae_lens.load_model"),
            (tqdm, UserWarning, "my_analysis"),
        ]:
            with warnings.catch_warnings(record=True) as seen:
                warnings.filters[:] = ours
                warnings.simplefilter("always", append=True)  # behind the package's filters
                warnings.warn_explicit(text, category, "f.py", 1, module=module)
            shown.append(len(seen))
        print(shown)
        """
    )
    out = run_python(code, capture_output=True)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "[0, 0, 1, 1, 1]"


def test_a_long_job_logged_to_a_file_writes_no_bar(tmp_path):
    log = tmp_path / "stderr.log"
    with open(log, "w") as stderr:
        done = run_python(JOBS, stdout=subprocess.PIPE, stderr=stderr)
    text = log.read_text()
    assert done.returncode == 0 and done.stdout.strip() == "done", text[-2000:]
    assert "\r" not in text and "\x1b" not in text
    assert "%|" not in text  # no bar at all, not just no carriage returns


@pytest.mark.slow
def test_a_terminal_gets_one_bar_per_job():
    """The other side: in a terminal each job draws its bar (redrawn with `\\r`)."""
    leader, follower = pty.openpty()
    fcntl.ioctl(follower, termios.TIOCSWINSZ, struct.pack("HHHH", 24, 120, 0, 0))  # 120 columns
    with subprocess.Popen(
        [sys.executable, "-c", JOBS], env=ENV, stdout=subprocess.PIPE, stderr=follower
    ) as job:
        os.close(follower)
        chunks = []
        while True:
            try:
                chunk = os.read(leader, 65536)
            except OSError:  # the job closed the terminal
                break
            if not chunk:
                break
            chunks.append(chunk)
        assert job.wait(timeout=600) == 0
    os.close(leader)
    text = b"".join(chunks).decode(errors="replace")
    lines = [line for line in text.replace("\r", "\n").splitlines() if "%|" in line]
    started = [line.partition(":")[0] for line in lines if " 0%|" in line]
    finished = [line.partition(":")[0] for line in lines if "100%|" in line]
    assert "\r" in text and started == ["scoring", "rewardmath", "token sweep"], text[-3000:]
    assert list(dict.fromkeys(finished)) == started


def test_progress_bar_is_silent_off_a_terminal_and_shown_on_one():
    log = io.StringIO()
    assert list(progress_bar(range(3), desc="x", file=log)) == [0, 1, 2] and log.getvalue() == ""
    assert progress_bar(total=3, show=False).disable

    class Terminal(io.StringIO):
        def isatty(self):
            return True

    screen = Terminal()
    with progress_bar(total=3, desc="x", file=screen, mininterval=0) as bar:
        bar.update(3)
    assert "x: 100%" in screen.getvalue()


def notebook_session(widgets: bool) -> str:
    """Python code that makes tqdm and `in_notebook` see a Jupyter kernel."""
    return textwrap.dedent(
        f"""
        import sys, types
        import IPython
        class ZMQInteractiveShell: config = {{}}
        IPython.get_ipython = lambda: ZMQInteractiveShell()
        sys.modules["ipykernel.zmqshell"] = types.ModuleType("ipykernel.zmqshell")
        if not {widgets}:
            sys.modules["ipywidgets"] = None  # not installed
        """
    )


def test_jupyter_without_ipywidgets_gets_a_text_bar_and_no_warning():
    code = notebook_session(widgets=False) + textwrap.dedent(
        """
        import reward_lens_tl
        import tqdm.auto  # what sae_lens and transformers import: it warns without ipywidgets
        from reward_lens_tl.progress import in_notebook, progress_bar
        bar = progress_bar(total=2, desc="scoring")
        print(in_notebook(), type(bar).__module__, bar.disable)
        bar.update(2)
        bar.close()
        """
    )
    out = run_python(code, "-W", "always", capture_output=True)
    assert out.returncode == 0, out.stderr
    assert out.stdout.split() == ["True", "tqdm.std", "False"]  # shown: Jupyter redraws `\r`
    assert "IProgress" not in out.stderr and "Warning" not in out.stderr
    assert "scoring: 100%" in out.stderr


def test_jupyter_with_ipywidgets_gets_the_widget_bar():
    pytest.importorskip("ipywidgets")
    code = notebook_session(widgets=True) + textwrap.dedent(
        """
        from reward_lens_tl.progress import _widget_bar
        print(_widget_bar().__module__)
        """
    )
    out = run_python(code, capture_output=True)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "tqdm.notebook"


def test_not_a_notebook_here():
    assert in_notebook() is False
