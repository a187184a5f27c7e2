"""Agent setup (DESIGN section 13): put the skills where a client looks, register the MCP
server in that client's config, and check that it all works.
Imports ``extrarlhf.core`` and ``extrarlhf.production`` (the gate's status, names only).

- clients.py   the pinned server entry and each client's skill folder and config format
- install.py   ``install_skills`` / ``install_targets``: copy the skills (one copy per folder
               shared by several targets) and merge the MCP config, all or nothing
- trust.py     the settings ``--trust`` writes so a client uses the project's server unattended
- doctor.py    ``run_doctor``: interpreter, imports, the server over stdio, dirs, the gate
- commands.py  ``python -m extrarlhf skills install`` and ``python -m extrarlhf doctor``

Nothing here imports mcp: the doctor talks to the server as a client would, over a pipe.
"""

from .clients import CLIENTS, SERVER_NAME, ServerEntry, pinned_entry
from .doctor import run_doctor
from .install import install_skills, install_targets

__all__ = ["CLIENTS", "SERVER_NAME", "ServerEntry", "pinned_entry", "install_skills", "install_targets", "run_doctor"]
