"""`ray start ARGS` for ray-up.sh, also for a worker node of a loopback-only cluster.

ray-up.sh keeps every node on 127.0.0.1 with Ray's single-machine switch
RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER=0: with it, Ray does not swap a loopback node address for the host's
routable IP, so its servers listen on 127.0.0.1 only. `ray start --address` (a worker node) refuses
to run under that switch, a guard meant for Windows and macOS hosts; here every node shares one
machine, which is what the switch is for. So the guard alone sees the switch as off: only the
`ray start` command's view of the constant changes, Ray's address logic still reads the real one.
"""

import sys
import types

import ray._private.ray_constants as ray_constants
import ray.scripts.scripts as ray_scripts

guard_view = types.SimpleNamespace(**{k: v for k, v in vars(ray_constants).items() if not k.startswith("__")})
guard_view.ENABLE_RAY_CLUSTER = True
ray_scripts.ray_constants = guard_view
sys.argv[0] = "ray"
sys.exit(ray_scripts.main())
