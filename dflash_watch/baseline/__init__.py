"""The baseline and "what changed": one home for the good run's profile.

Every later "throughput dropped", every padding floor and every "what
changed" is measured against the profile of a good run. What makes that
profile, keeps it, guards it and compares with it lives here, one concept
per module; only the pure ranking is elsewhere, beside the detectors
(``detectors.diagnosis``: testable without files, threads or clocks).

==================  ====================================================
``store``           the baseline file (CONTRACTS section 6): ``Baseline``,
                    ``load_baseline``, ``save_baseline`` (atomic)
``figures``         the baseline's keys as the detectors' references
                    (``figures_of``: padding, recompiles, retries)
``profile``         a run's profile in the file's shape, from a Monitor
                    that saw it (replay window or live); the suspects an
                    alert carries
``window``          the window ``baseline save``/``diff`` measure: a
                    Monitor that keeps only it, and what it counts on the
                    way (step interval, rates, padding, probe counters)
``guard``           whether a window may become the baseline (the ``b``
                    key and ``baseline save --from/--to``): no alert, no
                    crash, no exit in it
``auto``            the policy that saves a baseline by itself once the
                    run has been healthy and steady a while
``saver``           the thread that asks that policy, off the tick and
                    the UI thread
``diagnose``        what changed for the live Monitor (the dashboard's
                    ``d``): the ranked changes against its baseline
``environment``     which environment a command fingerprints: ``--env``
                    or the configured job's training process
``fingerprint/``    reading an environment from outside: ``/proc``,
                    dist-info, the compile cache
==================  ====================================================

Why one package: the file, its figures, the policy that writes it and the
comparison with it change together (a new key in the file is read by
``figures``, written by ``profile``, shown by ``baseline show``, compared
by ``detectors.diagnosis``); a reader finds them side by side. The command
faces stay in ``dflash_watch/commands/baseline*.py`` (arguments and
printing only) and the dashboard's in ``tui/``; ``Monitor.capture_baseline``
and ``Monitor.set_baseline`` stay on the Monitor, which owns the data.

This ``__init__`` imports nothing: ``dflash_watch.baseline.store`` is
loaded by the Monitor and must not pull in the rest (numpy, ``/proc``).
"""
