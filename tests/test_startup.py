"""Start-up: ``import poslab`` and the quick commands load no plotting, table or fitting library.

Each check runs in a fresh interpreter (a module imported once stays in
``sys.modules``); what is measured is which modules get imported, never
time (timings are in benchmarks/startup.py).
"""

import subprocess
import sys

import pytest

#: Modules the quick paths must not import (matplotlib and seaborn draw; pandas builds tables;
#: scipy.stats and scipy.optimize fit): together about 1.5 s of start-up before issue 16.
HEAVY = ("matplotlib", "seaborn", "pandas", "scipy.stats", "scipy.optimize")

PROBE = """
import sys
HEAVY = {heavy!r}

def loaded():
    return sorted(m for m in sys.modules if any(m == h or m.startswith(h + ".") for h in HEAVY))

import poslab
assert not loaded(), ("import poslab", loaded())
from poslab.cli import main
for args in {commands!r}:
    try:
        main(args, prog_name="poslab", standalone_mode=False)
    except SystemExit:
        pass
    assert not loaded(), (args, loaded())
print("clean")
"""


def _probe(commands):
    code = PROBE.format(heavy=HEAVY, commands=commands)
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert done.returncode == 0 and done.stdout.strip().endswith("clean"), done.stderr
    return done


def test_import_poslab_and_quick_commands_load_no_heavy_library():
    """``import poslab``, then ``--help``, ``--version``, ``encodings`` and ``inspect`` in one interpreter:
    none of them (cumulatively) imports matplotlib, seaborn, pandas, scipy.stats or scipy.optimize."""
    _probe([["--help"], ["run", "--help"], ["--version"], ["encodings"], ["inspect", "gpt2"]])


def test_the_probe_sees_a_heavy_import():
    """The check above can fail: a command that does load pandas (a run's summary is a DataFrame) is caught."""
    code = PROBE.format(heavy=HEAVY, commands=[]).replace('print("clean")', "import pandas\nassert not loaded(), loaded()")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert done.returncode != 0 and "pandas" in done.stderr


@pytest.mark.parametrize("name", ["similarity_profile", "band_metrics", "fit_decay", "block_similarity",
                                  "cosine_similarity", "Encoding", "available_encodings", "make_encoding", "register"])
def test_public_names_still_import(name):
    import poslab
    import poslab.analysis

    assert callable(getattr(poslab, name)) and name in dir(poslab) and name in poslab.__all__
    assert all(hasattr(poslab.analysis, n) for n in poslab.analysis.__all__)
    with pytest.raises(AttributeError, match="no attribute 'not_a_name'"):
        poslab.not_a_name  # noqa: B018


def test_star_import_gives_the_public_api():
    namespace: dict = {}
    exec("from poslab import *", namespace)
    assert {"similarity_profile", "make_encoding", "__version__"} <= set(namespace)


def test_python_dash_m_poslab():
    done = subprocess.run([sys.executable, "-m", "poslab", "--version"], capture_output=True, text=True)
    assert done.returncode == 0 and done.stdout.startswith("poslab, version ")


def test_the_analysis_a_worker_imports_loads_neither_scipy_stats_nor_plotting():
    """What the workers' fork server preloads (poslab.study.runner: every stage and analysis function) needs no
    scipy.stats (0.4 s of start-up: its few quantiles come from scipy.special) and no matplotlib; what
    ``poslab run`` imports to start that server first (poslab.study.executors) loads nothing heavy at all."""
    code = ("import sys\nimport poslab.study.executors\n"
            "early = sorted(m for m in sys.modules if m.split('.')[0] in ('numpy', 'pandas', 'scipy', 'matplotlib'))\n"
            "assert not early, early\nimport poslab.study.runner\n"
            "late = [m for m in ('scipy.stats', 'matplotlib', 'seaborn') if m in sys.modules]\n"
            "assert not late, late")
    _clean(code)


def test_a_run_starts_before_scipy_fft_and_special_load():
    """``poslab run`` prints its first line and starts the analysis before scipy.fft and scipy.special (~0.25 s)
    are imported: the analysis imports them on first use, and the command imports them in its background thread
    meanwhile. What the run imports up front (poslab.study, the stages) must not pull them in again."""
    code = ("import sys\nimport poslab.study, poslab.study.runner, poslab.stages\n"
            "loaded = [m for m in ('scipy.fft', 'scipy.special', 'scipy.optimize') if m in sys.modules]\n"
            "assert not loaded, loaded\n"
            "import numpy as np\nfrom poslab import similarity_profile\n"
            "similarity_profile(np.random.default_rng(0).normal(size=(64, 8)))\n"
            "assert 'scipy.fft' in sys.modules")
    _clean(code)


def _clean(code):
    """Run ``code`` in a fresh interpreter: its asserts hold and it ends."""
    done = subprocess.run([sys.executable, "-c", code + "\nprint('clean')"], capture_output=True, text=True)
    assert done.returncode == 0 and done.stdout.strip() == "clean", done.stderr
