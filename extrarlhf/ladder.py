"""``extrarlhf.ladder.policy_ladder``, the path the documentation gave before the policies moved
into ``extrarlhf.policies`` (issue 25); new code imports ``extrarlhf.policies.ladder``."""

from .policies.ladder import policy_ladder

__all__ = ["policy_ladder"]
