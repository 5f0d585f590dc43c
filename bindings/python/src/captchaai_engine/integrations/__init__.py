"""Thin integrations of :mod:`captchaai_engine` with workflow frameworks, one module each:

- :mod:`captchaai_engine.integrations.airflow`: a deferrable operator and its trigger (Airflow 3).
- :mod:`captchaai_engine.integrations.dagster`: a ConfigurableResource, a pool sized to the plan's
  threads and the unsolvable-ratio asset check.
- :mod:`captchaai_engine.integrations.prefect`: a task helper whose retries refuse permanent
  failures, and a global concurrency limit as the thread budget (Prefect 3).
- :mod:`captchaai_engine.integrations.mage`: a data-loader block helper (Mage).
- :mod:`captchaai_engine.integrations.temporal`: solves as durable workflows, the engine inside
  the workflow, the key only on the worker, one thread budget across workers (Temporal).

Importing this package imports no framework; each module imports only its own. The modules hold
no protocol knowledge: every decision (what to send, how long to wait, what a reply means,
which failure class it is) comes from the engine through the package.
"""
