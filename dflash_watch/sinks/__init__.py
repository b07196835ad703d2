"""Alert sinks: where alerts go besides the screen and stdout (CONTRACTS section 10).

``settings`` reads ``[[alerts.sink]]`` tables into typed ``SinkConfig``s,
``payloads`` builds each kind's request from an alert (pure, testable
without a network), ``senders`` sends one (HTTP, a subprocess, the bell;
the kinds are declared once, in ``settings.SINK_KINDS``, each naming its
sender's factory, and ``senders.SENDERS`` is built from that table),
``dispatch`` runs one worker per sink so that a sink that hangs never
delays another, the Monitor or the screen.
"""
