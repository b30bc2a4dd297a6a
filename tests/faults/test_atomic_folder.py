"""An atomic folder left by an error or Ctrl-C is removed even while a thread of this process still writes into it.

After Ctrl-C, ``write_results`` does not wait for the figure under way (the drawing thread ends after it); the
temporary folder must go all the same (CI once found it left behind: a figure file created between the removal's
listing and its final ``rmdir``).
"""

from __future__ import annotations

import threading
import time

import pytest

from poslab._atomic import AtomicFolder


def _scribble(folder, stop: threading.Event, made: list) -> None:
    """Create files in ``folder`` as fast as possible, as a figure being saved would, until stopped."""
    i = 0
    while not stop.is_set():
        try:
            (folder / f".poslab-tmp-figure-{i}.png").write_bytes(b"x" * 64)
            made.append(i)
        except OSError:  # the folder is gone: as a figure's save fails then
            pass
        i += 1


@pytest.mark.parametrize("error", [KeyboardInterrupt, RuntimeError])
def test_a_folder_still_written_by_a_thread_is_removed(tmp_path, error):
    for attempt in range(30):  # the race is narrow: try it often
        parent = tmp_path / str(attempt)
        stop, made = threading.Event(), []
        with pytest.raises(error):
            with AtomicFolder(parent / "res", what="results folder") as folder:
                thread = threading.Thread(target=_scribble, args=(folder.path, stop, made), daemon=True)
                thread.start()
                while len(made) < 20:  # writing under way
                    time.sleep(0.001)
                raise error()  # the folder is removed on leaving the block, the thread still writing into it
        stop.set()
        thread.join(10)
        assert not thread.is_alive()
        assert sorted(p.name for p in parent.iterdir()) == [], f"attempt {attempt}: a temporary was left"
