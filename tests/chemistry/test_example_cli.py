"""The examples' command line, progress and plots (issue 14, item 10): --help gives every
option a help text and its default, progress is plain lines when not on a terminal, output
goes to the folder named by --out, and the plots show what matters."""
from __future__ import annotations

import importlib
import re
import sys

import numpy as np
import pytest

EXAMPLES = ("lj_clusters", "md_lj", "fit_potential")


def _help(module_name: str, capsys) -> str:
    module = importlib.import_module(module_name)
    with pytest.raises(SystemExit):
        module.parse(["--help"])
    return capsys.readouterr().out


@pytest.mark.parametrize("name", EXAMPLES)
def test_help_gives_every_option_a_text_and_its_default(examples_path, capsys, name):
    text = _help(name, capsys)
    options = text.split("options:")[1]
    entries = re.split(r"\n  (?=-)", options)[1:]            # one per option
    assert len(entries) >= 8
    for entry in entries:
        flag = entry.split()[0]
        if flag.startswith("-h"):
            continue
        words = " ".join(entry.split()[1:])
        assert "default" in words, f"{name} {flag}: no default shown in {entry!r}"
        assert "(default: None)" not in words, f"{name} {flag}"


def test_progress_is_plain_lines_off_a_terminal(examples_path, capsys, monkeypatch):
    import common
    monkeypatch.setattr(sys.stderr, "isatty", lambda: False, raising=False)
    update = common.progress("hopping")
    for done in range(1, 21):
        update(done, 20)
    captured = capsys.readouterr()
    lines = captured.out.strip().splitlines()
    assert "\r" not in captured.out + captured.err
    assert 2 <= len(lines) <= 11 and lines[-1].startswith("hopping: 20/20")


def test_progress_uses_tqdm_on_a_terminal(examples_path, monkeypatch):
    import common
    import tqdm
    made = []
    monkeypatch.setattr(sys.stderr, "isatty", lambda: True, raising=False)
    monkeypatch.setattr(tqdm, "tqdm", lambda **kw: made.append(kw) or _Bar())
    update = common.progress("md")
    update(1, 3)
    update(3, 3)
    assert made == [{"total": 3, "desc": "md"}]


class _Bar:
    n = 0

    def update(self, k):
        self.n += k

    def close(self):
        pass


def test_lj_plot_shows_the_distance_to_the_published_minimum(examples_path):
    matplotlib = pytest.importorskip("matplotlib")
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import lj_clusters
    history = [-40.0, -44.0, -44.3268, -44.326801]
    fig = plt.figure()
    found = np.array([-44.326801, -44.3, -43.9, -44.326801])
    lj_clusters._draw(fig, history, -44.326801, 13, found, "basin")
    ax = fig.axes[0]
    assert ax.get_yscale() == "log"
    trace = ax.get_lines()[0].get_ydata()
    np.testing.assert_allclose(trace[:3], np.asarray(history[:3]) + 44.326801, rtol=1e-9)
    assert trace[-1] > 0                                   # reached: drawn at the floor, still visible
    counts = [patch.get_height() for patch in fig.axes[1].patches]
    assert sum(counts) == len(found)                       # every walker's end point is in the histogram
    plt.close(fig)


def test_md_plot_gives_the_total_energy_drift_its_own_axis(examples_path):
    matplotlib = pytest.importorskip("matplotlib")
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import md_lj
    n = 100
    step = np.arange(5)
    kinetic = 150.0 + 20.0 * np.sin(step)
    record = {"step": step, "kinetic": kinetic, "potential": -600.0 - 20.0 * np.sin(step) + 1e-3 * step,
              "total": -450.0 + 1e-3 * step}
    fig = plt.figure()
    md_lj._draw_energy(fig, record, n)
    drift_axis = fig.axes[0]
    np.testing.assert_allclose(drift_axis.get_lines()[0].get_ydata(), 1e-5 * step, atol=1e-12)
    assert drift_axis.get_ylim()[1] < 1e-3                 # scaled to the drift, not to the exchange
    plt.close(fig)
