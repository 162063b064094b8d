"""The `deltalog` command and its interactive faces: `run`, `repl`, `demo`, `serve`.

Layer: datalog.cli, the top of `datalog`: it may import every other datalog
package (and starts `server` only through `importlib`, for `deltalog serve`).
Nothing in `datalog` imports it. `commands` parses the command line; `display`
formats answers and changes for a terminal; `repl` and `demo` are the two
interactive sessions; `examples/` holds the programs and facts they ship with.
"""

import os

# The `deltalog` process is Deltalog's own and makes no BLAS call: numpy's OpenBLAS
# need not start a thread per core when it is imported (30-50 ms of CPU a launch;
# docs/adr/0066). A user's setting wins.
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
