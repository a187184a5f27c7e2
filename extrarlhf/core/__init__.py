"""Small helpers every concern of ``extrarlhf`` shares. Imports the standard library, numpy and
``adapters.work`` only; never another ``extrarlhf`` subpackage.

- errors.py     the business errors (a stable ``code`` each) and the resource-error mapping
- echo.py       what an error may repeat: the secret detector, redaction, the length caps
- fileio.py     atomic writes, locks, fsync, temp files a crashed writer leaves
- procs.py      processes (/proc facts) and worker pools that die with their parent
- procpool.py   worker processes mapping a task function over chunks, in order (procpool_worker.py)
- progress.py   the CLI's progress line;  console.py  a result as JSON, a share as a percentage
- readiness.py  the readiness thresholds per training contour (``ReadinessPolicy``)
- work_caps.py  what one call may ask for (search sims x battles)
- names.py      the names of groups, datasets, pointers and checkpoints (one path component)
- clock.py      UTC timestamps as the records write them
- lazy.py       a package's public names imported on first use (the datasets, production and MCP packages)
"""
