"""How a provider child's process tree is contained and ended: one interface, chosen here at import.

- `SPAWN_OPTIONS`: the keyword arguments that start a child as the root of a tree of its own.
- `Tree(pid)`: the tree of a child just started: `terminate()` (the polite signal where there is one), `kill()`,
  `alive()` (whether any member still runs), `close()` (release it).
- `end_left_behind(pid)`: end the tree a killed app left behind, led by `pid`.

POSIX (`_tree_posix`): a process group of its own, signalled as one. Windows (`_tree_windows`): a kill-on-close Job
Object held by the app.
"""

import sys

if sys.platform == "win32":
    from wardian.providers._tree_windows import SPAWN_OPTIONS, Tree, end_left_behind
else:
    from wardian.providers._tree_posix import SPAWN_OPTIONS, Tree, end_left_behind

__all__ = ["SPAWN_OPTIONS", "Tree", "end_left_behind"]
