"""Typed errors.  The CLI turns a UserError into one line and exit code 2."""


class VmtaxError(Exception):
    """Base of every error vmtax raises on purpose."""


class UserError(VmtaxError):
    """Bad input from the user: an unknown name, a malformed value."""


class TargetError(VmtaxError):
    """A target could not be started or could not run the agent."""


class AgentError(VmtaxError):
    """The agent crashed or printed something that is not its protocol."""


class StoreError(VmtaxError):
    """The results database failed (disk full, I/O error): what was stored is kept."""
