"""A team in one file (`wardian.toml`): which agents, of which providers, with which settings, grants, workspaces
and credentials; read and checked whole by `load_team` (docs/guide/team-file.md)."""

from wardian.team.load import load_team
from wardian.team.model import DEFAULT_FILE, Team, TeamAgent, TeamFileError, TeamProblem

__all__ = ["DEFAULT_FILE", "Team", "TeamAgent", "TeamFileError", "TeamProblem", "load_team"]
