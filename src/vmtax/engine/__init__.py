"""The measurement engine that `compare` (runner.py) and `scale`
(scale.py) share, one implementation of each part:

- jobs: what one process measures (Job);
- protocol: an agent process's arguments, and the one reader of its
  lines (AgentReader, read_agent);
- execute: reading one process and recording it (run_process, run_tool,
  calibrate; Recorder, the one place that writes a process row);
- session: a run's record, its targets started and stopped with vmtax
  kept off their CPUs (TargetPool), its budget (budget.Deadline);
- blocks, lockstep, barrier: how a block's processes run (BlockExecutor:
  InTurn, Lockstep, Barrier), held processes driven by their handles;
- stop: when a row stops, a pure function of what it has stored;
- writer: the typed writes of a run (StoreWriter, ThreadRelay);
- hostcost: a tool run's host cost per unit of work."""

from .budget import BudgetSpent, Deadline, grace_s
from .execute import Lines, ProcessResult, Recorder, Where, calibrate, run_process, run_tool
from .jobs import Job, jobs_of
from .protocol import CALIBRATION_SAMPLES, agent_argv, read_agent
from .session import Session, TargetPool, new_run_id, run_session

__all__ = [
    "CALIBRATION_SAMPLES",
    "BudgetSpent",
    "Deadline",
    "Job",
    "Lines",
    "ProcessResult",
    "Recorder",
    "Session",
    "TargetPool",
    "Where",
    "agent_argv",
    "calibrate",
    "grace_s",
    "jobs_of",
    "new_run_id",
    "read_agent",
    "run_process",
    "run_session",
    "run_tool",
]
