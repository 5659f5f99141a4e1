"""The consumer group's session timeout every test pipeline runs with, in-process or as a subprocess.

Tansu holds a group join for about half the session timeout, rounded up to a second, and a worker
killed with SIGKILL stays a member until its session expires: at 3 s instead of the default 6 s, every
pipeline start joins in 2 s instead of 3, and a restarted or surviving worker takes the dead one's
partitions 3 s sooner. The heartbeat stays a third of it (memstream.worker.app.group_timeouts), the
ratio production uses, so a test process starved of CPU for a second or two keeps its membership.
The two-worker failover test (tests/e2e/test_consolidation_failover_e2e.py) keeps the default: with two
live members a 1.5 s rebalance timeout could drop a starved one at every rebalance on a loaded machine.
"""

from __future__ import annotations

GROUP_SESSION_TIMEOUT_S = 3.0
#: For the environment of a `memstream up` (or any worker) subprocess.
GROUP_ENV = {"MEMSTREAM_GROUP_SESSION_TIMEOUT_S": f"{GROUP_SESSION_TIMEOUT_S:g}"}
