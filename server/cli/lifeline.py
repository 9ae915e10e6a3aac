"""A worker of `gateway serve --workers N` ends with its supervisor.

The kernel sends the worker SIGTERM when the supervisor exits, however it exits (a
kill -9 included: PR_SET_PDEATHSIG, Linux only), so no worker keeps serving the ports
unsupervised and the next start finds them free. SIGTERM is the worker's usual stop:
calls in flight finish and its ledger drains.
"""

from __future__ import annotations

import ctypes
import os
import signal
import sys

# The supervisor's process id, which it gives its workers.
SUPERVISOR = "GATEWAY_SUPERVISOR_PID"
# prctl(2): the signal this process gets when its parent exits.
PR_SET_PDEATHSIG = 1


def follow_supervisor() -> None:
    """Asks for SIGTERM when the supervisor exits; exits now if it already has (it went
    before the request was made, so the signal would never come)."""
    supervisor = os.environ.get(SUPERVISOR)
    if supervisor is None:
        return
    if sys.platform == "linux":
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(PR_SET_PDEATHSIG, signal.SIGTERM, 0, 0, 0)
    if os.getppid() != int(supervisor):
        sys.exit("gateway: the supervisor has exited; this worker stops")
