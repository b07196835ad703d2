"""The built-in simulated DFlash run that ``dflash-watch demo`` watches.

``story`` is the pure timeline (phases, throughput and memory models),
``simulator`` the process that plays it into ``train.log`` and ``gpu.jsonl``,
``fx_traceback`` the crash text it ends with.
"""
