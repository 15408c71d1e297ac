"""Ctrl-C during a sampling run: a request to stop at the next chunk boundary, not an exception.

Python raises KeyboardInterrupt at whatever bytecode the main thread runs when SIGINT arrives: between two
sampling rounds (where no handler keeps the draws), or inside a garbage-collection callback, where the
interpreter prints "Exception ignored" and the run goes on as if nothing happened. While a run samples,
:func:`stop_on_sigint` replaces Python's default handler by one that only records the request; the run
reads it between chunks (:meth:`StopRequest.asked`) and ends there with the draws of every chunk run,
the chunk in flight included. A second Ctrl-C raises KeyboardInterrupt at once, as usual.
"""

from __future__ import annotations

import contextlib
import signal
import sys
import threading

import jax
import numpy as np


class StopRequest:
    """Whether Ctrl-C asked the run to stop."""

    def __init__(self):
        self.requested = False

    def asked(self) -> bool:
        """The request; with several processes (``jax.distributed``), process 0's, sent to all, so that every
        process stops after the same chunk (one that stopped alone would leave the others waiting in a
        collective). Every process must call it at the same points of the run."""
        if jax.process_count() == 1:
            return self.requested
        from jax.experimental import multihost_utils

        return bool(multihost_utils.broadcast_one_to_all(np.int32(self.requested)))


@contextlib.contextmanager
def stop_on_sigint():
    """A :class:`StopRequest` that the first SIGINT sets while the block runs. The handler is installed only
    in the main thread and only over Python's default one: a handler of the caller's own (or a thread
    that cannot receive signals) is left alone, and KeyboardInterrupt still ends the run as before."""
    request = StopRequest()
    if threading.current_thread() is not threading.main_thread() \
            or signal.getsignal(signal.SIGINT) is not signal.default_int_handler:  # fmt: skip
        yield request
        return

    def ask_to_stop(signum, frame):
        if request.requested:
            signal.signal(signal.SIGINT, signal.default_int_handler)
            raise KeyboardInterrupt
        request.requested = True
        print("\nCtrl-C: stopping after the chunk in flight, with the draws so far; "
              "press it again to abort without them", file=sys.stderr, flush=True)  # fmt: skip

    signal.signal(signal.SIGINT, ask_to_stop)
    try:
        yield request
    finally:
        signal.signal(signal.SIGINT, signal.default_int_handler)
