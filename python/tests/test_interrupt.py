"""Ctrl-C cancels a running query with KeyboardInterrupt, and the session stays usable."""
import os
import signal
import threading
import time

import pyarrow as pa

import tsjoin


def test_keyboard_interrupt_cancels_a_long_query():
    # Python only installs its KeyboardInterrupt handler when SIGINT is not
    # ignored at start-up, and shells start background jobs (CI runners, `&`)
    # with SIGINT ignored; an interactive session has the default handler, so
    # install it here for the duration of the test.
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        _interrupt_a_long_query()
    finally:
        signal.signal(signal.SIGINT, previous)


def _interrupt_a_long_query():
    ctx = tsjoin.SessionContext(threads=2)
    ctx.register("t", pa.table({"x": list(range(120_000))}))
    # A filtered cross join of 1.4e10 pairs: tens of seconds of work. (After the
    # interrupt the workers finish the batch they are on: DataFusion cancels
    # at the next yield.)
    slow = ctx.sql("SELECT count(*) FROM t a, t b WHERE a.x + b.x = -1")
    timer = threading.Timer(0.5, lambda: os.kill(os.getpid(), signal.SIGINT))
    start = time.monotonic()
    timer.start()
    try:
        slow.to_arrow()
        raise AssertionError("the query was not interrupted")
    except KeyboardInterrupt:
        pass
    finally:
        timer.cancel()
    assert time.monotonic() - start < 10
    assert ctx.sql("SELECT 1 AS one").to_arrow().to_pydict() == {"one": [1]}
